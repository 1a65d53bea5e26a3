"""Any MPI program as a campaign workload (spec [workload]): spec and plan checks, rows from
a program's output, failures that never become numbers, one-line bad input, builds cached
per compiler; the built-in mini-apps and a user's C program under real Open MPI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from collbench.catalog.algorithms import Catalog
from collbench.cli import main
from collbench.errors import UserError
from collbench.launch.base import KernelCall, ProgramCall, call_for
from collbench.launch.program import build_program, parse_metrics, primary_us
from collbench.plan import Plan, make_plan
from collbench.spec import parse_spec
from collbench.store import Store

CATALOG = Catalog("openmpi", "5.0.11", "test", {})

HEAD = """\
[campaign]
name = "wl"
[measure]
nprocs = {nprocs}
"""

PY_PROGRAM = """\
#!{python}
import json, os, sys, time
mode = sys.argv[1]
n = int(os.environ.get("COLLBENCH_FAKE_NPROCS", "1"))
print("some chatter first")
if mode == "json":
    print(json.dumps({{"time_us": 10.0 * n, "iterations": 7, "valid": True, "nested": [1, 2]}}))
elif mode == "regex":
    print(f"elapsed {{0.5 * n}} s\\nrate: 12.5 MB/s")
elif mode == "invalid":
    print(json.dumps({{"time_us": 1.0, "valid": False}}))
elif mode == "crash":
    print(json.dumps({{"time_us": 1.0}}))
    sys.stderr.write("rank 1: segmentation fault\\n")
    sys.exit(3)
elif mode == "hang":
    print("started", flush=True)
    time.sleep(3600)
"""


def write(tmp_path: Path, body: str, nprocs: str = "[1, 2]", name: str = "spec.toml") -> Path:
    spec = tmp_path / name
    spec.write_text(HEAD.format(nprocs=nprocs) + body)
    return spec


def program(tmp_path: Path, executable: bool = True) -> Path:
    import sys

    path = tmp_path / "prog.py"
    path.write_text(PY_PROGRAM.format(python=sys.executable))
    path.chmod(0o755 if executable else 0o644)
    return path


def fake_spec(tmp_path: Path, mode: str, metrics: str = "", timeout: float = 60,
              nprocs: str = "[1, 2]") -> Path:
    program(tmp_path)
    metric = f", metrics = {metrics}" if metrics else ""
    return write(tmp_path, f"""\
[workload]
program = {{ run = ["./prog.py", "{{mode}}"]{metric} }}
params = {{ mode = "{mode}" }}
[run]
backend = "fake"
timeout = {timeout}
""", nprocs)


def rows(out: Path) -> list[dict[str, Any]]:
    got = []
    for path in sorted((out / "launches").glob("*.jsonl")):
        got += [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(got, key=lambda r: (r["nprocs"], r["repetition"]))


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# --- spec --------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "expected"), [
    ('[workload]\napp = "rign"\n', "workload.app: 'rign' is not valid; valid: ring, matrix, "
                                   "jacobi, plogp (did you mean ring?)"),
    ('[workload]\napp = "ring"\nparams = { sise = 8 }\n',
     "workload.params.sise: ring has no argument 'sise'; valid: size, iterations, warmup "
     "(did you mean size?)"),
    ('[workload]\napp = "matrix"\nparams = { dims = [4, 3, 2] }\n',
     "workload.params.dims[0]: '4' is not valid; valid: 3 non-negative integers"),
    ('[workload]\nprogram = { run = ["./p", "{iters}"] }\nparams = { iterations = 3 }\n',
     "workload.program.run[1]: {iters} is not a param; valid: {iterations}, {nprocs}"),
    ('[workload]\nprogram = { run = ["./p"] }\nparams = { n = 3 }\n',
     "workload.params.n: param 'n' is not used"),
    ('[workload]\nprogram = { run = ["./p"], metrics = { t = "(a)(b)" } }\n',
     "workload.program.metrics.t: '(a)(b)' has 2 groups"),
    ('[workload]\nprogram = { run = ["./p"], metrics = { t = "(" } }\n',
     "workload.program.metrics.t: '(' is not a regular expression"),
    ('[workload]\napp = "ring"\nprogram = { run = ["./p"] }\n',
     "workload: give exactly one of app (a built-in mini-app) and program"),
    ('[workload]\nprogram = { run = ["./p"], buld = [] }\n',
     "workload.program.buld: unknown key 'buld'; valid: build, run, metrics, primary, name"),
])
def test_workload_spec_errors_are_one_line(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(UserError) as e:
        parse_spec(HEAD.format(nprocs="[2]") + body, "spec.toml")
    assert str(e.value).startswith(f"spec.toml: {expected}"), str(e.value)
    assert "\n" not in str(e.value)


def test_collectives_and_a_workload_do_not_mix() -> None:
    text = HEAD.format(nprocs="[2]") + 'collectives = ["bcast"]\n[workload]\napp = "ring"\n'
    with pytest.raises(UserError, match=r"measure.collectives: a spec with \[workload\] "
                                        r"measures the program"):
        parse_spec(text, "s")
    with pytest.raises(UserError, match=r"measure\.collectives: required key is missing"):
        parse_spec(HEAD.format(nprocs="[2]"), "s")


# --- plan --------------------------------------------------------------------------------

def test_params_are_launch_dimensions_zipped_and_excluded() -> None:
    spec = parse_spec('zip = [["nprocs", "dims"]]\n' + HEAD.format(nprocs="[2, 4, 6]") + """\
