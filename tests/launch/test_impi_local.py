"""Intel MPI for real on this machine: forced presets through the local backend, and a
campaign measuring Intel MPI and Open MPI together (`[measure] mpi`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.catalog import impi
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.launch.base import KernelCall
from collbench.plan import Launch, Point
from tests.backend_support import TEST_MPIS, make_backend, private_mpi

pytestmark = [pytest.mark.slow, pytest.mark.mpi]


@pytest.fixture(autouse=True)
def own_fabrics(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("I_MPI_FABRICS", raising=False)  # collbench's choice, shm:ofi
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))


def forced(alg_id: int, name: str, size: int) -> Launch:
    catalog_alg = impi.presets({"I_MPI_ADJUST_BCAST": alg_id})["bcast"][-1]
    env = tuple(sorted(impi.forcing_env("bcast", catalog_alg).items()))
    return Launch(launch_id=f"{alg_id:04d}-impi", repetition=0, nprocs=2, mapping="core",
                  binding="core", oversubscribe=False, mca=(), env=env, swept=(),
                  selection="launch", points=(Point("bcast", name, alg_id, 0, 0, size, 5, 1),),
                  timeout_s=60.0, validate=False, samples=False)


def test_every_bcast_preset_runs_as_forced_or_fails_saying_so(tmp_path: Path) -> None:
    mpi = find_mpi(private_mpi("impi"))
    local = make_backend("local", mpi)
    kernel = local.build_kernel()
    ran, refused = [], []
    for alg in load_catalog(mpi).of("bcast"):
        assert alg.id is not None
        launch = forced(alg.id, alg.name, 1024)
        work = tmp_path / alg.name
        work.mkdir()
        call = KernelCall(kernel.path, work / "jobs.txt", work / "out.jsonl")
        call.prepare(launch)
        out = local.run(launch, call, lambda: False)
        if out.status == "ok":
            row = json.loads(call.outfile.read_text().splitlines()[0])
            assert (row["algorithm_id"], row["size_bytes"]) == (alg.id, 1024)
            ran.append(alg.id)
        else:  # one line naming the forced preset: never another preset's timings
            assert out.status == "failed" and "\n" not in out.stderr_tail, out.stderr_tail
            assert f"I_MPI_ADJUST_BCAST={alg.id}: bcast {alg.name} cannot run here" \
                in out.stderr_tail
            refused.append(alg.id)
    # 2 ranks on one node: the plain presets run, the node-topology ones fall back
    assert ran and refused, (ran, refused)


def test_a_campaign_measures_intel_mpi_and_open_mpi_together(tmp_path: Path) -> None:
    private_mpi("impi"), private_mpi("openmpi5")  # installed when missing
    spec = tmp_path / "spec.toml"
    wanted = [TEST_MPIS["impi"], TEST_MPIS["openmpi5"]]
    spec.write_text('[campaign]\nname = "two"\n[measure]\ncollectives = ["bcast"]\n'
                    'sizes = [8, 4096]\nnprocs = [2]\nalgorithms = ["default"]\n'
                    f"iterations = 10\nwarmup = 1\nmpi = {json.dumps(wanted)}\n")
    assert main(["run", str(spec), "-o", str(tmp_path / "out"), "-q"]) == 0
    rows = [json.loads(line) for f in (tmp_path / "out" / "launches").glob("*.jsonl")
            for line in f.read_text().splitlines()]
    keys = {w.replace("==", "-") for w in wanted}
    assert {r["mpi"] for r in rows} == keys and all(r["status"] == "ok" for r in rows)
    assert len(rows) == 4
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    intel = prov["mpis"][TEST_MPIS["impi"].replace("==", "-")]["mpi"]
    assert intel["implementation"] == "impi"
    assert intel["environment"]["I_MPI_ROOT"] == str(private_mpi("impi"))


def test_a_campaign_forces_presets_and_a_fallback_is_a_failed_point(tmp_path: Path) -> None:
    """`algorithms = ["default", "preset1", "preset12"]` under Intel MPI at 2 ranks on one
    node: preset1 runs as forced, preset12 cannot run here and fails, saying so."""
    prefix = private_mpi("impi")
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "presets"\n[measure]\ncollectives = ["bcast"]\n'
                    'sizes = [8]\nnprocs = [2]\nalgorithms = ["default", "preset1", '
                    '"preset12"]\niterations = 10\nwarmup = 1\n')
    assert main(["run", str(spec), "-o", str(tmp_path / "out"), "-q", "--mpi",
                 str(prefix)]) == 1  # not every point measured
    rows = {r["algorithm"]: r for f in (tmp_path / "out" / "launches").glob("*.jsonl")
            for r in map(json.loads, f.read_text().splitlines())}
    assert rows["default"]["status"] == "ok" and rows["preset1"]["status"] == "ok"
    assert rows["preset1"]["component"] == "impi"
    assert rows["preset12"]["status"] == "failed"
    assert "I_MPI_ADJUST_BCAST=12" in str(rows["preset12"]["error"])
    params = json.loads(rows["preset1"]["params"])  # forcing is no setting of the point
    assert not any(k.startswith("I_MPI_ADJUST") for k in params["env"]), params
