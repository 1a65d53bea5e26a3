"""The kernel under real Open MPI: output format, statistics, validation, debug switches."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from collbench.catalog.collectives import BLOCKING
from collbench.kernel.build import KernelBinary
from tests.conftest import RunKernel, mpirun_command

pytestmark = pytest.mark.mpi

KEYS = ["collective", "algorithm_id", "segsize", "fanout", "nprocs", "size_bytes", "iterations",
        "warmup", "avg_us", "min_us", "max_us", "median_us", "bandwidth_mbs", "validated",
        "status", "error", "samples_us"]
# 3 and 1027 do not divide by 2 or 4: uneven reduce_scatter splits, and fewer bytes than
# ranks for reduce_scatter(_block) at 4 ranks.
SIZES = (1, 3, 1027, 65536)
ITERATIONS = 4


def job_lines(collectives: tuple[str, ...] = BLOCKING,
              sizes: tuple[int, ...] = SIZES) -> list[tuple[str, int]]:
    points = []
    for coll in collectives:
        for size in (0,) if coll == "barrier" else sizes:
            points.append((coll, size))
    return points


def job_text(points: list[tuple[str, int]], iterations: int = ITERATIONS,
             warmup: int = 1) -> str:
    return "# comment\n\n" + "".join(f"{c} 0 0 0 {s} {iterations} {warmup}\n" for c, s in points)


def check_ok(rec: dict[str, Any], coll: str, size: int, nprocs: int, samples: bool) -> None:
    assert list(rec) == KEYS
    assert rec["status"] == "ok", rec
    assert rec["error"] is None
    assert (rec["collective"], rec["size_bytes"], rec["nprocs"]) == (coll, size, nprocs)
    assert (rec["iterations"], rec["warmup"], rec["algorithm_id"]) == (ITERATIONS, 1, 0)
    values = [rec[k] for k in ("avg_us", "min_us", "max_us", "median_us")]
    assert all(isinstance(v, float | int) and math.isfinite(v) and v >= 0 for v in values)
    assert rec["min_us"] <= rec["avg_us"] <= rec["max_us"]
    if samples:
        assert len(rec["samples_us"]) == ITERATIONS
        assert min(rec["samples_us"]) <= rec["median_us"] <= max(rec["samples_us"])
    else:
        assert rec["samples_us"] is None
    assert (rec["bandwidth_mbs"] is not None) == (coll in ("bw", "mbw_mr"))


@pytest.mark.parametrize("nprocs", [2, 4])
def test_every_collective_validates(run_kernel: RunKernel, nprocs: int) -> None:
    points = [*job_lines(), ("latency", 8), ("bw", 1024), ("mbw_mr", 1024)]
    run = run_kernel(nprocs, job_text(points), "--validate", "--samples")
    assert run.returncode == 0, run.stderr
    assert len(run.records) == len(points)
    for rec, (coll, size) in zip(run.records, points, strict=True):
        check_ok(rec, coll, size, nprocs, samples=True)
        assert rec["validated"] is True


def test_plain_run_and_point_to_point(run_kernel: RunKernel) -> None:
    points = [("latency", 1), ("latency", 4096), ("bw", 1), ("bw", 65536), ("allreduce", 8)]
    run = run_kernel(2, job_text(points))
    assert run.returncode == 0, run.stderr
    for rec, (coll, size) in zip(run.records, points, strict=True):
        check_ok(rec, coll, size, 2, samples=False)
        assert rec["validated"] is False
    for rec in run.records[:4]:  # rank 0's view: one number
        assert rec["avg_us"] == rec["min_us"] == rec["max_us"]
    bw = run.records[3]
    # bandwidth = bytes / time per message: consistent with avg_us, the per-message time
    assert bw["bandwidth_mbs"] == pytest.approx(65536 / bw["avg_us"], rel=1e-6)


@pytest.mark.parametrize("nprocs", [3, 4])
def test_multi_pair_bandwidth_is_the_pairs_aggregate(run_kernel: RunKernel,
                                                      nprocs: int) -> None:
    """osu_mbw_mr's figure: P/2 pairs (an odd last rank idles), bandwidth = pairs x size /
    the senders' mean time per message (avg_us), min/max the fastest/slowest sender's."""
    run = run_kernel(nprocs, job_text([("mbw_mr", 65536), ("mbw_mr", 1)]), "--samples")
    assert run.returncode == 0, run.stderr
    for rec, size in zip(run.records, (65536, 1), strict=True):
        check_ok(rec, "mbw_mr", size, nprocs, samples=True)
        pairs = nprocs // 2
        assert rec["bandwidth_mbs"] == pytest.approx(pairs * size / rec["avg_us"], rel=1e-6)
    if nprocs == 4:  # two senders timed apart
        assert run.records[0]["min_us"] < run.records[0]["max_us"]


def test_point_to_point_needs_two_ranks(run_kernel: RunKernel) -> None:
    run = run_kernel(1, job_text([("latency", 8), ("bw", 8), ("mbw_mr", 8), ("bcast", 8)]),
                     "--validate")
    assert run.returncode == 0, run.stderr
    for rec in run.records[:3]:
        assert rec["status"] == "failed" and rec["error"] == "needs at least 2 ranks"
        assert rec["avg_us"] is None and rec["median_us"] is None
    assert run.records[3]["status"] == "ok" and run.records[3]["validated"] is True


@pytest.mark.parametrize(("nprocs", "points", "at"), [
    (4, [("bcast", 64), ("allreduce", 1027), ("gather", 64)], 1),
    (4, [("gather", 64), ("reduce_scatter", 1027)], 0),  # only the root receives
    (2, [("bw", 1024), ("alltoallv", 3)], 0),
    (4, [("bcast", 8), ("mbw_mr", 1024)], 1),  # the last pair's receiver (rank 3)
])
def test_corrupt_data_is_reported_invalid(run_kernel: RunKernel, nprocs: int,
                                          points: list[tuple[str, int]], at: int) -> None:
    run = run_kernel(nprocs, job_text(points), "--validate", "--samples",
                     "--debug", "corrupt", "--debug-at", str(at))
    assert run.returncode == 0, run.stderr
    for i, rec in enumerate(run.records):
        if i != at:
            assert rec["status"] == "ok" and rec["validated"] is True
            continue
        assert rec["status"] == "invalid" and rec["validated"] is False
        assert all(rec[k] is None for k in ("avg_us", "min_us", "max_us", "median_us",
                                            "bandwidth_mbs", "samples_us"))
        assert "validation failed on rank" in rec["error"] and "expected" in rec["error"]


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("bcast 0 0 0 8 10 1\n# ok\nbcastt 0 0 0 8 10 1\n", 3, "unknown collective 'bcastt'"),
    ("\nbcast 0 0 0 8 ten 1\n", 2, "iterations must be an integer"),
    ("bcast 0 0 0 8 10\n", 1, "expected 7 fields"),
    ("barrier 0 0 0 8 10 1\n", 1, "size_bytes must be 0"),
])
def test_bad_job_file_names_file_and_line(run_kernel: RunKernel, text: str, line: int,
                                          reason: str) -> None:
    run = run_kernel(2, text)
    assert run.returncode != 0
    assert f"jobs0.txt:{line}: " in run.stderr and reason in run.stderr
    assert run.records == []


def test_bad_arguments_exit_nonzero(run_kernel: RunKernel) -> None:
    run = run_kernel(2, "bcast 0 0 0 8 2 0\n", "--debug", "explode")
    assert run.returncode != 0 and "--debug" in run.stderr and "usage:" in run.stderr


def test_crash_stops_the_launch_after_earlier_points(run_kernel: RunKernel) -> None:
    run = run_kernel(2, job_text([("bcast", 8), ("bcast", 16), ("bcast", 32)]),
                     "--debug", "crash", "--debug-at", "1")
    assert run.returncode != 0
    assert [r["size_bytes"] for r in run.records] == [8]


def test_hang_blocks_until_killed(kernel: KernelBinary, tmp_path: Path) -> None:
    jobs, out = tmp_path / "jobs.txt", tmp_path / "out.jsonl"
    jobs.write_text(job_text([("bcast", 8), ("bcast", 16)]))
    cmd = [*mpirun_command(2), str(kernel.path), "--jobs", str(jobs), "--output", str(out),
           "--debug", "hang", "--debug-at", "1"]
    env = {**os.environ, "OMPI_MCA_mpi_yield_when_idle": "1"}
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (out.exists() and out.read_text()):
            time.sleep(0.1)
        time.sleep(1.0)
        assert proc.poll() is None  # still hanging at point 1
        assert len(out.read_text().splitlines()) == 1
    finally:
        proc.terminate()  # mpirun tears its job down on SIGTERM
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the session this test started
            proc.wait(timeout=20)
