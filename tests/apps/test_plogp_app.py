"""The built-in workload app "plogp" (the PLogP benchmark of `model loggp`): a planned point
per message size of its min:max range, and a row per JSON line it prints, in order, as the
kernel's points are (runner.program_line_rows). No MPI here; real runs: tests/models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.catalog.algorithms import Catalog
from collbench.cli import main
from collbench.launch.base import LaunchOutcome
from collbench.plan import Launch, Plan, make_plan
from collbench.runner import RowContext, program_line_rows, program_rows
from collbench.spec import parse_spec

CATALOG = Catalog("openmpi", "5.0.11", "test", {})
SPEC = """\
[campaign]
name = "pl"
[measure]
nprocs = [2]
map_by = ["core", "socket"]
[workload]
app = "plogp"
params = {params}
"""
CONTEXT = RowContext("pl", "local", "openmpi-5.0.11", "5.0.11")
SIZES = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


def launches(params: str) -> tuple[Launch, ...]:
    return make_plan(parse_spec(SPEC.format(params=params), "s"), CATALOG, "s",
                     cores=64).launches


def line(size: int, **over: object) -> str:
    data: dict[str, object] = {
        "size": size, "rtt_us": 1.0 + size / 1000, "rtt_min_us": 0.9, "g_us": 0.2, "g_n": 16,
        "g_converged": True, "os_us": 0.1, "os_min_us": 0.1, "or_us": 0.3, "or_min_us": 0.2,
        "delta_us": 5, "reps": 3}
    return json.dumps({**data, **over})


def test_a_point_per_size_of_the_range_and_the_counts_it_runs() -> None:
    plan = launches('{ min = 0, max = "4K", reps = 3 }')
    assert len(plan) == 2  # one launch per placement
    la = plan[0]
    assert la.program is not None and la.program.lines
    assert la.program.args == ("min=0", "max=4096", "reps=3")
    assert [p.size_bytes for p in la.points] == SIZES
    assert {(p.collective, p.iterations, p.warmup) for p in la.points} == {("plogp", 3, 5)}
    again = Plan.from_json(json.loads(json.dumps(Plan("pl", 1, "local", plan).to_json())))
    assert again.launches == plan
    # the benchmark's own defaults (0 to 1 MiB) when no range is given
    (la, _) = launches("{ reps = 3 }")
    assert [p.size_bytes for p in la.points][-1] == 1 << 20


def test_a_range_it_refuses_is_one_line_at_plan(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(params='{ min = "8K", max = "4K" }'))
    assert main(["plan", str(spec)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        "workload.params: min = 8192, max = 4096; valid: min <= max <= 67108864 (bytes)")


def test_each_line_is_a_row_and_the_points_after_a_failure_are_failed() -> None:
    la = launches('{ min = 0, max = "4K", reps = 3 }')[0]
    printed = ["mpirun chatter", *(line(s) for s in SIZES[:3])]
    failed = LaunchOutcome("failed", ["mpirun"], 2, 1.0, "collbench_plogp: out of memory\n")
    rows = program_rows(la, "\n".join(printed) + "\n", failed, CONTEXT, 1)
    assert [r["size_bytes"] for r in rows] == SIZES
    assert [r["status"] for r in rows] == ["ok"] * 3 + ["failed"] * (len(SIZES) - 3)
    first = rows[1]
    assert (first["collective"], first["source"], first["avg_us"]) == ("plogp", "program",
                                                                        1.001)
    assert (first["iterations"], first["warmup"], first["mapping"]) == (3, 5, la.mapping)
    metrics = json.loads(first["metrics"])
    assert (metrics["os_us"], metrics["or_us"], metrics["g_us"]) == (0.1, 0.3, 0.2)
    assert metrics["primary_metric"] == "rtt_us"
    assert rows[3]["avg_us"] is None and rows[3]["metrics"] is None
    assert rows[3]["error"] == ("launch exited with status 2 before this point; stderr: "
                                "collbench_plogp: out of memory\n")


def test_a_line_out_of_order_or_without_its_time_is_never_a_number() -> None:
    la = launches('{ min = 0, max = 2 }')[0]
    ok = LaunchOutcome("ok", ["mpirun"], 0, 1.0)
    text = "\n".join([line(0), line(2), line(2, rtt_us=None)]) + "\n"
    rows = program_line_rows(la, text, ok, CONTEXT, 1)
    assert [(r["status"], r["avg_us"]) for r in rows] == [("ok", 1.0), ("failed", None),
                                                          ("failed", None)]
    assert rows[1]["error"] == "program output out of order at line 2"
    assert rows[2]["error"] == "primary metric 'rtt_us' is missing"
    hung = LaunchOutcome("timeout", ["mpirun"], None, 9.0)
    assert {r["status"] for r in program_line_rows(la, "", hung, CONTEXT, 1)} == {"timeout"}
