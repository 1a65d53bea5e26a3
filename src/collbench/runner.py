"""Run a planned campaign: launch by launch, storing each one as soon as it finishes."""

from __future__ import annotations

import json
import shutil
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any

from collbench.catalog import components
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.errors import UserError
from collbench.kernel import monitoring
from collbench.launch import program as programs
from collbench.launch.base import Backend, LaunchBackend, LaunchOutcome, call_for
from collbench.launch.batch import BatchBackend, Done
from collbench.launch.process import OUTPUT_LOST, OUTPUT_MARK
from collbench.plan import Launch, Plan
from collbench.progress import Progress
from collbench.records import make_row, ranks_per_node
from collbench.served import (
    bounded,
    kernel_metrics,
    launch_forcing_mca,
    nonblocking_metrics,
    served,
    with_metrics,
)
from collbench.store import Store

ERROR_TAIL = 600  # characters of stderr kept in each failed row


@dataclass(frozen=True)
class RowContext:
    campaign: str
    backend: str
    mpi: str  # the row's mpi column: the MPI's key, openmpi-5.0.11 (records format 2)
    mpi_version: str
    # [measure] mpi: a launch's MPI key -> its (mpi, mpi_version) columns
    per_mpi: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def of(self, launch: Launch) -> RowContext:
        """The context of this launch's rows: its own MPI's columns."""
        if launch.mpi is None or launch.mpi not in self.per_mpi:
            return self
        mpi, version = self.per_mpi[launch.mpi]
        return replace(self, mpi=mpi, mpi_version=version)


@dataclass
class Summary:
    launches: int = 0
    skipped: int = 0  # already stored (resume)
    by_status: dict[str, int] = field(default_factory=dict)
    points: dict[str, int] = field(default_factory=dict)
    interrupted: bool = False
    lost: dict[str, int] = field(default_factory=dict)  # launches a scheduler killed, by state

    def words(self) -> str:
        """'12 launches ok, 1 failed (3 already stored); points: 470 ok, 10 timeout'."""
        ran = sum(self.by_status.values())
        if not ran and self.interrupted:  # the discarded launch is not stored: say so
            before = f"; {self.skipped} already stored" if self.skipped else ""
            return f"interrupted: nothing stored (what was under way is discarded{before})"
        if not ran:
            many = f"all {self.launches} launches" if self.launches > 1 else "its 1 launch"
            return (f"nothing to do: {many} already stored"
                    if self.launches else "nothing to do: no launch planned")
        ok = self.by_status.get("ok", 0)
        counts = [f"{ok} launch{'es' if ok != 1 else ''} ok"]
        counts += [f"{n} {s}" for s, n in sorted(self.by_status.items()) if s != "ok"] or [
            "0 failed"]
        stored = f" ({self.skipped} already stored)" if self.skipped else ""
        points = ", ".join(f"{n} {s}" for s, n in sorted(self.points.items(),
                                                          key=lambda kv: kv[0] != "ok"))
        end = "; interrupted (what was under way is discarded)" if self.interrupted else ""
        return f"{', '.join(counts)}{stored}; points: {points or 'none'}{end}"


class _Interrupt:
    """SIGINT/SIGTERM/SIGHUP set a flag; the running launch is killed and not stored."""

    def __init__(self) -> None:
        self.flag = False

    def __call__(self) -> bool:
        return self.flag

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.flag = True


