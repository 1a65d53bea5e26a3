"""The one read door (collbench.points): the point identity, readers that keep a subset of
it refused where they would merge points, and every reader agreeing on the same folder."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench import open as open_results
from collbench import points
from collbench.analyse import compare
from collbench.analyse.against import read_points
from collbench.analyse.modeldata import collective_rows
from collbench.analyse.show import aggregate
from collbench.campaign import create_folder
from collbench.cli import main
from collbench.errors import UserError
from collbench.records import make_row
from collbench.store import Store
from collbench.study.decide import fetch_rows
from collbench.tune.adaptive.replay import load

SIZES = (1, 4, 16, 64, 256, 1024, 4096)


def row(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(
        campaign="t", launch_id="l0", repetition=0, backend="fake", source="kernel",
        mpi="openmpi-5.0.11", mpi_version="5.0.11", collective="bcast", algorithm="default",
        algorithm_id=0, segsize=0, fanout=0, selection="mpit", params="{}", nprocs=4,
        nodes=1, ppn=4, mapping="core", binding="core", size_bytes=1, iterations=100,
        warmup=10, avg_us=1.0, min_us=0.9, max_us=1.1, median_us=1.0, status="ok")
    base.update(kw)
    return make_row(**base)


def folder(root: Path, launches: dict[str, list[dict[str, Any]]]) -> Store:
    store = Store(root)
    create_folder(store, {"name": root.name, "seed": 0, "backend": "fake"}, "# test\n",
                  {"launches": []}, {"cores": 2, "sockets": 1})
    for lid, rows in launches.items():
        store.write_launch(lid, rows, {"status": "ok"})
    return store


def sweep(root: Path, contexts: dict[str, dict[str, Any]], reps: int = 3) -> Store:
    """2 algorithms × 7 sizes × `reps` repetitions per context (name -> row fields)."""
    launches: dict[str, list[dict[str, Any]]] = {}
    for c, (name, fields) in enumerate(contexts.items()):
        for rep in range(reps):
            lid = f"{name}-{rep}"
            launches[lid] = [
                row(launch_id=lid, repetition=rep, algorithm=alg, algorithm_id=a,
                    size_bytes=size, avg_us=(1 + a) * (1 + c) * (10 + size) * (1 + rep / 100),
                    **fields)
                for a, alg in enumerate(("default", "binomial")) for size in SIZES]
    return folder(root, launches)


def fanout(v: int) -> dict[str, Any]:
    return {"params": json.dumps({"mca": {"coll_tuned_bcast_tree_fanout": str(v),
                                          "coll_tuned_bcast_algorithm": "6"}})}


# --- the identity -------------------------------------------------------------------------

def test_context_drops_forcing_keys_and_keeps_the_rest() -> None:
    params = json.dumps({"mca": {"coll_tuned_bcast_algorithm": "6", "btl": "self,sm"},
                         "env": {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}, "swept": {}})
    assert points.context(params) == json.dumps({"mca": {"btl": "self,sm"}})
    assert points.context(json.dumps({"mca": {"coll_tuned_bcast_algorithm": "6"}})) is None
    assert json.loads(points.context(None, {"test_calls": 25}) or "") == {
        "nonblocking": {"test_calls": 25}}
    assert points.transport(points.context(params)) == "btl=self,sm"
    assert points.transport(None) == "default"


def test_view_decodes_metrics_figures_and_the_mpi_key(tmp_path: Path) -> None:
    store = folder(tmp_path / "f", {"a": [
        row(metrics=json.dumps({"completion_us": 2.5, "p99_us": 3.0, "test_calls": 25,
                                "flag": True, "model": "x"})),
        row(size_bytes=4, mpi="openmpi", mpi_version="4.1.8", metrics="not json")]})
    got = {r["size_bytes"]: r for r in points.read(store)}
    assert got[1]["completion_us"] == 2.5 and got[1]["p99_us"] == 3.0
    assert json.loads(got[1]["context"]) == {"nonblocking": {"test_calls": 25}}
    assert got[4]["completion_us"] is None and got[4]["context"] is None
    # a format-1 row (implementation and version apart) gets the MPI's key
    assert (got[1]["mpi"], got[4]["mpi"]) == ("openmpi-5.0.11", "openmpi-4.1.8")
    assert "flag_us" not in got[1] and "model" not in got[1]


# --- the merged contexts (issue 23's defect) ----------------------------------------------

def test_mca_sweep_is_two_points_for_compare_and_refused_by_model_readers(
        tmp_path: Path) -> None:
    store = sweep(tmp_path / "f", {"f2": fanout(2), "f4": fanout(4)})
    assert len(compare(store).points) == 2 * 2 * len(SIZES)
    for read in (lambda: collective_rows(store), lambda: read_points(store)):
        with pytest.raises(UserError, match="MCA/environment/workload setting per point"):
            read()


def test_two_mpis_are_refused_by_model_readers(tmp_path: Path) -> None:
    store = sweep(tmp_path / "f", {"a": {"mpi": "openmpi-5.0.11"},
                                   "b": {"mpi": "openmpi-4.1.8", "mpi_version": "4.1.8"}})
    with pytest.raises(UserError, match=r"one MPI per point .*openmpi-4\.1\.8"):
        collective_rows(store)
    assert len(compare(store).points) == 2 * 2 * len(SIZES)


def test_compare_against_itself_refuses_a_swept_campaign_from_collbench_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: a fake-backend campaign sweeping a bcast MCA parameter."""
    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    spec.write_text('[campaign]\nname = "sweep"\n[measure]\ncollectives = ["bcast"]\n'
                    'algorithms = ["default", "binomial"]\nsizes = ["1:64"]\nnprocs = [2]\n'
                    '[run]\nbackend = "fake"\nrepetitions = 2\nseed = 3\n'
                    '[mca.sweep]\ncoll_tuned_bcast_tree_fanout = ["2", "4"]\n')
    assert main(["run", str(spec), "-o", str(out)]) == 0
    assert len(compare(Store(out)).points) == 2 * 2 * 7
    capsys.readouterr()
    assert main(["compare", str(out), "--against", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "coll_tuned_bcast_tree_fanout" in err[0], err


# --- one folder, every reader -------------------------------------------------------------

def _reference(store: Store) -> dict[tuple[str, int, int], float]:
    named = [(dict(zip(points.IDENTITY, p.key, strict=True)), p.median)
             for p in points.pool(points.read(store), "avg_us")]
    return {(str(k["algorithm"]), k["nprocs"], k["size_bytes"]): m for k, m in named}


def _compare(store: Store) -> dict[tuple[str, int, int], float]:
    return {(p.algorithm, p.nprocs, p.size_bytes): p.value for p in compare(store).points}


def _show(store: Store) -> dict[tuple[str, int, int], float]:
    return {(r["algorithm"], r["nprocs"], r["size_bytes"]): r["median_avg_us"]
            for r in aggregate(store)}


def _models(store: Store) -> dict[tuple[str, int, int], float]:
    return {(r.algorithm, r.nprocs, r.size_bytes): r.value_us for r in collective_rows(store)}


def _against(store: Store) -> dict[tuple[str, int, int], float]:
    return {(k.algorithm, k.nprocs, k.size_bytes): v for k, v in read_points(store).items()}


def _replay(store: Store) -> dict[tuple[str, int, int], float]:
    import statistics

    return {(label, n, size): statistics.median(float(r["avg_us"]) for r in rows)
            for (_, n, label, size), rows in load(store).rows.items()}


def _study(store: Store) -> dict[tuple[str, int, int], float]:
    import statistics

    by: dict[tuple[str, int, int], list[float]] = {}
    for r in fetch_rows(store, "avg_us"):
        by.setdefault((r["algorithm"], r["nprocs"], r["size_bytes"]), []).append(r["avg_us"])
    return {k: statistics.median(v) for k, v in by.items()}


def _api(store: Store) -> dict[tuple[str, int, int], float]:
    frame = open_results(store.root).points()
    return {(str(r.algorithm), int(r.nprocs), int(r.size_bytes)): float(r.median_avg_us)
            for r in frame.itertuples()}


def _report(store: Store) -> dict[tuple[str, int, int], float]:
    from collbench.report.data import read

    comp = read(store, "default", "avg", None, 0.95).comp
    assert comp is not None
    return {(p.algorithm, p.nprocs, p.size_bytes): p.value for p in comp.points}


READERS: dict[str, Callable[[Store], dict[tuple[str, int, int], float]]] = {
    "compare": _compare, "show": _show, "models": _models, "against": _against,
    "tune --adaptive replay": _replay, "study": _study, "collbench.open": _api,
    "report": _report}


@pytest.mark.parametrize("name", READERS)
def test_every_reader_sees_the_same_points_and_values(tmp_path: Path, name: str) -> None:
    store = sweep(tmp_path / "f", {"one": {}})
    expected = _reference(store)
    assert len(expected) == 2 * len(SIZES)
    assert READERS[name](store) == pytest.approx(expected)


# --- arbitrary stored text ----------------------------------------------------------------

text = st.one_of(st.none(), st.text(max_size=40),
                 st.dictionaries(st.text(max_size=8), st.one_of(
                     st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                     st.text(max_size=8), st.booleans(), st.none()), max_size=4).map(json.dumps))


# Up to 4 rows (points of their own: sizes differ) per folder: ~40 texts in 15 reads.
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.tuples(text, text), min_size=1, max_size=4))
def test_any_params_and_metrics_text_reads(tmp_path_factory: pytest.TempPathFactory,
                                           texts: list[tuple[str | None, str | None]]) -> None:
    store = folder(tmp_path_factory.mktemp("f") / "f", {"a": [
        row(params=params, metrics=metrics, size_bytes=SIZES[i])
        for i, (params, metrics) in enumerate(texts)]})
    got = points.read(store)
    assert sorted(r["size_bytes"] for r in got) == list(SIZES[:len(texts)])
    for r in got:
        assert r["context"] is None or isinstance(r["context"], str)
        assert len(points.pool([r], "avg_us")) == 1


