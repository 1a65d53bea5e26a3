"""`compare --baseline` over the other dimensions a study varies: the coll component
(tuned against han), a workload parameter (matrix topology), a non-blocking setting
(test_calls), a blocking collective against its non-blocking form (bcast against ibcast);
and one-line errors naming what is valid."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.analyse import compare
from collbench.cli import main
from collbench.errors import UserError
from collbench.store import Store
from tests.analyse.test_baseline_column import SIZES, params, write


def test_components_as_the_variants(tmp_path: Path) -> None:
    """han twice as slow as tuned: one context per algorithm, the component not in it."""
    store = write(tmp_path / "c", [
        {"params": params({}), "component": "tuned", "factor": 1.0},
        {"params": params({}), "component": "han", "factor": 2.0}])
    c = compare(store, baseline="component=tuned")
    assert (c.column, c.baseline_text) == ("component", "component=tuned")
    assert {p.label for p in c.points} == {"tuned", "han"}
    assert {json.loads(p.params or "{}")["algorithm"] for p in c.points} == {
        "default", "binomial"}  # not 'default@han': the component is the variant
    assert len(c.ratios) == 2 * len(SIZES)
    assert all(r.point.label == "han" and r.ratio == pytest.approx(2.0, rel=0.05)
               and r.significant for r in c.ratios)
    assert {b.recommended for b in c.best} == {"tuned"}
    with pytest.raises(UserError, match=r"values of component: han, tuned$"):
        compare(store, baseline="component=basic")


def test_one_valued_column_names_the_valid_ones(tmp_path: Path) -> None:
    store = write(tmp_path / "one", [{"params": params({"btl": "self,sm"}), "factor": 1.0}])
    with pytest.raises(UserError) as exc:
        compare(store, baseline="btl=self,sm")
    assert str(exc.value).endswith("nothing to compare it with; valid: an algorithm "
                                   "(binomial, default) (no other column has several "
                                   "values here)")


MATRIX = """\
[campaign]
name = "topologies"
[measure]
nprocs = 2
[workload]
app = "matrix"
params = { dims = [[2, 1, 1], [1, 2, 1]], shape = [[16, 16, 16]], iterations = 5, warmup = 1 }
[run]
repetitions = 2
seed = 15
"""

NONBLOCKING = """\
[campaign]
name = "overlap"
[measure]
collectives = ["bcast", "ibcast"]
algorithms = ["default", "binomial"]
sizes = ["1K", "64K"]
nprocs = 2
iterations = 20
warmup = 2
nonblocking = { test_calls = [0, 10], compute = "auto" }
[run]
repetitions = 2
seed = 3
"""


def run(tmp: Path, name: str, spec: str, capsys: pytest.CaptureFixture[str]) -> Path:
    (tmp / f"{name}.toml").write_text(spec)
    out = tmp / name
    assert main(["run", str(tmp / f"{name}.toml"), "-o", str(out)]) == 0
    capsys.readouterr()
    return out


def error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["compare", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.mpi
@pytest.mark.slow
def test_real_campaigns_compare_any_dimension(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    matrix = run(tmp_path, "matrix", MATRIX, capsys)
    c = compare(Store(matrix), baseline="dims=2,1,1")  # the bare workload key
    assert (c.column, c.baseline) == ("program.dims", "2,1,1")
    assert {p.label for p in c.points} == {"2,1,1", "1,2,1"} and len(c.ratios) == 1
    assert "dims" not in json.loads(c.ratios[0].point.params or "{}").get("program", {})
    err = error(capsys, str(matrix), "--baseline", "2,1,1")
    assert "valid: an algorithm (default) or COLUMN=VALUE with several values here: " \
           "program.dims=1,2,1|2,1,1" in err

    nb = run(tmp_path, "nb", NONBLOCKING, capsys)
    # does MPI_Test buy overlap? test_calls is the variant, the overlap a difference
    c = compare(Store(nb), baseline="test_calls=0", stat="overlap_pct")
    assert (c.column, c.effect) == ("nonblocking.test_calls", "difference")
    assert {p.collective for p in c.points} == {"ibcast"}  # bcast has no overlap figure
    assert {(r.baseline.label, r.point.label) for r in c.ratios} == {("0", "10")}
    assert len(c.ratios) == 2 * 2  # per algorithm and size
    # bcast against ibcast, --collective naming either; every ibcast setting has its bcast
    for named in ("bcast", "ibcast"):
        c = compare(Store(nb), baseline="collective=bcast", collective=named)
        assert {p.label for p in c.points} == {"bcast", "ibcast"}
        assert {p.collective for p in c.points} == {"bcast"}
        assert len(c.ratios) == 2 * 2 * 2  # algorithms x test_calls x sizes
        assert all(r.baseline.label == "bcast" and r.baseline.n == 2 for r in c.ratios)
        settings = {json.loads(r.point.params or "{}")["nonblocking"]["test_calls"]
                    for r in c.ratios}
        assert settings == {0, 10}
    assert main(["compare", str(nb), "--baseline", "collective=ibcast", "--summary"]) == 0
    assert "against collective=ibcast" in capsys.readouterr().out
    err = error(capsys, str(nb), "--baseline", "collective=allreduce")
    assert "values of collective: bcast, ibcast" in err
    err = error(capsys, str(nb), "--baseline", "tests=0")
    assert "nonblocking.test_calls=0|10" in err and "collective=bcast|ibcast" in err


def test_simulated_overlap_is_not_modelled(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """SimGrid's overlap is its model's (100 %): refused alone, left out beside measured."""
    def launch(backend: str) -> dict[str, object]:
        return {"params": params({}), "backend": backend, "collective": "ibcast",
                "metrics": json.dumps({"overlap_pct": 100.0 if backend == "simgrid" else 20.0,
                                       "overall_us": 9.0, "pure_us": 5.0}), "factor": 1.0}

    sim = write(tmp_path / "sim", [launch("simgrid")])
    assert compare(sim, stat="overall").points  # simulated times stay comparable
    err = error(capsys, str(sim.root), "--stat", "overlap_pct")
    assert "overlap_pct is not modelled under SimGrid" in err and "valid: --stat overall" in err
    both = write(tmp_path / "both", [launch("simgrid"), launch("local")])
    c = compare(both, stat="overlap_pct")
    assert {p.value for p in c.points} == {20.0}
    assert any("not modelled" in w.problem for w in c.warnings)