@contextmanager
def _signals(intr: _Interrupt) -> Iterator[None]:
    # SIGHUP (the terminal went away) ends a run as SIGTERM does: cleanly, launch killed.
    old = {s: signal.signal(s, intr.handler)
           for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def read_kernel_output(path: Path) -> list[dict[str, Any]]:
    """Complete JSON lines only: a line cut short by a kill is dropped, not guessed at."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def launch_params(launch: Launch) -> str:
    """The params column: the user's MCA settings and environment, without forcing keys."""
    own = launch_forcing_mca(launch)  # a coll/han setting's keys: its algorithm says them
    mca = {k: v for k, v in launch.mca if not is_forcing_mca(k) and k not in own
           and not components.is_request_mca(k, launch.component)}
    env = {k: v for k, v in launch.env if not is_forcing_env(k) and k != components.ENV}
    return json.dumps({"mca": mca, "env": env, "swept": dict(launch.swept)}, sort_keys=True)


def build_rows(
    launch: Launch, measured: list[dict[str, Any]], outcome: LaunchOutcome, ctx: RowContext,
    nodes: int,
) -> list[dict[str, Any]]:
    """One tidy row per planned point: measured, or marked with why it was not."""
    ctx = ctx.of(launch)
    params = launch_params(launch)
    rows = []
    for index, point in enumerate(launch.points):
        got = measured[index] if index < len(measured) else None
        if got is not None and (got.get("collective") != point.collective
                                or got.get("size_bytes") != point.size_bytes):
            got = {"status": "failed", "error": f"kernel output out of order at line {index + 1}"}
        elif got is not None and got.get("nprocs", launch.nprocs) != launch.nprocs:
            # e.g. srun with a PMI plugin the MPI does not speak starts P singletons
            got = {"status": "failed", "error": f"the kernel ran with {got.get('nprocs')} "
                   f"process(es), planned {launch.nprocs}: the launcher did not start one "
                   "MPI job (with srun: check run.slurm.srun_mpi)"}
        if got is None:
            status = "timeout" if outcome.status == "timeout" else "failed"
            why = (f"launch timed out after {launch.timeout_s:g} s" if status == "timeout"
                   else f"launch exited with status {outcome.returncode} before this point")
            tail = outcome.stderr_tail[-ERROR_TAIL:]
            got = {"status": status, "error": f"{why}; stderr: {tail}" if tail else why}
        got = bounded(got)
        component, got = served(launch, point, got, ctx.mpi)
        rows.append(make_row(
            campaign=ctx.campaign, launch_id=launch.launch_id, repetition=launch.repetition,
            backend=ctx.backend, source="kernel", mpi=ctx.mpi, mpi_version=ctx.mpi_version,
            collective=point.collective, component=component, algorithm=point.algorithm,
            algorithm_id=point.algorithm_id, segsize=point.segsize, fanout=point.fanout,
            selection=launch.selection, params=params, nprocs=launch.nprocs, nodes=nodes,
            ppn=ranks_per_node(launch.nprocs, nodes, launch.ppn), mapping=launch.mapping,
            binding=launch.binding, size_bytes=point.size_bytes,
            iterations=got.get("iterations", point.iterations),
            warmup=got.get("warmup", point.warmup),
            avg_us=got.get("avg_us"), min_us=got.get("min_us"), max_us=got.get("max_us"),
            median_us=got.get("median_us"), bandwidth_mbs=got.get("bandwidth_mbs"),
            validated=bool(got.get("validated", False)), status=got.get("status", "failed"),
            error=got.get("error"),
            metrics=with_metrics(kernel_metrics(got), {**nonblocking_metrics(point, got),
                                                       **got.get("monitoring", {})}),
        ))
    return rows


def program_rows(launch: Launch, stdout: str, outcome: LaunchOutcome, ctx: RowContext,
                 nodes: int) -> list[dict[str, Any]]:
    """The row of a workload launch (docs/workloads.md): source "program", collective = the
    program's name, every metric it reported in `metrics`, its time in avg_us (the primary
    metric, µs), min/max/median_us and bandwidth_mbs when it reports those keys. A program
    that exits non-zero, times out or prints nothing readable gives a failed/timeout row
    with its output's tail and no number; one that reports `"valid": false` is invalid."""
    prog = launch.program
    assert prog is not None
    if prog.lines:
        return program_line_rows(launch, stdout, outcome, ctx, nodes)
    ctx = ctx.of(launch)
    point = launch.points[0]
    metrics, why = programs.parse_metrics(stdout, dict(prog.metrics))
    avg: float | None = None
    if metrics is not None and not why:  # every number bounded before it is stored
        why = programs.out_of_bounds(metrics, prog.primary)
    if metrics is not None and not why:
        avg, why = programs.primary_us(metrics, prog.primary)
    status = "ok"
    if stopped := output_problem(outcome):
        status, why = "failed", stopped
    elif outcome.status == "timeout":
        status, why = "timeout", f"launch timed out after {launch.timeout_s:g} s"
    elif outcome.status != "ok":
        status, why = "failed", f"launch exited with status {outcome.returncode}"
    elif why:
        status = "failed"
    elif metrics is not None and metrics.get("valid") is False:
        status, why = "invalid", "the program reported valid = false"
    got = metrics if metrics is not None and status in ("ok", "invalid") else {}
    if status != "ok":
        tails = [f"{name}: {' '.join(text.split())[-ERROR_TAIL // 2:]}" for name, text in
                 (("stdout", stdout), ("stderr", outcome.stderr_tail)) if text.strip()]
        why = "; ".join([why, *tails])
    number = programs.number
    params = json.loads(launch_params(launch))
    params["program"] = dict(prog.params)
    size = number(got, "size_bytes")
    return [make_row(
        campaign=ctx.campaign, launch_id=launch.launch_id, repetition=launch.repetition,
        backend=ctx.backend, source="program", mpi=ctx.mpi, mpi_version=ctx.mpi_version,
        collective=prog.name, algorithm=point.algorithm, algorithm_id=None, segsize=0,
        fanout=0, selection=launch.selection, params=json.dumps(params, sort_keys=True),
        nprocs=launch.nprocs, nodes=nodes,
        ppn=ranks_per_node(launch.nprocs, nodes, launch.ppn),
        mapping=launch.mapping, binding=launch.binding,
        size_bytes=int(size) if size is not None else point.size_bytes,
        iterations=int(number(got, "iterations") or point.iterations),
        warmup=int(number(got, "warmup") or point.warmup),
        avg_us=avg if status == "ok" else None,
        min_us=number(got, "min_us") if status == "ok" else None,
        max_us=number(got, "max_us") if status == "ok" else None,
        median_us=number(got, "median_us") if status == "ok" else None,
        bandwidth_mbs=number(got, "bandwidth_mbs") if status == "ok" else None,
        validated=got.get("valid") is True, status=status, error=why or None,
        metrics=json.dumps({**got, "primary_metric": programs.primary_name(got, prog.primary)},
                           sort_keys=True, default=str) if got else None,
    )]


def program_line_rows(launch: Launch, stdout: str, outcome: LaunchOutcome, ctx: RowContext,
                      nodes: int) -> list[dict[str, Any]]:
    """The rows of a program printing one JSON line per planned point (message size), in
    order, as the kernel does: a line's figures are its row (avg_us the primary metric);
    points without a line failed or timed out with the launch."""
    prog = launch.program
    assert prog is not None
    ctx = ctx.of(launch)
    params = json.loads(launch_params(launch))
    params["program"] = dict(prog.params)
    lines = programs.json_lines(stdout)
    rows = []
    stopped = output_problem(outcome)
    for index, point in enumerate(launch.points):
        got = lines[index] if index < len(lines) else None
        avg: float | None = None
        if got is None:
            status = "timeout" if outcome.status == "timeout" and not stopped else "failed"
            why = stopped or (f"launch timed out after {launch.timeout_s:g} s"
                              if status == "timeout" else f"launch exited with status "
                              f"{outcome.returncode} before this point")
            tail = outcome.stderr_tail[-ERROR_TAIL:]
            why = f"{why}; stderr: {tail}" if tail else why
        elif why := programs.out_of_bounds(got, prog.primary):  # bounded before stored
            status, got = "failed", None
        elif programs.line_size(got) != point.size_bytes:
            status, why = "failed", f"program output out of order at line {index + 1}"
        else:
            avg, why = programs.primary_us(got, prog.primary)
            why = why or ("" if avg is not None else "no primary metric")
            status = "failed" if why else "ok"
        rows.append(make_row(
            campaign=ctx.campaign, launch_id=launch.launch_id, repetition=launch.repetition,
            backend=ctx.backend, source="program", mpi=ctx.mpi, mpi_version=ctx.mpi_version,
            collective=prog.name, algorithm=point.algorithm, algorithm_id=None, segsize=0,
            fanout=0, selection=launch.selection, params=json.dumps(params, sort_keys=True),
            nprocs=launch.nprocs, nodes=nodes,
            ppn=ranks_per_node(launch.nprocs, nodes, launch.ppn), mapping=launch.mapping,
            binding=launch.binding, size_bytes=point.size_bytes,
            iterations=point.iterations, warmup=point.warmup, avg_us=avg, min_us=None,
            max_us=None, median_us=None, bandwidth_mbs=None, validated=False,
            status=status, error=why or None,
            metrics=json.dumps({**got, "primary_metric": programs.primary_name(
                got, prog.primary)}, sort_keys=True, default=str) if got else None))
    return rows


def output_problem(outcome: LaunchOutcome) -> str:
    """The line saying the launch was stopped for its output: it printed more than its
    limit (said by run_group, or by a rank guard on stderr) or its output could not be
    written; "" when it was not."""
    for line in outcome.stderr_tail.splitlines():
        if OUTPUT_MARK in line or OUTPUT_LOST in line:
            return " ".join(line.split())[:300]
    return ""


def _write_samples(launch: Launch, measured: list[dict[str, Any]], path: Path) -> Path | None:
    wrote = False
    with path.open("w") as f:
        for point, got in zip(launch.points, measured, strict=False):
            for i, s in enumerate(got.get("samples_us") or []):
                f.write(json.dumps({
                    "launch_id": launch.launch_id, "collective": point.collective,
                    "algorithm": point.algorithm, "segsize": point.segsize,
                    "fanout": point.fanout, "size_bytes": point.size_bytes,
                    "iteration": i, "sample_us": s}) + "\n")
                wrote = True
    return path if wrote else None


def run_campaign(
    store: Store, plan: Plan, backend: Backend, kernel: Path, ctx: RowContext,
    progress_stream: Any = None, debug: tuple[str, ...] = (), wrapper: tuple[str, ...] = (),
) -> Summary:
    """Run every launch of the plan not yet stored; return what happened.

    The one dispatch on the kind of backend: a batch backend (Slurm) takes every launch at
    once, the others run them one by one. `wrapper` starts each rank's kernel (e.g. `env
    LD_PRELOAD=...`; one-by-one backends only).
    """
    finished = store.finished()
    todo = [la for la in plan.launches if la.launch_id not in finished]
    damaged = {lid: why for lid, why in store.last_damage.items()
               if any(la.launch_id == lid for la in todo)}
    summary = Summary(launches=len(plan.launches), skipped=len(plan.launches) - len(todo))
    estimates = {la.launch_id: la.estimate_seconds(simulated=plan.simulated) for la in todo}
    if not isinstance(backend, (BatchBackend, LaunchBackend)):
        raise TypeError(f"backend {backend.name!r} is neither a launch nor a batch backend")
    with Progress(len(todo), sum(estimates.values()), progress_stream) as progress:
        _run_todo(store, todo, backend, kernel, ctx, debug, wrapper, summary, progress,
                  estimates, damaged)
        progress.close(summary.words() if todo else "")
    return summary


def _run_todo(store: Store, todo: list[Launch], backend: Backend, kernel: Path,
              ctx: RowContext, debug: tuple[str, ...], wrapper: tuple[str, ...],
              summary: Summary, progress: Progress, estimates: dict[str, float],
              damaged: dict[str, str]) -> None:
    for lid, why in sorted(damaged.items()):
        progress.note(f"{lid}: its stored rows are damaged ({why}); measuring it again")
    intr = _Interrupt()
    if isinstance(backend, BatchBackend):
        if todo:
            with _signals(intr):
                _run_batch(store, todo, backend, kernel, ctx, debug, summary, progress,
                           estimates, intr)
        return
    assert isinstance(backend, LaunchBackend)
    with _signals(intr):
        for launch in todo:
            work = store.work_dir(launch.launch_id)
            if work.exists():
                shutil.rmtree(work)  # leftovers of an interrupted attempt
            work.mkdir(parents=True)
            call = call_for(launch, kernel, work, debug, wrapper)
            call.prepare(launch)
            progress.begin(f"{launch.launch_id} np={launch.nprocs} {launch.mapping}",
                           estimates[launch.launch_id], call.outfile,
                           launch.point_seconds(backend.name == "simgrid"))
            outcome = backend.run(launch, call, intr)
            if outcome.status == "interrupted" or intr.flag:
                summary.interrupted = True
                progress.note(f"interrupted: launch {launch.launch_id} discarded; "
                              "finished launches are stored; rerun with --resume")
                break
            ok = _record(store, launch, outcome, ctx, backend.nodes(launch), summary)
            progress.update(estimates[launch.launch_id], _message(launch, outcome, ok),
                            outcome.status == "ok")


def _record(store: Store, launch: Launch, outcome: LaunchOutcome, ctx: RowContext, nodes: int,
            summary: Summary, extra_meta: dict[str, Any] | None = None) -> int:
    """Store one launch that ran (its rows and meta), count it; its number of ok points."""
    work = store.work_dir(launch.launch_id)
    samples = None
    if launch.program is not None:  # a workload launch: the program's stdout is its row
        stdout = programs.read_stdout(work / "stdout.txt")
        rows = program_rows(launch, stdout, outcome, ctx, nodes)
        extra_meta = {**(extra_meta or {}), "stdout_tail": stdout[-ERROR_TAIL:]}
    else:
        measured = read_kernel_output(work / "kernel.jsonl")
        if launch.monitoring:  # run.monitoring: each ok point's counts per level
            measured = monitoring.attach(launch.nprocs, measured, work)
        rows = build_rows(launch, measured, outcome, ctx, nodes)
        samples = _write_samples(launch, measured, work / "samples.jsonl")
    meta = {
        "launch_id": launch.launch_id, "status": outcome.status,
        "command": outcome.command, "returncode": outcome.returncode,
        "wall_s": round(outcome.wall_s, 3), "stderr_tail": outcome.stderr_tail,
        "hosts": outcome.hosts, "points": len(launch.points), **(extra_meta or {}),
    }
    store.write_launch(launch.launch_id, rows, meta, samples)
    if outcome.status == "ok":
        shutil.rmtree(work, ignore_errors=True)
    summary.by_status[outcome.status] = summary.by_status.get(outcome.status, 0) + 1
    for r in rows:
        summary.points[r["status"]] = summary.points.get(r["status"], 0) + 1
    return sum(1 for r in rows if r["status"] == "ok")


def _message(launch: Launch, outcome: LaunchOutcome, ok: int) -> str:
    msg = (f"{launch.launch_id} np={launch.nprocs} {launch.mapping}: {outcome.status}, "
           f"{ok}/{len(launch.points)} points in {outcome.wall_s:.1f} s")
    if outcome.status != "ok":
        msg += f" — {(outcome.stderr_tail.splitlines() or [''])[-1][:160]}"
    return msg


def _run_batch(store: Store, todo: list[Launch], backend: BatchBackend,
               kernel: Path, ctx: RowContext, debug: tuple[str, ...], summary: Summary,
               progress: Progress, estimates: dict[str, float], intr: _Interrupt) -> None:
    """Hand every launch to the scheduler, then store each one as its job reports it."""
    reports = backend.begin(store, todo, kernel, debug)
    while True:
        for report in reports:
            launch = report.launch
            if isinstance(report, Done):
                ok = _record(store, launch, report.outcome, ctx, report.nodes, summary,
                             report.meta)
                backend.stored(launch, report.outcome.status)
                msg = _message(launch, report.outcome, ok)
                good = report.outcome.status == "ok"
            else:
                summary.lost[report.state] = summary.lost.get(report.state, 0) + 1
                summary.by_status["lost"] = summary.by_status.get("lost", 0) + 1
                msg = f"{launch.launch_id}: lost — {report.detail}; --resume runs it again"
                good = False
            progress.update(estimates[launch.launch_id], msg, good)
        if intr.flag:
            summary.interrupted = True
            try:
                jobs = backend.cancel()
                what = f"cancelled job(s) {', '.join(jobs)}" if jobs else "no job to cancel"
            except UserError as e:
                what = f"could not cancel: {e}"
            progress.note(f"interrupted: {what}; finished launches are stored; "
                          "rerun with --resume")
            return
        if not backend.active():
            return
        time.sleep(backend.poll_interval_s)
        reports = backend.poll()
