"""Precision-driven repetitions: a repetition measures only until its median is known.

The kernel's precision mode ([measure] precision, docs/statistics.md) runs a point in
batches — the first of `first` timed iterations, then growing the total towards the count
the half-width predicts (`next_total`) — until the 95 %
interval of the median of the per-iteration times is within ±target of it, or a cap is
reached. Adaptive tuning uses it two ways:
- live: each launch's points run in precision mode, capped at the spec's own iteration
  count, so a repetition never costs more than the exhaustive sweep's (live.py);
- replay: a recorded repetition with per-iteration samples (`samples = true`) is served as
  the prefix of its samples that the kernel would have stopped at — the same rule, applied
  here to the same numbers (`stop`), so the replay sees what a precision run would have
  reported: the mean (OSU's avg) or median of that prefix, and pays only its iterations.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collbench.analyse.stats import median
from collbench.errors import UserError
from collbench.points import metrics_of

# Statistics a prefix of rank-averaged per-iteration samples determines exactly: OSU's avg
# is the mean over ranks of each rank's mean, i.e. the mean of the rank-averaged samples.
# min_us/max_us (extremes of per-rank means) and completion time are not in the samples.
PREFIX_COLUMNS = ("avg_us", "median_us")
PRECISION_RANGE = (1e-4, 1.0)
FIRST_RANGE = (1, 100_000)
# The kernel's precision-mode figures of a full repetition that a prefix does not keep.
_STALE_METRICS = ("completion_us", "completion_ci", "completion_late", "synced_avg_us",
                  "sync_error_us")


@dataclass(frozen=True)
class Precision:
    target: float  # relative half-width of the median's 95 % interval, e.g. 0.05
    first: int = 20  # the first batch of timed iterations (the spec's min_iterations)

    def __post_init__(self) -> None:
        lo, hi = PRECISION_RANGE
        if not lo <= self.target <= hi:  # also refuses nan
            raise UserError(f"--precision {self.target}: out of range; valid: {lo} to {hi} "
                            "(a relative half-width, e.g. 0.05)")
        if not FIRST_RANGE[0] <= self.first <= FIRST_RANGE[1]:
            raise UserError(f"--precision-first {self.first}: out of range; valid: "
                            f"{FIRST_RANGE[0]} to {FIRST_RANGE[1]}")


def relative_halfwidth(samples: Sequence[float]) -> float:
    """Half the width of the 95 % interval of the median, over the median, as the kernel
    computes it (clocksync.c cs_median_ci): the order statistics n/2 -+ 0.98 sqrt(n)
    (and + 1 above), the whole range below 6 samples."""
    s = sorted(samples)
    n = len(s)
    if n == 0:
        return math.inf
    if n < 6:
        lo, hi = s[0], s[-1]
    else:
        h = 0.98 * math.sqrt(n)
        j, k = math.floor(0.5 * n - h), math.ceil(0.5 * n + 1.0 + h)
        lo, hi = s[max(j, 1) - 1], s[min(k, n) - 1]
    m = median(s)
    return 0.5 * (hi - lo) / m if m > 0 else math.inf


GROWTH = (1.25, 2.0)  # the least and most a batch multiplies the total by


def next_total(n: int, reached: float, target: float) -> int:
    """The kernel's count after a batch ended at n iterations short of the target
    (collbench_kernel.c precise_next_total, the same float arithmetic): the n at which a
    half-width shrinking as 1/sqrt(n) would meet it, between 1.25 n and 2 n."""
    grow = reached / target
    grow *= grow
    if not grow <= GROWTH[1]:  # also inf and nan
        grow = GROWTH[1]
    grow = max(grow, GROWTH[0])
    return math.ceil(float(n) * grow)


def stop(samples: Sequence[float], precision: Precision) -> int:
    """How many of `samples` the kernel's precision mode would have timed: a first batch
    of `first`, then totals by `next_total`, until the target is met or the samples run
    out (the recorded count is the cap, as max_iterations is live)."""
    cap = len(samples)
    n = min(precision.first, cap)
    while n < cap:
        reached = relative_halfwidth(samples[:n])
        if reached <= precision.target:
            break
        n = min(next_total(n, reached, precision.target), cap)
    return n


def prefix_row(row: Mapping[str, Any], samples: Sequence[float],
               precision: Precision) -> dict[str, Any]:
    """The row a precision run would have stored for this recorded repetition."""
    n = stop(samples, precision)
    head = samples[:n]
    avg = sum(head) / n
    out = dict(row)
    out.update(iterations=n, avg_us=avg, median_us=median(head), min_us=None, max_us=None)
    if row.get("bandwidth_mbs") and row.get("avg_us"):
        out["bandwidth_mbs"] = float(row["bandwidth_mbs"]) * float(row["avg_us"]) / avg
    metrics = metrics_of(row.get("metrics"))
    for key in _STALE_METRICS:
        metrics.pop(key, None)
    reached = relative_halfwidth(head)
    metrics["precision"] = reached if math.isfinite(reached) else None
    out["metrics"] = json.dumps(metrics, sort_keys=True)
    return out
