"""Campaign running, storing and resuming, with the fake backend (a Python stand-in kernel).

The same paths with real Open MPI are in tests/test_cli_mpi.py.
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.catalog.algorithms import Catalog
from collbench.cli import main
from collbench.launch import program as programs
from collbench.launch.base import LaunchOutcome
from collbench.plan import Launch, make_plan
from collbench.runner import RowContext, program_rows
from collbench.spec import parse_spec
from collbench.store import Store

SPEC = """\
[campaign]
name = "fake"

[measure]
collectives = ["bcast", "allreduce"]
sizes = "1:64"
nprocs = {nprocs}
iterations = 5
warmup = 1
validate = {validate}

[measure.algorithms]
bcast = ["default", "binomial", "pipeline"]
allreduce = ["default", "ring"]

[run]
backend = "fake"
repetitions = {reps}
timeout = {timeout}
seed = 7
"""


def write_spec(tmp_path: Path, nprocs: str = "[2, 4]", reps: int = 1, timeout: float = 30,
               validate: str = "false") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC.format(nprocs=nprocs, reps=reps, timeout=timeout, validate=validate))
    return p


def points(out: Path) -> list[tuple[object, ...]]:
    con = Store(out).connect()
    return con.execute(
        "SELECT launch_id, collective, algorithm, size_bytes, status FROM measurements "
        "ORDER BY ALL").fetchall()


def test_run_stores_one_row_per_planned_point(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path), tmp_path / "res"
    assert main(["plan", str(spec), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    planned = sum(len(la["points"]) for la in plan["launches"])
    assert main(["run", str(spec), "-o", str(out)]) == 0
    rows = points(out)
    assert len(rows) == planned == len(set(rows))
    assert {r[4] for r in rows} == {"ok"}
    capsys.readouterr()
    assert main(["show", str(out), "--collective", "bcast", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["algorithm"] for r in table} == {"default", "binomial", "pipeline"}
    assert {r["nprocs"] for r in table} == {"2", "4"}


def test_existing_folder_needs_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    before = points(out)
    assert main(["run", str(spec), "-o", str(out)]) == 2
    assert "add --resume" in capsys.readouterr().err
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0  # nothing left to do
    assert points(out) == before


def test_resume_refuses_a_different_spec(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    write_spec(tmp_path, nprocs="[2, 3]")
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 2
    assert "differs from the spec stored" in capsys.readouterr().err


def test_hung_launch_times_out_and_the_campaign_goes_on(tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, timeout=2), tmp_path / "res"
    code = main(["run", str(spec), "-o", str(out), "--kernel-debug", "--debug hang --debug-at 2"])
    assert code == 1
    con = Store(out).connect()
    by_launch = con.execute(
        "SELECT launch_id, list(status ORDER BY status) FROM measurements GROUP BY 1").fetchall()
    assert len(by_launch) == 2  # both launches ran, each hung at its third point
    for _, statuses in by_launch:
        assert statuses.count("ok") == 2 and set(statuses) == {"ok", "timeout"}
    metas = [json.loads(p.read_text()) for p in (out / "launches").glob("*.meta.json")]
    assert {m["status"] for m in metas} == {"timeout"}


def test_crashed_launch_is_failed_with_stderr_tail(tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out), "--kernel-debug", "--debug crash"]) == 1
    con = Store(out).connect()
    errors = con.execute("SELECT DISTINCT status, error FROM measurements").fetchall()
    assert len(errors) == 1 and errors[0][0] == "failed"
    assert "crashed (debug switch)" in errors[0][1]
    # --retry-failed runs the failed launch again, this time without the switch
    assert main(["run", str(spec), "-o", str(out), "--resume", "--retry-failed"]) == 0
    assert {r[4] for r in points(out)} == {"ok"}


def test_corrupted_result_is_invalid_never_a_latency(tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]", validate="true"), tmp_path / "res"
    main(["run", str(spec), "-o", str(out), "--kernel-debug", "--debug corrupt --debug-at 1"])
    con = Store(out).connect()
    bad = con.execute("SELECT avg_us, validated FROM measurements WHERE status='invalid'")
    assert bad.fetchall() == [(None, False)]


def _collbench(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "collbench.cli", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _wait_for_launches(out: Path, n: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while len(list((out / "launches").glob("*.jsonl"))) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_killed_run_loses_nothing_and_resume_completes(tmp_path: Path) -> None:
    """A run stopped by Ctrl-C, then its resume SIGKILLed (collbench and its launch, no
    chance to clean up): each time every stored launch is whole and none stored before is
    measured again; a last resume completes the campaign."""
    spec, out = write_spec(tmp_path, nprocs="[2, 3, 4]", reps=2), tmp_path / "res"
    env = dict(os.environ, COLLBENCH_FAKE_POINT_S="0.02")
    stored: dict[str, bytes] = {}
    for sig, resume in ((signal.SIGINT, ()), (signal.SIGKILL, ("--resume",))):
        proc = _collbench("run", str(spec), "-o", str(out), *resume, env=env)
        _wait_for_launches(out, max(2, len(stored) + 1), proc)
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, signal.SIGKILL)  # collbench and its launch, mid-way
        else:
            os.kill(proc.pid, signal.SIGINT)  # Ctrl-C reaches collbench only
        code = proc.wait(timeout=30)
        assert code == (-9 if sig == signal.SIGKILL else 130)
        now = {p.name: p.read_bytes() for p in (out / "launches").glob("*.jsonl")}
        assert max(2, len(stored) + 1) <= len(now) < 6
        assert all(now[name] == body for name, body in stored.items())  # not rerun
        for body in now.values():  # every stored launch is complete
            assert all(json.loads(line)["status"] == "ok" for line in body.splitlines())
        stored = now
    resumed = _collbench("run", str(spec), "-o", str(out), "--resume")
    assert resumed.wait(timeout=120) == 0, resumed.communicate()
    after = {p.name: p.read_bytes() for p in (out / "launches").glob("*.jsonl")}
    assert len(after) == 6
    assert all(after[name] == body for name, body in stored.items())  # not rerun
    rows = points(out)
    assert len(rows) == len(set(rows)) == 6 * 5 * 7


def test_resume_refuses_another_mpi(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    prov = json.loads((out / "provenance.json").read_text())
    prov["mpi"]["version"] = "4.1.6"
    (out / "provenance.json").write_text(json.dumps(prov))
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


# --- a program's output, whatever it is, becomes rows ----------------------------------------

PROGRAM_SPEC = """\
[campaign]
name = "out"
[measure]
nprocs = [2]
[workload]
{workload}
"""
ROW_CONTEXT = RowContext("out", "local", "openmpi-5.0.11", "5.0.11")
OUTCOMES = st.builds(
    lambda status, code, tail: LaunchOutcome(status, ["mpirun"], code, 1.0, tail),
    st.sampled_from(["ok", "failed", "timeout"]), st.sampled_from([0, 1, -9, None]),
    st.sampled_from(["", "rank 1: oops\n", "x\ncollbench: output limit: a rank printed "
                     "more than 10 bytes (its share of the launch's limit); it was stopped\n"]))


def _program_launch(workload: str) -> Launch:
    spec = parse_spec(PROGRAM_SPEC.format(workload=workload), "s")
    return make_plan(spec, Catalog("openmpi", "5.0.11", "test", {}), "s", cores=64).launches[0]


ONE_ROW = _program_launch('program = { run = ["./p"] }')
REGEX_ROW = _program_launch("program = { run = [\"./p\"], metrics = { t_ms = 't=(\\\\S+)' } }")
LINE_ROWS = _program_launch('app = "plogp"\nparams = { min = 0, max = 4 }')  # sizes 0, 1, 2, 4


def _number(draw: st.DrawFn) -> str:
    return str(draw(st.sampled_from(["-5", "NaN", "Infinity", "-Infinity", "1e400", "2e12",
                                     "1" + "0" * 400, "1e300", "-0.0", "3", "0.5", "true",
                                     "null", '"x"', "[[[[1]]]]"])))


@st.composite
def _program_line(draw: st.DrawFn) -> str:
    """A line as a program may print it: the keys readers look at, with any value."""
    keys = draw(st.lists(st.sampled_from(["time_us", "avg_us", "min_us", "max_us",
                                          "median_us", "bandwidth_mbs", "size_bytes", "size",
                                          "iterations", "warmup", "valid", "rtt_us", "x_us",
                                          "t_ms"]), max_size=6, unique=True))
    body = ", ".join(f'"{k}": {_number(draw)}' for k in keys)
    return "{" + body + "}"


PRINTED = st.lists(_program_line() | st.integers(1, 3000).map(lambda d: "[" * d + "]" * d)
                   | st.sampled_from(["t=1e400", "t=-3", "t=nan", "t=0.25", "{", "chatter"])
                   | st.binary(max_size=80).map(lambda b: b.decode("utf-8", "replace")),
                   max_size=6).map("\n".join)


def _row_is_storable(row: dict[str, Any]) -> None:
    """What every reader of a stored row relies on."""
    json.dumps(row, allow_nan=False)  # strict JSON
    assert row["status"] in ("ok", "invalid", "failed", "timeout")
    assert (row["status"] == "ok") == (row["error"] is None)
    for col in ("avg_us", "min_us", "max_us", "median_us"):
        assert row[col] is None or 0 <= row[col] <= 1e12, (col, row[col])
    assert row["bandwidth_mbs"] is None or 0 <= row["bandwidth_mbs"] <= 1e18
    assert 0 <= row["size_bytes"] <= 1 << 50
    assert 0 <= row["iterations"] < 2**31 and 0 <= row["warmup"] < 2**31
    if row["metrics"] is not None:
        json.loads(row["metrics"], parse_constant=lambda c: pytest.fail(f"{c} in metrics"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PRINTED, OUTCOMES, st.sampled_from([ONE_ROW, REGEX_ROW, LINE_ROWS]))
def test_any_program_output_becomes_storable_rows(printed: str, outcome: LaunchOutcome,
                                                  launch: Launch) -> None:
    rows = program_rows(launch, printed, outcome, ROW_CONTEXT, 1)
    assert len(rows) == len(launch.points)
    for row in rows:
        _row_is_storable(row)
    if "output limit" in outcome.stderr_tail:  # stopped: no point after its last line
        assert launch.program is not None
        printed_lines = len(programs.json_lines(printed)) if launch.program.lines else 0
        assert all(r["status"] == "failed" and r["error"].startswith("collbench: output limit")
                   for r in rows[printed_lines:])


def test_rows_of_absurd_output_are_read_back_by_every_reader(tmp_path: Path) -> None:
    """Stored as the runner stores them, the failed rows of absurd output and an ok row read
    back through the read door (points.read) and `show`."""
    from collbench import points

    ok = LaunchOutcome("ok", ["mpirun"], 0, 1.0)
    printed = ['{"time_us": 5, "x_us": 1e300}', '{"time_us": 5, "size_bytes": 1e300}',
               '{"time_us": 1' + "0" * 400 + "}", '{"time_us": 5, "nest": ' + "[" * 40
               + "]" * 40 + "}", '{"time_us": 5, "k_us": 7, "valid": true}']
    spec = write_spec(tmp_path, nprocs="[2]")
    assert main(["run", str(spec), "-o", str(tmp_path / "res")]) == 0
    store = Store(tmp_path / "res")
    rows = [program_rows(replace(ONE_ROW, launch_id=f"p{i}"), text, ok, ROW_CONTEXT, 1)[0]
            for i, text in enumerate(printed)]
    store.write_launch("p-absurd", rows, {"status": "ok"})
    assert [r["status"] for r in rows] == ["failed"] * 4 + ["ok"]
    read = [r for r in points.read(store) if r["collective"] == "p"]
    assert sorted(r["status"] for r in read) == ["failed"] * 4 + ["ok"]
    assert next(r for r in read if r["status"] == "ok")["k_us"] == 7.0
