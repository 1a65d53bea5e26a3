"""`tune --impi`: an Intel MPI JSON tuning file; `rules check --impi` reads it as Intel MPI does;
a real Intel MPI job proves the file is what it runs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.catalog import impi as catalog_impi
from collbench.catalog.algorithms import Catalog
from collbench.cli import main
from collbench.tune import impi, impi_check
from collbench.tune.impi_check import rule_for
from collbench.tune.select import Choice, Selection
from tests.tune.fakedata import write_store

THRESHOLD = 8192  # preset1 wins below, preset12 from here on (a preset that falls back at 2
# ranks on one node: forcing it aborts the job naming it, which is the proof)
ALGORITHMS = [("default", 0), ("preset1", 1), ("preset12", 12)]


def timing(coll: str, alg: str, size: int, nprocs: int) -> float:
    one, twelve = 5 + size / 100, 60 + size / 1000
    return {"preset1": one, "preset12": twelve}.get(alg, 1.5 * min(one, twelve))


def results(root: Path) -> Path:
    write_store(root, mpi="impi", version="2021.18.1", collectives=["bcast"],
                algorithms=ALGORITHMS, sizes=[1024, 4096, THRESHOLD, 65536], nprocs=[2, 4],
                repetitions=6, timing=timing)
    return root


CATALOG = Catalog("impi", "2021.18.1", "test", catalog_impi.presets(
    {"I_MPI_ADJUST_BCAST": 22, "I_MPI_ADJUST_ALLREDUCE": 24}))


def test_tune_writes_ascending_levels_that_the_checker_reads_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tuned.json"
    assert main(["tune", str(results(tmp_path / "r")), "--impi", "--extrapolate", "-o",
                 str(out)]) == 0
    assert "I_MPI_TUNING=" in capsys.readouterr().out
    tree = json.loads(out.read_text())
    comm = tree["coll=Bcast"]["ppn=-1"]
    assert list(comm) == ["comm_size=2", "comm_size=-1"]
    assert comm["comm_size=2"]["comm_id=-1"] == {
        f"msg_size={THRESHOLD - 1}": {"BCAST=1": {}}, "msg_size=-1": {"BCAST=12": {}}}
    r = impi_check.read(out.read_bytes(), CATALOG)
    assert r.ok and r.problems == [] and all(e.reached for e in r.entries)
    assert {(e.comm_size, e.msg_size, e.preset) for e in r.entries} >= {
        (2, THRESHOLD - 1, 1), (2, -1, 12)}
    assert main(["rules", "check", "--impi", str(out)]) == 0


def test_a_file_that_reaches_beyond_the_measured_counts_is_an_explicit_choice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An Intel MPI file cannot hand a communicator size back to Intel's own tuning, so the
    np=4 rules serve np=1024 and several nodes too: without --extrapolate, one line and
    nothing written; with it, the reach said."""
    out = tmp_path / "tuned.json"
    res = results(tmp_path / "r")
    assert main(["tune", str(res), "--impi", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "measured at np 2, 4" in err[0] and "--extrapolate" in err[0]
    assert not out.exists()
    assert main(["tune", str(res), "--impi", "--extrapolate", "-o", str(out)]) == 0
    said = capsys.readouterr().out
    assert "note: EXTRAPOLATED (--extrapolate): measured at np 2, 4; Intel MPI applies the " \
           "np=4 rules to every larger communicator" in said and "every ppn" in said, said


def test_the_checker_names_what_intel_mpi_would_not_read_as_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = {"coll=Bcast": {"ppn=-1": {"comm_size=-1": {"comm_id=-1": {
        "msg_size=-1": {"BCAST=1": {}}, "msg_size=16": {"BCAST=23": {}}}}}},
        "coll=Nope": {}}
    r = impi_check.read(json.dumps(tree).encode(), CATALOG)
    said = " | ".join(p.message for p in r.problems)
    assert not r.ok
    assert "msg_size=16: never reached" in said and "BCAST=23: not a bcast preset" in said
    assert "'coll=Nope': not a collective" in said
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(tree))
    assert main(["rules", "check", "--impi", str(bad)]) == 1
    assert main(["rules", "check", "--impi", str(tmp_path / "absent.json")]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_validate_reads_a_rule_as_intel_mpi_does() -> None:
    """The lookup the experiments found: first key at least the call's value, -1 matches
    anything, else the last key (docs/impi.md)."""
    tree = {"coll=Bcast": {"ppn=2": {"comm_size=4": {"comm_id=-1": {
        "msg_size=16": {"BCAST=1": {}}, "msg_size=64": {"BCAST=12": {}}}}},
        "ppn=-1": {"comm_size=-1": {"comm_id=-1": {"msg_size=-1": {"BCAST=3": {}}}}}}}
    entries = impi_check.read(json.dumps(tree).encode(), CATALOG).entries
    assert rule_for(entries, "bcast", 2, 16) == 1
    assert rule_for(entries, "bcast", 2, 17) == 12
    assert rule_for(entries, "bcast", 2, 1 << 20) == 12  # above the last key: the last
    assert rule_for(entries, "bcast", 4, 1) == 3  # ppn 4 > 2: the -1 set
    assert rule_for(entries, "allreduce", 2, 1) is None


def test_tune_impi_refuses_rows_of_another_mpi() -> None:
    sel = Selection("openmpi", "5.0.11", 3, True, {("bcast", 2): (Choice(0, "default", 0),)})
    with pytest.raises(Exception, match="valid: a results folder of Intel MPI"):
        impi.build(sel, "r")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_the_reader_takes_any_bytes(data: bytes) -> None:
    r = impi_check.read(data, CATALOG)
    assert isinstance(r.ok, bool)


json_tree = st.recursive(
    st.none() | st.integers() | st.text(max_size=5),
    lambda kids: st.dictionaries(
        st.sampled_from(["coll=Bcast", "ppn=-1", "ppn=2", "comm_size=4", "comm_id=-1",
                         "msg_size=16", "msg_size=-1", "BCAST=3", "BCAST=99", "x"])
        | st.text(max_size=12), kids, max_size=4), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(json_tree)
def test_the_reader_takes_any_json(tree: object) -> None:
    r = impi_check.read(json.dumps(tree).encode(), CATALOG)
    assert all(e.collective == "bcast" for e in r.entries)


PROGRAM = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int c, char **v) {
  static char buf[1 << 20]; int r;
  MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Bcast(buf, atoi(v[1]), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (!r) printf("bcast done\n");
  MPI_Finalize(); return 0;
}
"""


@pytest.mark.slow
@pytest.mark.mpi
def test_intel_mpi_runs_the_preset_the_written_file_names(tmp_path: Path) -> None:
    """Below the threshold the file's preset1 runs; from it, preset12, which cannot run at 2
    ranks here: the fallback check aborts the job naming algo #12. Without the file the same
    call runs Intel MPI's own choice, which does not abort."""
    from tests.backend_support import private_mpi

    prefix = private_mpi("impi")
    bindir = prefix / "bin"
    out = tmp_path / "tuned.json"
    assert main(["tune", str(results(tmp_path / "r")), "--impi", "--extrapolate", "-o",
                 str(out)]) == 0
    env = {**os.environ, **catalog_impi.environment(bindir), "PATH": f"{bindir}:"
           + os.environ.get("PATH", "")}
    env.pop("I_MPI_TUNING", None)
    src = tmp_path / "b.c"
    src.write_text(PROGRAM)
    subprocess.run([str(bindir / "mpicc"), str(src), "-o", str(tmp_path / "b")], env=env,
                   check=True, timeout=120)
    mpirun = shutil.which("mpirun", path=str(bindir))
    assert mpirun is not None

    def run(size: int, tuned: bool, path: Path = out) -> str:
        extra = [a for k, v in impi.proof_env(path) for a in ("-genv", k, v)] if tuned else \
            ["-genv", catalog_impi.FALLBACK_VAR, "1"]
        p = subprocess.run([mpirun, "-np", "2", "-genv", "I_MPI_FABRICS", "shm:ofi", *extra,
                            str(tmp_path / "b"), str(size)], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
        return p.stdout + p.stderr

    assert "bcast done" in run(THRESHOLD - 1, tuned=True)
    above = run(THRESHOLD, tuned=True)
    assert "bcast done" not in above and "BCAST: algo #12 has fallback" in above
    assert "bcast done" in run(THRESHOLD, tuned=False)

    # rules check's "never reached" is Intel MPI's own reading: keys in file order, the first
    # at least the call's bytes wins, so a 16 B call takes 1000's preset1, never 100's
    # preset12; with 100 first, the same call takes preset12 and the fallback check aborts
    def keys(*pairs: tuple[int, int]) -> dict[str, object]:
        return {"coll=Bcast": {"ppn=-1": {"comm_size=-1": {"comm_id=-1": {
            f"msg_size={k}": {f"BCAST={v}": {}} for k, v in pairs}}}}}

    shadowed, first = tmp_path / "shadowed.json", tmp_path / "first.json"
    shadowed.write_text(json.dumps(keys((1000, 1), (100, 12), (-1, 1))))
    first.write_text(json.dumps(keys((100, 12), (1000, 1), (-1, 1))))
    said = [p.message for p in impi_check.read(shadowed.read_bytes(), CATALOG).problems]
    assert len(said) == 1 and "msg_size=100: never reached" in said[0], said
    assert impi_check.read(first.read_bytes(), CATALOG).ok
    assert "bcast done" in run(16, tuned=True, path=shadowed)
    assert "BCAST: algo #12 has fallback" in run(16, tuned=True, path=first)

    # tune validate --impi: both arms measured, paired per size, every point switched
    runnable = tmp_path / "runnable.json"
    runnable.write_text(json.dumps({"coll=Bcast": {"ppn=-1": {"comm_size=-1": {
        "comm_id=-1": {"msg_size=-1": {"BCAST=1": {}}}}}}}))
    assert main(["tune", "validate", "--impi", str(runnable), "-n", "2", "--repetitions",
                 "2", "--sizes", "1,4K", "--iterations", "20", "--mpi",
                 "impi==2021.18.1"]) in (0, 1)
    from collbench.store import Store
    from collbench.tune.validate import analyse

    v = analyse(Store(tmp_path / "runnable.json.validate"), None,
                switches=lambda r: True)
    assert [(r.collective, r.size) for r in v.rows] == [("bcast", 1), ("bcast", 4096)]
    assert all(r.default_us > 0 and r.tuned_us > 0 for r in v.rows)
