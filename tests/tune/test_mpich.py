"""An MPICH csel JSON file that the real MPICH (PyPI `mpich` wheel) accepts and that switches
an algorithm. MPICH lives in its own prefix so that its mpicc never shadows Open MPI's:
$COLLBENCH_MPICH, else the private prefix `collbench mpi install` made (tests.backend_support
.private_mpi, which installs it when missing)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.kernel.build import build_kernel
from collbench.tune.mpich import activation, builtin_table
from tests.backend_support import private_mpi
from tests.tune.fakedata import write_store

pytestmark = pytest.mark.mpi

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def mpich_prefix() -> Path:
    candidate = os.environ.get("COLLBENCH_MPICH")
    if candidate and (Path(candidate) / "bin" / "mpichversion").exists():
        return Path(candidate)
    return private_mpi("mpich")


def timing(coll: str, alg: str, size: int, nprocs: int) -> float:
    """binomial below 8 KiB, the knomial tree from 8 KiB; MPICH's default 1.5x the best."""
    binomial, tree = 5 + size / 400, 20 + size / 2000
    return {"binomial": binomial, "tree": tree}.get(alg, 1.5 * min(binomial, tree))


def _tree_dumps(kernel: Path, prefix: Path, size: int, env: dict[str, str], cwd: Path,
                np: int = 4) -> int:
    """Lines MPICH prints when it builds a knomial tree (tree_type=1), for one bcast size."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "jobs.txt").write_text(f"bcast 0 0 0 {size} 3 1\n")
    run = subprocess.run([str(prefix / "bin" / "mpiexec"), "-np", str(np), str(kernel), "--jobs",
                          "jobs.txt", "--output", "out.jsonl"], cwd=cwd, capture_output=True,
                         text=True, timeout=120, check=False,
                         env={**os.environ, "MPIR_CVAR_COLL_TREE_DUMP": "1", **env})
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((cwd / "out.jsonl").read_text())["status"] == "ok"
    return (run.stdout + run.stderr).count("tree_type=1:")


def test_mpich_accepts_the_json_and_switches_the_algorithm(
        mpich_prefix: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Measured with knomial trees: the file's tree container must carry that tree type.
    store = write_store(tmp_path / "res", mpi="mpich", version="5.0.2", collectives=["bcast"],
                        algorithms=[("default", None), ("binomial", None), ("tree", None)],
                        sizes=[1024, 4096, 8192, 65536], nprocs=[4], repetitions=6,
                        timing=timing,
                        environment={"MPIR_CVAR_BCAST_TREE_TYPE": "knomial_1"})
    out = tmp_path / "tuned.json"
    assert main(["tune", str(store.root), "--mpich", "-o", str(out), "--mpi",
                 str(mpich_prefix)]) == 0
    printed = capsys.readouterr().out
    assert f"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE={out.resolve()}" in printed
    assert "MPIR_CVAR_BCAST_DEVICE_COLLECTIVE=0" in printed
    assert "outside np 4 this file keeps MPICH's own choice" in printed

    mpi = find_mpi(mpich_prefix)
    table = json.loads(out.read_text())
    builtin, _ = builtin_table(mpi)
    assert list(table) == list(builtin)  # it replaces the built-in table: every collective
    assert table["collective=gather"] == builtin["collective=gather"]
    # measured at 4 ranks only: MPICH's own branch below and above
    intra = table["collective=bcast"]["comm_type=intra"]
    own = builtin["collective=bcast"]["comm_type=intra"]
    assert list(intra) == ["comm_size<4", "comm_size<5", "comm_size=any"]
    assert intra["comm_size<4"] == own and intra["comm_size=any"] == own
    bcast = intra["comm_size<5"]
    assert list(bcast) == ["avg_msg_size<8192", "avg_msg_size=any"]
    assert bcast["avg_msg_size<8192"] == {"algorithm=MPIR_Bcast_intra_binomial": {}}
    assert "tree_type=knomial_1" in bcast["avg_msg_size=any"]["algorithm=MPIR_Bcast_intra_tree"]

    kernel = build_kernel(mpi.mpicc, cache_dir=tmp_path / "cache").path
    env = dict(activation(out, ["bcast"]))
    assert _tree_dumps(kernel, mpich_prefix, 1024, env, tmp_path / "small") == 0
    assert _tree_dumps(kernel, mpich_prefix, 65536, env, tmp_path / "large") > 0
    # without the file MPICH builds no knomial tree; forcing the algorithm does, like the file
    assert _tree_dumps(kernel, mpich_prefix, 65536, {}, tmp_path / "default") == 0
    forced = {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "tree", "MPIR_CVAR_BCAST_TREE_TYPE":
              "knomial_1", "MPIR_CVAR_DEVICE_COLLECTIVES": "none"}
    assert _tree_dumps(kernel, mpich_prefix, 65536, forced, tmp_path / "forced") > 0
    # at 6 ranks (not measured) the file leaves bcast to MPICH; --extrapolate applies it
    assert _tree_dumps(kernel, mpich_prefix, 65536, env, tmp_path / "np6", np=6) == 0
    wide = tmp_path / "wide.json"
    assert main(["tune", str(store.root), "--mpich", "--extrapolate", "-o", str(wide),
                 "--mpi", str(mpich_prefix)]) == 0
    assert "EXTRAPOLATED (--extrapolate): measured at np 4; MPICH applies" in \
        capsys.readouterr().out
    assert list(json.loads(wide.read_text())["collective=bcast"]["comm_type=intra"]) == \
        ["comm_size=any"]
    wide_env = dict(activation(wide, ["bcast"]))
    assert _tree_dumps(kernel, mpich_prefix, 65536, wide_env, tmp_path / "np6x", np=6) > 0


def test_mpich_json_needs_mpich_measurements(mpich_prefix: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    store = write_store(tmp_path / "res", mpi="openmpi", version="5.0.11",
                        collectives=["bcast"], algorithms=[("default", 0), ("binomial", 6)],
                        sizes=[1024], nprocs=[4], repetitions=6, timing=timing)
    assert main(["tune", str(store.root), "--mpich", "-o", str(tmp_path / "t.json"), "--mpi",
                 str(mpich_prefix)]) == 2
    err = capsys.readouterr().err
    assert "MPICH measurements" in err and err.count("\n") == 1
