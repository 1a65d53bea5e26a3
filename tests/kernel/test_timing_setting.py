"""[measure] timing: from the spec through the plan and the job file to the stored rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.catalog.algorithms import Catalog
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.errors import UserError
from collbench.plan import Launch, Plan, make_plan
from collbench.runner import kernel_metrics
from collbench.spec import parse_spec
from collbench.store import Store

SPEC = """\
[campaign]
name = "timing"

[measure]
collectives = ["bcast", "latency", "ibcast"]
algorithms = "default"
sizes = [8, 1024]
nprocs = 2
iterations = 5
warmup = 1
{timing}

[run]
backend = "fake"
seed = 3
"""


def catalog() -> Catalog:
    return load_catalog(find_mpi())


def plan_of(timing: str) -> Plan:
    return make_plan(parse_spec(SPEC.format(timing=timing), "spec.toml"), catalog(),
                     "spec.toml", cores=2)


def test_completion_timing_marks_blocking_collective_points_only() -> None:
    points = [p for la in plan_of('timing = "completion"').launches for p in la.points]
    by_coll = {p.collective: p for p in points}
    assert by_coll["bcast"].timing == "completion"
    assert by_coll["bcast"].job_line().endswith(" timing=completion")
    # point-to-point and non-blocking points are timed as OSU times them
    assert by_coll["latency"].timing == by_coll["ibcast"].timing == "osu"
    assert "timing=" not in by_coll["latency"].job_line()
    assert "timing=" not in by_coll["ibcast"].job_line()


def test_osu_timing_is_the_default_and_leaves_plan_json_as_before() -> None:
    plan = plan_of("")
    assert {p.timing for la in plan.launches for p in la.points} == {"osu"}
    stored = [la.to_json() for la in plan.launches]
    assert all("timing" not in p for la in stored for p in la["points"])
    completion = plan_of('timing = "completion"').launches
    again = [Launch.from_json(la.to_json()) for la in completion]
    assert [la.points for la in again] == [la.points for la in completion]


def test_unknown_timing_is_one_line() -> None:
    with pytest.raises(UserError) as err:
        parse_spec(SPEC.format(timing='timing = "completoin"'), "spec.toml")
    msg = str(err.value)
    assert "\n" not in msg
    assert "measure.timing" in msg and "'completoin'" in msg
    assert "osu, completion" in msg and "did you mean completion" in msg


def test_kernel_metrics_keep_the_completion_figures() -> None:
    got = {"completion_us": 5.0, "completion_ci": [4.5, 5.5], "completion_late": 2,
           "synced_avg_us": 4.0, "sync_error_us": 0.3, "avg_us": 4.2}
    assert json.loads(kernel_metrics(got) or "{}") == {
        k: v for k, v in got.items() if k != "avg_us"}
    # a point that failed has null figures: nothing to store
    assert kernel_metrics({"completion_us": None, "completion_ci": None}) is None


def test_rows_carry_completion_and_compare_uses_it(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    spec.write_text(SPEC.format(timing='timing = "completion"').replace(
        '"bcast", "latency", "ibcast"', '"bcast"'))
    assert main(["run", str(spec), "-o", str(out)]) == 0
    con = Store(out).connect()
    rows = con.execute("SELECT avg_us, metrics FROM measurements").fetchall()
    assert rows
    for avg, metrics in rows:
        m = json.loads(metrics)
        assert m["completion_us"] >= m["synced_avg_us"] > 0 and avg > 0
        assert m["completion_ci"][0] <= m["completion_us"] <= m["completion_ci"][1]
    capsys.readouterr()
    assert main(["compare", str(out), "--stat", "completion", "--format", "csv"]) == 0
    assert "completion_us" in capsys.readouterr().out


def test_precision_settings_reach_blocking_collective_job_lines() -> None:
    plan = plan_of("precision = 0.02\nmin_iterations = 30\nmax_iterations = 5000\n"
                   "max_seconds = 2.5")
    by_coll = {p.collective: p for la in plan.launches for p in la.points}
    bcast = by_coll["bcast"]
    assert (bcast.iterations, bcast.precision, bcast.max_iterations, bcast.max_seconds) == (
        30, 0.02, 5000, 2.5)
    assert bcast.job_line().endswith(
        " 30 1 precision=0.02 max_iterations=5000 max_seconds=2.5")
    assert by_coll["latency"].precision is None and by_coll["ibcast"].precision is None
    stored = [p for la in plan.launches for p in la.to_json()["points"]]
    assert {"precision" in p for p in stored} == {True, False}
    again = [Launch.from_json(la.to_json()) for la in plan.launches]
    assert [la.points for la in again] == [la.points for la in plan.launches]


@pytest.mark.parametrize(("setting", "where"), [
    ("precision = 0", "measure.precision"),
    ("precision = 1.5", "measure.precision"),
    ("precision = 0.1\nmax_iterations = 2000000", "measure.max_iterations"),
    ("precision = 0.1\nmax_seconds = 0", "measure.max_seconds"),
    ("precision = 0.1\nmin_iterations = 500\nmax_iterations = 100", "measure.min_iterations"),
])
def test_precision_settings_are_bounded(setting: str, where: str) -> None:
    with pytest.raises(UserError) as err:
        parse_spec(SPEC.format(timing=setting), "spec.toml")
    assert "\n" not in str(err.value) and where in str(err.value)


def test_rows_store_the_precision_reached(tmp_path: Path) -> None:
    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    spec.write_text(SPEC.format(timing="precision = 0.04").replace(
        '"bcast", "latency", "ibcast"', '"bcast"'))
    assert main(["run", str(spec), "-o", str(out)]) == 0
    rows = Store(out).connect().execute("SELECT iterations, metrics FROM measurements").fetchall()
    assert rows and all(json.loads(m)["precision"] == 0.02 and it == 20 for it, m in rows)
