"""Precision-driven iterations under real Open MPI: the kernel measures in batches until the
median's confidence interval is within the target, and agrees with fixed counts."""

from __future__ import annotations

from typing import Any

import pytest

from collbench.analyse.stats import median_ci
from tests.conftest import RunKernel

pytestmark = pytest.mark.mpi

TARGET = 0.02


def precise(coll: str, size: int, first: int = 20, cap: int = 20000,
            seconds: float = 5) -> str:
    return (f"{coll} 0 0 0 {size} {first} 10 precision={TARGET} max_iterations={cap} "
            f"max_seconds={seconds}\n")


def reached_or_capped(rec: dict[str, Any], first: int, cap: int) -> None:
    assert rec["status"] == "ok", rec
    assert first <= rec["iterations"] <= cap
    assert rec["precision"] > 0
    # stopped because the target was met, or because a cap was hit
    assert rec["precision"] <= TARGET or rec["iterations"] == cap or rec["iterations"] > first


def agree(prec: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> bool:
    """The precision-driven median lies within the fixed-count runs' 95% intervals of the
    median (the one before it and the one after it, so that a drift along the launch is
    covered), widened by the precision run's own half-width."""
    cis = [median_ci(r["samples_us"], 0.95) for r in (before, after)]
    assert all(ci is not None for ci in cis)
    low = min(ci.low for ci in cis if ci is not None)
    high = max(ci.high for ci in cis if ci is not None)
    slack = prec["precision"] * prec["median_us"]
    return bool(low - slack <= prec["median_us"] <= high + slack)


def test_precision_runs_reproduce_fixed_count_medians(run_kernel: RunKernel) -> None:
    """Each size measured with fixed counts, precision-driven, and fixed again, in one
    launch with samples. Another job's burst on a shared machine can move one launch's
    figures far, so a size gets up to 3 launches; a precision mode that measured something
    else would fail all of them."""
    for size in (1024, 65536, 262144):
        fixed = f"allreduce 0 0 0 {size} 300 20\n"
        tries = []
        for _ in range(3):
            run = run_kernel(2, fixed + precise("allreduce", size) + fixed, "--samples")
            assert run.returncode == 0, run.stderr
            before, prec, after = run.records
            reached_or_capped(prec, 20, 20000)
            assert len(prec["samples_us"]) == prec["iterations"]
            assert before["iterations"] == after["iterations"] == 300
            assert "precision" not in before
            tries.append((before["median_us"], prec["median_us"], after["median_us"]))
            if agree(prec, before, after):
                break
        else:
            pytest.fail(f"{size} B: precision and fixed medians disagree in 3 launches: {tries}")


def test_a_noisy_point_takes_more_iterations_than_a_quiet_one(run_kernel: RunKernel) -> None:
    """A target no run can meet stops at max_iterations, and a loose one within a few
    batches (the first, unless a stall of the loaded machine widens its interval)."""
    jobs = ("bcast 0 0 0 8 20 10 precision=0.000001 max_iterations=300 max_seconds=60\n"
            "bcast 0 0 0 8 20 10 precision=1 max_iterations=300 max_seconds=60\n")
    run = run_kernel(2, jobs)
    assert run.returncode == 0, run.stderr
    tight, loose = run.records
    assert tight["iterations"] == 300 and tight["precision"] > 0.000001
    assert 20 <= loose["iterations"] <= 100 and loose["precision"] <= 1


def test_time_cap_stops_a_point(run_kernel: RunKernel) -> None:
    run = run_kernel(2, "bcast 0 0 0 1048576 20 2 precision=0.000001 max_iterations=1000000 "
                        "max_seconds=0.2\n")
    assert run.returncode == 0, run.stderr
    rec = run.records[0]
    assert rec["status"] == "ok"
    assert 20 <= rec["iterations"] < 1000000


@pytest.mark.parametrize(("line", "message"), [
    ("bcast 0 0 0 8 10 1 precision=0\n", "precision must be a number in (0, 1], got '0'"),
    ("bcast 0 0 0 8 10 1 precision=1.5\n", "precision must be a number in (0, 1]"),
    ("bcast 0 0 0 8 10 1 precision=0.1 max_iterations=5\n",
     "max_iterations (5) is below iterations (10), the minimum"),
    ("bcast 0 0 0 8 10 1 max_seconds=3\n", "max_iterations= and max_seconds= need precision="),
    ("bcast 0 0 0 8 10 1 precision=0.1 max_seconds=4000\n",
     "max_seconds must be a number in (0, 3600], got '4000'"),
    ("latency 0 0 0 8 10 1 precision=0.1\n", "precision= is for blocking collectives only"),
])
def test_bad_precision_options_refuse_the_job_file(run_kernel: RunKernel, line: str,
                                                   message: str) -> None:
    run = run_kernel(2, line)
    assert run.returncode == 2
    assert ":1: " in run.stderr and message in run.stderr