def test_the_study_spec_names_the_column_statistics() -> None:
    """A pydantic Literal cannot be built from the table: it is checked against it."""
    from typing import get_args

    from collbench.study.spec import StudyTable

    assert get_args(StudyTable.model_fields["statistic"].annotation) == tuple(
        points.COLUMN_STATS)


def _cpu_s(pid: int) -> float:
    """User and system CPU time of the process, all threads, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_ctrl_c_while_duckdb_reads_is_one_line(tmp_path: Path) -> None:
    """DuckDB turns Ctrl-C during a query into RuntimeError("Query interrupted"), not
    KeyboardInterrupt: a read stopped there is `collbench: interrupted`, exit 130, too; and
    at once (left to Python alone, DuckDB first let a worker thread finish its task, which
    hung one start in four here for the whole query)."""
    store = folder(tmp_path / "f", {"a": [row()]})
    slow = "SELECT sum(a.range * b.range) FROM range(1000000) a, range(1000000) b"
    proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "query", str(store.root),
                             slow], env=dict(os.environ, TMPDIR=str(tmp_path)), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(f"/proc/{proc.pid}/task")) < 2:  # DuckDB's threads: connected
            assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
            time.sleep(0.02)
        connected = _cpu_s(proc.pid)
        while _cpu_s(proc.pid) < connected + 0.2:  # 0.2 s of CPU since: in the query
            assert proc.poll() is None and time.monotonic() < deadline, proc.returncode
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, err) == (130, "collbench: interrupted\n")


@pytest.mark.slow
def test_reads_while_another_process_retries_failed_launches(tmp_path: Path) -> None:
    """Readers take no lock. `run --resume --retry-failed` in another process removes the
    rows of every failed launch (then measures them again): each read meanwhile sees a
    folder (rows of whole launches only, never doubled), and is never a traceback or a file
    called damaged because it went away while being read."""
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "r"\n[measure]\ncollectives = ["bcast"]\n'
                    'algorithms = ["default", "binomial"]\nsizes = [8, 1024]\nnprocs = [2]\n'
                    '[run]\nbackend = "fake"\nrepetitions = 16\nseed = 1\n')
    env = dict(os.environ, TMPDIR=str(tmp_path))
    failed = tmp_path / "failed"
    crashed = subprocess.run([sys.executable, "-m", "collbench.cli", "run", str(spec), "-o",
                              str(failed), "--kernel-debug", "--debug crash --debug-at 0"],
                             env=env, capture_output=True, check=False)
    assert crashed.returncode == 1, crashed.stderr  # every launch failed
    reads = 0
    for i in range(5):  # the rows go at one moment of each retry: reads race it again
        out = tmp_path / f"res{i}"
        shutil.copytree(failed, out)
        retry = subprocess.Popen([sys.executable, "-m", "collbench.cli", "run", str(spec),
                                  "-o", str(out), "--resume", "--retry-failed"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            seen = 64
            while retry.poll() is None and seen == 64:  # until the failed rows went
                rows = points.read(Store(out))
                keys = [(r["launch_id"], r["algorithm"], r["size_bytes"]) for r in rows]
                assert len(keys) == len(set(keys)) and len(keys) % 4 == 0, len(keys)
                seen, reads = len(keys), reads + 1
        finally:
            retry.send_signal(signal.SIGTERM)  # what follows only measures again
            _, err = retry.communicate(timeout=60)
        assert retry.returncode in (0, 130), err
    assert reads > 5
