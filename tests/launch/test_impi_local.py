"""Intel MPI for real on this machine: forced presets through the local backend, and a
campaign measuring Intel MPI with Open MPI and MPICH (`[measure] mpi`), which
`diff-mpi --results` then reads for two Intel MPIs and two MPICHs."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from collbench.catalog import impi
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.launch.base import KernelCall
from collbench.plan import Launch, Point
from collbench.tune import impi_decisions
from tests.backend_support import TEST_MPIS, make_backend, private_mpi

pytestmark = [pytest.mark.slow, pytest.mark.mpi]


@pytest.fixture(autouse=True)
def own_fabrics(monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel cache is collbench's own, as for tests/tune/test_impi_*.py: one build per
    # MPI for the suite (its builds are published whole, so workers may share it).
    monkeypatch.delenv("I_MPI_FABRICS", raising=False)  # collbench's choice, shm:ofi


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


SIZES = (64, 3000, 65536)  # 3000: a size diff-mpi's --sizes leave out (traced anyway)
PAIRS = (("impi17", "impi"), ("mpich4", "mpich"))  # the versions diff-mpi compares


def test_one_campaign_of_five_mpis_and_diff_mpi_on_its_pairs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`[measure] mpi` with two Intel MPIs, Open MPI 5.0.11 and two MPICHs: rows of each;
    then `diff-mpi A B --results` on the real rows for both pairs (Open MPI's pair:
    tests/test_multi_mpi_run.py), Intel MPI's defaults traced from each library."""
    names = ("impi17", "impi", "openmpi5", "mpich4", "mpich")
    for name in names:
        private_mpi(name)  # installed when missing
    wanted = [TEST_MPIS[n] for n in names]
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "five"\n[measure]\ncollectives = ["bcast"]\n'
                    f'sizes = {list(SIZES)}\nnprocs = [2]\nalgorithms = ["default"]\n'
                    f"iterations = 10\nwarmup = 1\nmpi = {json.dumps(wanted)}\n"
                    "[run]\nrepetitions = 2\n")
    out = tmp_path / "out"
    assert main(["run", str(spec), "-o", str(out), "-q"]) == 0
    rows = [json.loads(line) for f in (out / "launches").glob("*.jsonl")
            for line in f.read_text().splitlines()]
    keys = {w.replace("==", "-") for w in wanted}
    assert {r["mpi"] for r in rows} == keys and all(r["status"] == "ok" for r in rows)
    assert len(rows) == len(keys) * len(SIZES) * 2
    prov = json.loads((out / "provenance.json").read_text())
    intel = prov["mpis"][TEST_MPIS["impi"].replace("==", "-")]["mpi"]
    assert intel["implementation"] == "impi"
    assert intel["environment"]["I_MPI_ROOT"] == str(private_mpi("impi"))

    traced: list[impi_decisions.TracedDefaults] = []

    class Seen(impi_decisions.TracedDefaults):  # keeps what diff-mpi traced, to read below
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            traced.append(self)

    monkeypatch.setattr(impi_decisions, "TracedDefaults", Seen)
    measured: dict[str, dict[int, Any]] = {}
    for a, b in ((TEST_MPIS[x], TEST_MPIS[y]) for x, y in PAIRS):
        capsys.readouterr()
        assert main(["diff-mpi", a, b, "--results", str(out), "--all", "--format", "json",
                     "--collective", "bcast", "--sizes", "64,4096,65536"]) == 0
        data = json.loads(capsys.readouterr().out)
        assert (data["a"], data["b"], data["figure"]) == (a, b, "avg_us")
        for c in data["decisions"]:  # a change names what each side runs
            assert c["a"] != c["b"] and c["collective"] == "bcast"
        got = measured[a] = {m["size_bytes"]: m for m in data["measured"]}
        assert sorted(got) == list(SIZES)  # every default point of the pair, no other MPI's
        for size, m in got.items():  # the median over repetitions of each side's rows
            av, bv = (statistics.median(r["avg_us"] for r in rows if r["size_bytes"] == size
                                        and r["mpi"] == s.replace("==", "-")) for s in (a, b))
            assert (m["a_value"], m["b_value"]) == (pytest.approx(av), pytest.approx(bv))
            assert m["ratio"] == pytest.approx(bv / av)
            # 2 repetitions a side: an exact Mann-Whitney p is at least 1/3, never significant
            assert m["verdict"] == "same" and not m["first_changed"], m
            assert m["context"].startswith("bcast np=2 ")
    older, newer = traced  # Intel MPI's pair only: MPICH's decisions are its library's table
    # 2021.18.1 at 2 ranks on one node: binomial for small messages, then its shared-memory
    # gather/release bcast, then scatter + recursive doubling allgather
    assert [newer.decide("bcast", 2, s) for s in (64, 4096, 65536)] == [
        "Bcast_intra_binomial", "SHMGR_Gather SHMGR_Release_bcast",
        "Bcast_intra_scatter_recursive_doubling_allgather"]
    assert older.decide("bcast", 2, 3000) and newer.decide("bcast", 2, 3000)  # measured
    assert newer.decide("bcast", 2, 128) == ""  # neither asked nor measured: unknown
    for size, m in measured[TEST_MPIS["impi17"]].items():  # the switch is the traced one
        was, now = older.decide("bcast", 2, size), newer.decide("bcast", 2, size)
        assert m["switch"] == (f"{was} -> {now}" if was != now else ""), (size, was, now)


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