[workload]
app = "jacobi"
params = { L = [8, 16], dims = [[2, 1, 1], [2, 2, 1], "3,2,0"] }
[run]
repetitions = 2
[[exclude]]
L = 16
nprocs = 6
""", "s")
    plan = make_plan(spec, CATALOG, "s", cores=64)
    assert len(plan.launches) == (3 * 2 - 1) * 2
    args = {(la.nprocs, la.program.args) for la in plan.launches if la.program}
    assert (4, ("L=8", "dims=2,2,1")) in args and (6, ("L=16", "dims=3,2,0")) not in args
    assert all(len(la.points) == 1 and la.points[0].collective == "jacobi"
               for la in plan.launches)
    again = Plan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again == plan


def test_a_grid_that_does_not_hold_nprocs_is_one_line_at_plan(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, '[workload]\napp = "matrix"\nparams = { dims = [[2, 2, 1]] }\n',
                 "[2, 4]")
    assert main(["plan", str(spec)]) == 2
    assert one_line_error(capsys).endswith(
        "workload.params.dims: 2x2x1 = 4 processes, not nprocs = 2; give dims whose product "
        'is nprocs (zip them: zip = [["nprocs", "dims"]]) or exclude the pair')


def test_calls_give_the_kernel_or_the_program(tmp_path: Path) -> None:
    spec = parse_spec(HEAD.format(nprocs="[3]") +
                      '[workload]\nprogram = { run = ["./p", "-n", "{nprocs}", "x={k}"] }\n'
                      'params = { k = ["a b"] }\n', "s")
    (la,) = make_plan(spec, CATALOG, "s").launches
    call = call_for(la, Path("/bin/p"), tmp_path)
    assert isinstance(call, ProgramCall) and call.work == tmp_path
    assert call.argv(la) == ["/bin/p", "-n", "3", "x=a b"]  # one argument, no shell
    kernel = call_for(la.__class__(**{**la.__dict__, "program": None}), Path("/k"), tmp_path)
    assert isinstance(kernel, KernelCall) and kernel.argv(la)[1:3] == ["--jobs",
                                                                      str(tmp_path / "jobs.txt")]


# --- output to rows ------------------------------------------------------------------------

def test_metrics_json_regex_and_primary() -> None:
    assert parse_metrics('x\n{"a": 1}\n{"t": 2}\nnoise\n', {}) == ({"t": 2}, "")
    assert parse_metrics("nothing", {})[1] == "no JSON object line on stdout"
    got, why = parse_metrics("T = 1.5\nT = 2.5\n", {"t": r"T = (\S+)"})
    assert (got, why) == ({"t": 2.5}, "")
    assert "never matched" in parse_metrics("x", {"t": "T=(\\d+)"})[1]
    assert primary_us({"elapsed_s": 0.25}, None) == (250000.0, "")
    assert primary_us({"total_us": 3.0, "time_us": 2.0}, None) == (2.0, "")
    assert primary_us({"t_ms": 2.0}, "t_ms") == (2000.0, "")
    assert primary_us({"x": 1}, "time_us")[1] == "primary metric 'time_us' is missing"


def test_program_rows_with_the_fake_backend(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = fake_spec(tmp_path, "json"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    got = rows(out)
    assert [r["nprocs"] for r in got] == [1, 2]
    for r in got:
        assert (r["source"], r["collective"], r["status"]) == ("program", "prog.py", "ok")
        assert r["avg_us"] == 10.0 * r["nprocs"] and r["iterations"] == 7 and r["validated"]
        metrics = json.loads(r["metrics"])
        assert metrics["nested"] == [1, 2] and metrics["primary_metric"] == "time_us"
        assert json.loads(r["params"])["program"] == {"mode": "json"}
    prov = Store(out).provenance()
    assert prov["program"]["name"] == "prog.py" and "kernel" not in prov
    capsys.readouterr()
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    assert "nothing to do: all 2 launches already stored" in capsys.readouterr().out
    assert main(["show", str(out), "--format", "csv"]) == 0
    assert "prog.py" in capsys.readouterr().out


def test_regex_metrics_in_seconds(tmp_path: Path) -> None:
    spec = fake_spec(tmp_path, "regex", metrics="{ elapsed_s = 'elapsed (\\S+) s', "
                                                "bandwidth_mbs = 'rate: (\\S+) MB/s' }")
    assert main(["run", str(spec), "-o", str(tmp_path / "res")]) == 0
    got = rows(tmp_path / "res")
    assert [r["avg_us"] for r in got] == [500000.0, 1000000.0]
    assert all(r["bandwidth_mbs"] == 12.5 for r in got)


@pytest.mark.parametrize(("mode", "metrics", "status", "why"), [
    ("regex", "", "failed", "no JSON object line on stdout; stdout: some chatter first"),
    ("json", "{ t = 'never (\\d+)' }", "failed", "metrics never matched on stdout: t"),
    ("crash", "", "failed", "launch exited with status 3; stdout: some chatter first"),
    ("hang", "", "timeout", "launch timed out after 2 s; stdout: some chatter first started"),
    ("invalid", "", "invalid", "the program reported valid = false"),
])
def test_a_program_that_fails_is_never_a_number(tmp_path: Path, mode: str, metrics: str,
                                                status: str, why: str) -> None:
    spec = fake_spec(tmp_path, mode, metrics, timeout=2, nprocs="[2]")
    assert main(["run", str(spec), "-o", str(tmp_path / "res")]) == 1
    (row,) = rows(tmp_path / "res")
    assert (row["status"], row["avg_us"], row["min_us"]) == (status, None, None)
    assert row["error"].startswith(why), row["error"]
    if mode == "crash":
        assert "stderr: rank 1: segmentation fault" in row["error"]


def test_a_program_that_is_not_executable_is_one_line_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = fake_spec(tmp_path, "json")
    program(tmp_path, executable=False)
    out = tmp_path / "res"
    for args in (["plan", str(spec)], ["run", str(spec), "-o", str(out)]):
        assert main(args) == 2
        line = one_line_error(capsys)
        assert "workload.program.run[0]:" in line and "is not executable" in line
    assert not out.exists()


# --- builds ------------------------------------------------------------------------------

BROKEN_C = "int main(void) { return missing; }\n"


def test_a_failing_build_shows_the_command(mpicc: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "broken.c").write_text(BROKEN_C)
    spec = write(tmp_path, '[workload]\nprogram = { build = ["mpicc", "-O2", "broken.c", "-o", '
                           '"broken"], run = ["./broken"] }\n')
    out = tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("collbench: error: compiling workload.program.build (broken) failed "
                            f"(exit 1): {mpicc} -O2 {tmp_path / 'broken.c'} -o broken"), first
    assert "missing" in err and not out.exists()


HELLO_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include "hello.h"
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n, reps = argc > 1 ? atoi(argv[1]) : 10;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long sum = 0, mine = rank;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < reps; ++i)
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / reps;
    if (rank == 0) printf("%s: %d procs, sum %ld\nTime per allreduce: %.4f us\n", GREETING, n,
                          sum, t * 1e6);
    MPI_Finalize();
    return sum == (long)n * (n - 1) / 2 ? 0 : 1;
}
"""


