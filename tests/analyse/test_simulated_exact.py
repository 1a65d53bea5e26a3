"""Simulated results are exact: no repetitions required, no noise warnings, and the output
says so ("simulated: exact")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.analyse import compare, stability
from collbench.errors import UserError
from collbench.records import make_row
from collbench.store import Store
from collbench.tune.select import SIMULATED_NOTE, select

# Two algorithms, binomial 20 % faster than the default at every size.
TIMES = {"default": 10.0, "binomial": 8.0}
SIZES = (8, 1024, 65536)


def results(root: Path, backend: str, repetitions: int = 1) -> Store:
    store = Store(root)
    store.create({"name": "exact", "seed": 1}, "", {"launches": []},
                 {"host": "h", "cores": 64, "mpi": {"implementation": "openmpi",
                                                    "version": "5.0.3"}})
    for rep in range(repetitions):
        rows = [make_row(
            campaign="exact", launch_id=f"r{rep}", repetition=rep, backend=backend,
            source="kernel", mpi="openmpi", mpi_version="5.0.3", collective="bcast",
            algorithm=alg, algorithm_id=0 if alg == "default" else 6, segsize=0, fanout=0,
            params=json.dumps({"env": {}, "mca": {}, "swept": {}}), nprocs=4, nodes=1, ppn=4,
            mapping="core", binding="core", size_bytes=size, iterations=100, warmup=10,
            avg_us=t * (1 + size / 1e5), min_us=t, max_us=t * 1.5, median_us=t,
            status="ok") for alg, t in TIMES.items() for size in SIZES]
        store.write_launch(f"r{rep}", rows, {"status": "ok"}, None)
    return store


def test_one_simulated_repetition_is_enough_for_compare(tmp_path: Path) -> None:
    c = compare(results(tmp_path / "sim", "simgrid"))
    kinds = {w.kind for w in c.warnings}
    assert "repetitions" not in kinds
    assert not kinds & set(stability.NOISE)
    # the same data measured on a real clock: one repetition is flagged
    real = compare(results(tmp_path / "real", "local"))
    assert "repetitions" in {w.kind for w in real.warnings}
    # the line under the comparison says why none are needed
    assert c.notice == stability.SIMULATED_NOTICE and real.notice != c.notice


def test_repetition_notice_says_simulated_exact(tmp_path: Path) -> None:
    sim = stability.Observed("bcast np=4", "default", 8, 4, 1, 4, (10.0,),
                             ({"backend": "simgrid", "status": "ok"},))
    real = stability.Observed("bcast np=4", "default", 8, 4, 1, 4, (10.0,),
                              ({"backend": "local", "status": "ok"},))
    assert stability.repetition_notice([sim], 0.95, 1) == stability.SIMULATED_NOTICE
    assert stability.SIMULATED_NOTICE.startswith("simulated: exact")
    assert "repetitions" in (stability.repetition_notice([real], 0.95, 1) or "")
    assert stability.repetition_notice([real], 0.95, 5) is None
    # mixed: the measured half still needs repetitions
    assert stability.repetition_notice([sim, real], 0.95, 1) != stability.SIMULATED_NOTICE


def test_tune_takes_one_simulated_repetition_and_says_so(tmp_path: Path) -> None:
    selection = select(results(tmp_path / "sim", "simgrid"))
    assert selection.notes[0] == SIMULATED_NOTE and "simulated: exact" in SIMULATED_NOTE
    (choices,) = selection.tables.values()
    assert [c.algorithm for c in choices] == ["binomial"]
    # measured data with one repetition still cannot be tested
    with pytest.raises(UserError, match="1 repetition per point"):
        select(results(tmp_path / "real", "local"))


def _nonblocking(root: Path, backend: str) -> Store:
    store = Store(root)
    store.create({"name": "nb", "seed": 1}, "", {"launches": []},
                 {"host": "h", "cores": 64, "mpi": {"implementation": "openmpi",
                                                    "version": "5.0.3"}})
    rows = [make_row(
        campaign="nb", launch_id="r0", repetition=0, backend=backend, source="kernel",
        mpi="openmpi", mpi_version="5.0.3", collective="ibcast", algorithm="default",
        algorithm_id=0, segsize=0, fanout=0, params=json.dumps({"env": {}, "mca": {}}),
        nprocs=4, nodes=1, ppn=4, mapping="core", binding="core", size_bytes=size,
        iterations=100, warmup=10, avg_us=10.0, min_us=9.0, max_us=12.0, median_us=10.0,
        metrics=json.dumps({"test_calls": 0, "compute": "auto", "overall_us": 20.5,
                            "pure_us": 10.0, "overlap_pct": 96.05}),
        status="ok") for size in SIZES]
    store.write_launch("r0", rows, {"status": "ok"}, None)
    return store


@pytest.mark.parametrize("backend", ["simgrid", "local"])
def test_show_leaves_a_simulated_overlap_empty_and_says_why(tmp_path: Path,
                                                            backend: str) -> None:
    """SimGrid does not model MPI progress: `show` does not print its 100 %-ish overlap as a
    figure (as compare and the report do not); a measured overlap stays."""
    from collbench.analyse.show import show

    store = _nonblocking(tmp_path / backend, backend)
    table, csv = show(store), show(store, "csv")
    assert ("96.05" in table) == (backend == "local")
    assert ("96.05" in csv) == (backend == "local")
    assert ("not modelled under SimGrid" in table) == (backend == "simgrid")
    assert "20.50" in table  # the simulated times stay
