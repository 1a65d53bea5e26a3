"""Completion timing under real Open MPI: clock synchronisation, synchronised starts, and
how the completion time relates to OSU's average (docs/statistics.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from collbench.cli import main
from collbench.store import Store
from tests.conftest import RunKernel
from tests.simgrid_support import (
    needs_smpi,
    sim_env,
    small_platform,
    smpi_cache,
    smpi_kernel,
    smpi_tools,
)

__all__ = ["sim_env", "smpi_cache", "smpi_kernel", "smpi_tools"]  # fixtures, used by name

pytestmark = pytest.mark.mpi

COMPLETION_KEYS = ["completion_us", "completion_ci", "completion_late", "synced_avg_us",
                   "sync_error_us"]
# Open MPI coll/tuned's linear broadcast: the root sends to every rank in turn.
LINEAR_BCAST = (("coll_tuned_use_dynamic_rules", "1"), ("coll_tuned_bcast_algorithm", "1"))
SKEW_US = 1_000_000  # rank r's clock is r seconds ahead before synchronisation
SIM_SPEC = """\
[campaign]
name = "exact"
[measure]
collectives = ["bcast", "allreduce"]
algorithms = "default"
sizes = [8, 65536]
nprocs = 4
{extra}
[run]
backend = "simgrid"
seed = 1
timeout = 300
"""


def check_completion(rec: dict[str, Any]) -> None:
    assert rec["status"] == "ok", rec
    assert list(rec)[-len(COMPLETION_KEYS):] == COMPLETION_KEYS
    low, high = rec["completion_ci"]
    assert 0 <= low <= rec["completion_us"] <= high
    assert 0 <= rec["completion_late"] <= rec["iterations"]
    assert math.isfinite(rec["sync_error_us"]) and rec["sync_error_us"] >= 0


@pytest.mark.parametrize(("nprocs", "bound_us"), [(2, 100.0), (3, 1000.0), (4, 1000.0)])
def test_clock_sync_recovers_a_known_skew(run_kernel: RunKernel, nprocs: int,
                                          bound_us: float) -> None:
    """With every rank's clock shifted by whole seconds, the synchronised loop still measures
    microseconds: the offsets were found, to within the reported (and bounded) error."""
    run = run_kernel(nprocs, "bcast 0 0 0 1024 200 20 timing=completion\n",
                     "--clock-skew-us", str(SKEW_US))
    assert run.returncode == 0, run.stderr
    rec = run.records[0]
    check_completion(rec)
    assert rec["sync_error_us"] < bound_us
    # An unsynchronised clock would put completion near (P - 1) seconds, or below zero.
    assert rec["completion_us"] < SKEW_US / 10
    assert rec["synced_avg_us"] < SKEW_US / 10


def test_completion_is_not_below_the_average_of_a_linear_bcast(run_kernel: RunKernel) -> None:
    """A linear bcast at 4 ranks: the root returns after its sends while the last receiver
    finishes last. Every rank waits for the common start, so per iteration the last exit
    minus the start is at least every rank's own call time: the completion median is at
    least the rank-averaged one, on any machine, oversubscribed or not."""
    jobs = "bcast 1 0 0 65536 100 10 timing=completion\nbcast 1 0 0 8 200 20 timing=completion\n"
    run = run_kernel(4, jobs, mca=LINEAR_BCAST)
    assert run.returncode == 0, run.stderr
    for rec in run.records:
        check_completion(rec)
        assert rec["completion_us"] >= rec["synced_avg_us"] > 0
        # OSU's own figures are still there, and still ordered as OSU orders them
        assert rec["min_us"] <= rec["avg_us"] <= rec["max_us"]


def test_osu_timing_keeps_the_key_list(run_kernel: RunKernel) -> None:
    run = run_kernel(2, "allreduce 0 0 0 8 20 2 timing=osu\nallreduce 0 0 0 8 20 2\n")
    assert run.returncode == 0, run.stderr
    assert list(run.records[0]) == list(run.records[1])
    assert not set(COMPLETION_KEYS) & set(run.records[0])


@pytest.mark.parametrize(("line", "message"), [
    ("bcast 0 0 0 8 10 1 timing=fast\n", "timing must be osu or completion, got 'fast'"),
    ("latency 0 0 0 8 10 1 timing=completion\n", "for blocking collectives only, not latency"),
    ("ibcast 0 0 0 8 10 1 timing=completion\n", "for blocking collectives only, not ibcast"),
    ("bcast 0 0 0 8 10 1 timing=osu timing=osu\n", "option timing given twice"),
])
def test_bad_timing_option_refuses_the_job_file(run_kernel: RunKernel, line: str,
                                                message: str) -> None:
    run = run_kernel(2, line)
    assert run.returncode == 2
    assert ":1: " in run.stderr and message in run.stderr
    assert run.records == []


def test_bad_clock_skew_is_one_line(run_kernel: RunKernel) -> None:
    run = run_kernel(2, "bcast 0 0 0 8 10 1\n", "--clock-skew-us", "-5")
    assert run.returncode == 2
    assert "--clock-skew-us: not an integer in [0, 10000000]: '-5'" in run.stderr


@needs_smpi
@pytest.mark.slow
def test_simulation_is_exact_one_clock_and_one_batch(tmp_path: Path, sim_env: Path) -> None:
    """Under SimGrid every rank reads one clock (sync error 0), the first batch already has an
    interval of zero width (to the doubles' last digits), and neither mode changes OSU's
    figures: the precision-driven launch gives the fixed-count launch's avg_us to the last
    digit."""
    spec = tmp_path / "spec.toml"
    base = SIM_SPEC.format(extra="iterations = 50")
    spec.write_text(base)
    assert main(["run", str(spec), "-o", str(tmp_path / "fixed"), "--platform",
                 str(small_platform(tmp_path))]) == 0
    spec.write_text(SIM_SPEC.format(extra='timing = "completion"\nprecision = 0.01'))
    assert main(["run", str(spec), "-o", str(tmp_path / "exact"), "--platform",
                 str(small_platform(tmp_path))]) == 0

    def rows(name: str) -> dict[tuple[str, int], tuple[int, float, dict[str, Any]]]:
        got = Store(tmp_path / name).connect().execute(
            "SELECT collective, size_bytes, iterations, avg_us, metrics FROM measurements "
            "WHERE status = 'ok'").fetchall()
        return {(c, s): (it, avg, json.loads(m)) for c, s, it, avg, m in got}

    fixed, exact = rows("fixed"), rows("exact")
    assert set(fixed) == set(exact) and len(exact) == 4
    for key, (iterations, avg, metrics) in exact.items():
        assert iterations == 20  # min_iterations: the first batch was exact
        # exact up to the doubles of the simulated clock (differences of absolute times
        # round at ~1e-15 relative with one warm-up, the simulated default)
        assert metrics["precision"] <= 1e-12 and metrics["sync_error_us"] == 0
        assert metrics["completion_late"] == 0
        assert metrics["completion_ci"] == pytest.approx([metrics["completion_us"]] * 2,
                                                         rel=1e-12)
        assert metrics["completion_us"] >= metrics["synced_avg_us"]
        assert avg == pytest.approx(fixed[key][1], rel=1e-9)