def hello_spec(tmp_path: Path, nprocs: str = "[1, 2]") -> Path:
    (tmp_path / "hello.c").write_text(HELLO_C)
    (tmp_path / "hello.h").write_text('#define GREETING "hello"\n')
    return write(tmp_path, """\
[workload]
params = { reps = [50] }
[workload.program]
build = ["mpicc", "-O2", "hello.c", "-o", "hello"]
run = ["./hello", "{reps}"]
metrics = { time_us = 'Time per allreduce: (\\S+) us', sum = 'sum (\\d+)' }
[run]
timeout = 120
""", nprocs)


def test_builds_are_cached_per_compiler_and_sources(mpicc: Path, tmp_path: Path) -> None:
    spec = parse_spec(hello_spec(tmp_path).read_text(), str(tmp_path / "spec.toml"))
    assert spec.workload is not None
    origin, cache = str(tmp_path / "spec.toml"), tmp_path / "cache"
    first = build_program(mpicc, spec.workload, origin, cache)
    again = build_program(mpicc, spec.workload, origin, cache)
    assert first.fresh and not again.fresh and again.path == first.path
    assert os.access(first.path, os.X_OK) and not (tmp_path / "hello").exists()
    (tmp_path / "hello.h").write_text('#define GREETING "hi"\n')  # a header beside it
    changed = build_program(mpicc, spec.workload, origin, cache)
    assert changed.fresh and changed.path != first.path


