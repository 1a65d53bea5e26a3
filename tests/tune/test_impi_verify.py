"""`rules verify --impi`: the functions Intel MPI calls with the file, with the preset it
names forced, and without it (the impitrace library), judged per rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.tune import impi_check
from collbench.tune.impi_verify import boundaries, judge, parse_trace
from collbench.tune.rules import MsgRule
from collbench.tune.verify import Boundary

# bcast at 2 ranks: preset3 up to 8191 B, Intel's own choice up to 64 KiB - 1, then preset12
# (which cannot run at 2 ranks on one node: forced alone, the fallback check stops it)
FILE = {"coll=Bcast": {"ppn=-1": {"comm_size=-1": {"comm_id=-1": {
    "msg_size=8191": {"BCAST=3": {}}, "msg_size=65535": {"BCAST=0": {}},
    "msg_size=-1": {"BCAST=12": {}}}}}}}


def point(preset: int) -> Boundary:
    return Boundary("bcast", 2, 64, 64, MsgRule(64, preset, 0, 0), -1)


def test_the_points_are_each_key_and_the_size_above_it_with_the_file_s_preset() -> None:
    reading = impi_check.read(json.dumps(FILE).encode())
    points, skipped = boundaries(reading, [2])
    assert skipped == []
    assert [(p.size, p.rule.alg) for p in points] == [
        (1, 3), (8191, 3), (8192, 0), (65535, 0), (65536, 12)]


def test_a_rule_is_proven_by_the_forced_preset_s_functions_and_only_where_they_differ() -> None:
    a, b = frozenset({"MPIR_Bcast_intra_binomial"}), frozenset({"MPIR_Bcast_intra_kary"})
    assert judge(point(3), b, b, a).ok is True
    assert judge(point(3), a, b, a).ok is False  # the file's run is the default's
    assert judge(point(3), b, b, b).ok is None  # the preset runs what the default runs
    assert judge(point(0), a, None, a).ok is True
    assert judge(point(0), b, None, a).ok is False
    failed = judge(point(12), a, None, b, "bcast preset12 cannot run here")
    assert failed.ok is False and "preset12 cannot run" in failed.detail
    assert judge(point(3), None, b, a).ok is False  # nothing traced proves nothing
    # the file's run and the forced preset's both ran functions impitrace does not watch
    assert judge(point(3), None, None, a).ok is None
    # a forced preset that cannot run: its reason, also where the file's run fell back unseen
    assert "cannot run" in judge(point(3), None, None, a, "preset3 cannot run here").detail


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096))
def test_the_trace_reader_takes_any_bytes(data: bytes) -> None:
    for (coll, size), fns in parse_trace(data.decode(errors="replace"), 2).items():
        assert coll and size >= 0 and all(len(f) <= 200 for f in fns)


@pytest.mark.slow
@pytest.mark.mpi
def test_intel_mpi_runs_each_rule_of_the_file(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """One verify (5 traced launches): preset3's rules run its functions, not the default's;
    preset 0 runs the default's; preset12 cannot run here, and verify says so (exit 1);
    allreduce's Reduce + Bcast preset runs the bcast the file names."""
    from tests.backend_support import private_mpi

    private_mpi("impi")  # skips where the test MPIs are not installed
    path = tmp_path / "tuned.json"
    # allreduce preset 3 is Reduce + Bcast: its bcast follows the file's bcast rule (preset3
    # at 1 B) in the file's run and, with the file loaded, in the forced run too
    path.write_text(json.dumps({**FILE, "coll=Allreduce": {"ppn=-1": {"comm_size=-1": {
        "comm_id=-1": {"msg_size=-1": {"ALLREDUCE=3": {}}}}}}}))
    keep = tmp_path / "keep"
    assert main(["rules", "verify", "--impi", str(path), "-n", "2", "--mpi",
                 "impi==2021.18.1", "--keep", str(keep)]) == 1
    out = capsys.readouterr().out
    rows = {int(line.split()[2]): line for line in out.splitlines()
            if line.startswith("bcast ")}
    assert sorted(rows) == [1, 8191, 8192, 65535, 65536], out
    for size in (1, 8191):  # preset3 at 2 ranks: scatter + ring allgather
        assert "preset3" in rows[size] and " yes" in rows[size], out
        assert rows[size].count("scatter_ring_allgather") == 1, out  # the default differs
    # Preset 0 in a file is not Intel MPI's tuned default (2021.18.1: binomial where the
    # default runs scatter + recursive doubling at 8 KiB): verify judges it by the functions
    for size in (8192, 65535):
        assert "Intel MPI's choice" in rows[size] and "not seen" not in rows[size], out
        assert rows[size].rstrip().endswith(" yes") or \
            rows[size].endswith("NO   preset 0 should run what Intel MPI runs without the file")
    assert " NO " in rows[65536] and "preset12 cannot run here" in rows[65536], out
    composite = next(line for line in out.splitlines() if line.startswith("allreduce "))
    assert "Bcast_intra_scatter_ring_allgather" in composite  # the file's bcast, inside
    assert " yes" in composite, out
    assert "MISMATCH:" in out
    assert {p.name for p in keep.glob("*.trace.*")} >= {
        f"np2-{arm}.trace.{r}" for arm in ("file", "default", "bcast-preset3") for r in (0, 1)}
