"""`compare --baseline COLUMN=VALUE`: any column's values as the variants compared."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from collbench.analyse import compare
from collbench.analyse.render import render
from collbench.cli import main
from collbench.errors import UserError
from collbench.records import make_row
from collbench.store import Store

SIZES = (1, 1024, 65536)


def params(mca: dict[str, str], swept: Sequence[str] = ()) -> str:
    return json.dumps({"env": {}, "mca": mca, "swept": {k: mca[k] for k in swept}},
                      sort_keys=True)


def write(root: Path, launches: Sequence[dict[str, Any]], reps: int = 5) -> Store:
    """One launch per (repetition, entry of `launches`): each entry sets the row fields
    that differ (params, mpi, mapping, ...) and `factor`, the time multiplier."""
    rng = random.Random(7)
    store = Store(root)
    store.create({"name": "t", "seed": 1, "backend": "fake"}, "", {"launches": []},
                 {"cores": 64})
    for rep in range(reps):
        for i, entry in enumerate(launches):
            fields = {k: v for k, v in entry.items() if k != "factor"}
            lid = f"{rep}-{i}"
            rows = []
            for alg in ("default", "binomial"):
                for size in SIZES:
                    t = ((5 + size / 500) * entry["factor"] * (1.3 if alg == "binomial" else 1)
                         * (1 + rng.uniform(-0.02, 0.02)))
                    base = dict(campaign="t", launch_id=lid, repetition=rep, backend="fake",
                                source="kernel", mpi="openmpi", mpi_version="5.0.11",
                                collective="bcast", algorithm=alg, algorithm_id=0, segsize=0,
                                fanout=0, selection="mpit", params=params({}), nprocs=2,
                                nodes=1, ppn=2, mapping="core", binding="core",
                                size_bytes=size, iterations=1000, warmup=10, avg_us=t,
                                min_us=t * 0.9, max_us=t * 1.1, median_us=t, status="ok")
                    rows.append(make_row(**{**base, **fields}))
            store.write_launch(lid, rows, {"launch_id": lid, "status": "ok"})
    return store


@pytest.fixture
def btl(tmp_path: Path) -> Store:
    """A sweep of btl (as [mca.sweep] writes it) beside a fixed pml: tcp is 3x slower."""
    return write(tmp_path / "btl", [
        {"params": params({"btl": "self,vader", "pml": "ob1"}, ["btl"]), "factor": 1.0},
        {"params": params({"btl": "self,tcp", "pml": "ob1"}, ["btl"]), "factor": 3.0}])


def test_a_swept_mca_value_as_the_baseline(btl: Store) -> None:
    c = compare(btl, baseline="btl=self,vader")
    assert (c.column, c.baseline, c.baseline_text) == ("mca.btl", "self,vader",
                                                        "mca.btl=self,vader")
    assert {p.label for p in c.points} == {"self,vader", "self,tcp"}
    # one context per algorithm, the btl out of it, the fixed pml kept
    titles = {r.point.context for r in c.ratios}
    assert len(titles) == 2
    assert all(json.loads(ctx[6]) in ({"algorithm": "default", "mca": {"pml": "ob1"}},
                                      {"algorithm": "binomial", "mca": {"pml": "ob1"}})
               for ctx in titles)
    assert len(c.ratios) == 2 * len(SIZES)
    for r in c.ratios:
        assert r.point.label == "self,tcp" and r.ratio == pytest.approx(3.0, rel=0.05)
        assert r.significant is True
    assert {b.recommended for b in c.best} == {"self,vader"}
    text = render(c, "table")
    assert "bcast np=2 map-by=core bind-to=core algorithm=binomial" in text
    assert "3.0" in text and "× slower than mca.btl=self,vader" in text
    # the prefixed spelling is the same comparison
    assert compare(btl, baseline="mca.btl=self,tcp").baseline == "self,tcp"


def test_algorithm_column_keeps_todays_meaning(btl: Store) -> None:
    a = compare(btl, baseline="algorithm=binomial")
    b = compare(btl, baseline="binomial")
    assert (a.column, a.baseline) == ("algorithm", "binomial") == (b.column, b.baseline)
    assert [r.ratio for r in a.ratios] == [r.ratio for r in b.ratios]


@pytest.mark.parametrize(("baseline", "message"), [
    ("nope=1", r"--baseline column 'nope' is not valid; valid: an algorithm \(binomial, "
               r"default\) or COLUMN=VALUE with several values here: mca.btl=self,tcp\|"
               r"self,vader$"),
    ("ring", r"--baseline 'ring' was not measured here; valid: an algorithm \(binomial, "
             r"default\) or COLUMN=VALUE with several values here: mca.btl="),
    ("btl=sm", r"--baseline mca.btl='sm' was not measured here; values of mca.btl: "
               r"self,tcp, self,vader"),
    ("btl=self,vadr", r"\(did you mean self,vader\?\)"),
    ("pml=ob1", r"mca.pml has only that value here, so there is nothing to compare"),
    ("mapping=core", r"mapping has only that value here"),
])
def test_bad_baselines_are_one_line(btl: Store, baseline: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as exc:
        compare(btl, baseline=baseline)
    assert "\n" not in str(exc.value)


def test_cli_exit_codes(btl: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(btl.root), "--baseline", "btl=self,vader", "--format",
                 "csv"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split(",")[7] == "mca.btl"  # the variant column, named
    assert main(["compare", str(btl.root), "--baseline", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "valid: an algorithm (binomial, default) or" in err


def test_mpis_as_variants_and_never_pooled(tmp_path: Path) -> None:
    store = write(tmp_path / "mpis", [
        {"mpi": "openmpi", "mpi_version": "5.0.11", "factor": 1.0},
        {"mpi": "openmpi", "mpi_version": "4.1.8", "factor": 1.5}])
    c = compare(store, baseline="mpi=openmpi-5.0.11")
    assert {p.label for p in c.points} == {"openmpi-5.0.11", "openmpi-4.1.8"}
    assert all(r.ratio == pytest.approx(1.5, rel=0.05) and r.significant for r in c.ratios)
    # Against the default algorithm, each MPI is its own context: 5 + 5 repetitions of
    # two MPIs never pool into one point of 10.
    d = compare(store)
    assert {p.n for p in d.points} == {5}
    assert {json.loads(p.params or "{}").get("mpi") for p in d.points} == {
        "openmpi-5.0.11", "openmpi-4.1.8"}
    assert "mpi=openmpi-4.1.8" in render(d, "table")
    with pytest.raises(UserError, match=r"values of mpi: openmpi-4.1.8, openmpi-5.0.11"):
        compare(store, baseline="mpi=openmpi-5.0.0")


def test_placement_as_the_baseline(tmp_path: Path) -> None:
    store = write(tmp_path / "map", [{"mapping": "core", "factor": 1.0},
                                     {"mapping": "socket", "factor": 1.2}])
    c = compare(store, baseline="mapping=socket")
    assert {p.label for p in c.points} == {"core", "socket"}
    assert all(p.mapping is None for p in c.points)
    assert len(c.ratios) == 2 * len(SIZES)
    assert all(r.ratio == pytest.approx(1 / 1.2, rel=0.05) for r in c.ratios)


def test_an_mca_key_some_launches_did_not_set(tmp_path: Path) -> None:
    store = write(tmp_path / "pml", [{"factor": 1.0},
                                     {"params": params({"pml": "ucx"}), "factor": 0.8}])
    c = compare(store, baseline="pml=(not set)")
    assert {p.label for p in c.points} == {"(not set)", "ucx"}
    assert len(c.ratios) == 2 * len(SIZES)
    assert all(r.ratio == pytest.approx(0.8, rel=0.05) for r in c.ratios)