# --- real Open MPI -------------------------------------------------------------------------

APPS_SPECS = {
    "ring": ('[workload]\napp = "ring"\nparams = { size = [8, "4K"], iterations = 20 }\n',
             "[1, 2, 4]"),
    "matrix": ('zip = [["nprocs", "dims"]]\n', "[1, 2, 4]",
               '[workload]\napp = "matrix"\nparams = { shape = [[12, 8, 6]], dims = [[1, 1, 1], '
               '[2, 1, 1], [2, 2, 1]], iterations = 5 }\n'),
    "jacobi": ('zip = [["nprocs", "dims"]]\n', "[1, 2, 4]",
               '[workload]\napp = "jacobi"\nparams = { L = 12, dims = [[1, 1, 1], [2, 1, 1], '
               '[1, 2, 2]], iterations = 5 }\n'),
}


def _app_spec(tmp_path: Path, app: str) -> Path:
    entry = APPS_SPECS[app]
    if len(entry) == 2:
        return write(tmp_path, entry[0], entry[1])
    top, nprocs, body = entry
    spec = tmp_path / "spec.toml"
    spec.write_text(top + HEAD.format(nprocs=nprocs) + body)
    return spec


@pytest.mark.mpi
@pytest.mark.parametrize("app", ["ring", "matrix", "jacobi"])
def test_builtin_apps_under_open_mpi(app: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional runs only
    out = tmp_path / "res"
    assert main(["run", str(_app_spec(tmp_path, app)), "-o", str(out)]) == 0
    got = rows(out)
    assert {r["nprocs"] for r in got} == {1, 2, 4}
    for r in got:
        metrics = json.loads(r["metrics"])
        assert r["status"] == "ok" and r["validated"] and r["collective"] == app, r
        assert metrics["nprocs"] == r["nprocs"] and metrics["valid"] is True
        assert r["avg_us"] == metrics[{"ring": "avg_us", "matrix": "total_us",
                                       "jacobi": "time_us"}[app]] > 0
    if app == "ring":
        assert {r["size_bytes"] for r in got} == {8, 4096}
    if app == "jacobi":
        assert [json.loads(r["metrics"])["k"] for r in got] == [0, 1, 2]


@pytest.mark.mpi
def test_a_user_program_under_open_mpi(mpicc: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "res"
    assert main(["run", str(hello_spec(tmp_path, "[1, 2, 3]")), "-o", str(out)]) == 0
    got = rows(out)
    assert [(r["nprocs"], json.loads(r["metrics"])["sum"]) for r in got] == [
        (1, 0.0), (2, 1.0), (3, 3.0)]
    assert all(r["status"] == "ok" and r["avg_us"] > 0 for r in got)
    meta = json.loads(next((out / "launches").glob("*.meta.json")).read_text())
    assert "Time per allreduce" in meta["stdout_tail"]
