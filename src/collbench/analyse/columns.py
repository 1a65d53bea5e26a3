"""One name, one meaning: every figure and statistic collbench prints, defined once.

A *figure* is what one launch measured for one point (a stored row column such as
`avg_us`, or a key of the row's `metrics`). A *statistic* pools a figure over the
repetitions of a point (separate launches). An aggregated column is always named
`<statistic>_<figure>`, e.g. `median_avg_us`: the header says both what was measured and
how it was pooled, so `show`, `compare`, the report and the docs never print one name with
two meanings. Effects against a baseline are stated in hyperfine's words, by `effect_text`.
docs/statistics.md holds the same definitions as a table (a test keeps them in step).
"""

from __future__ import annotations

from typing import Final

# Figures of one launch (stored row columns and metrics keys): name -> meaning.
FIGURES: Final[dict[str, str]] = {
    "avg_us": "OSU's average latency of one launch: each rank's mean over the timed "
              "iterations, averaged over ranks",
    "min_us": "the fastest rank's mean over the timed iterations of one launch",
    "max_us": "the slowest rank's mean over the timed iterations of one launch",
    "median_us": "the median over the timed iterations of one launch of the iteration time "
                 "averaged over ranks; another population than min_us/max_us (per-rank "
                 "means), so it can lie below min_us when a few slow iterations lift every "
                 "rank's mean",
    "completion_us": "completion time of one launch: per iteration, the last rank's exit "
                     "minus the synchronised common start (timing = \"completion\")",
    "completion_ci": "the 95 % interval [low, high] of completion_us (order statistics "
                     "around the median iteration)",
    "completion_late": "iterations of one launch in which a rank entered after the common "
                       "start (their completion includes the lateness)",
    "synced_avg_us": "median over iterations of the rank-averaged own call time in the "
                     "synchronised loop (OSU's figure without the barrier's skew)",
    "sync_error_us": "the measured error of the clock synchronisation of one launch",
    "precision": "precision-driven iterations: the relative half-width of the 95 % CI of "
                 "the median reached for the point (measure.precision)",
    "overall_us": "non-blocking: OSU's Overall, post + compute + wait per iteration, "
                  "averaged over ranks",
    "pure_us": "non-blocking: OSU's Pure Comm., the collective timed alone, averaged over "
               "ranks",
    "overlap_pct": "non-blocking: OSU's Overlap(%); higher is better",
    "bandwidth_mbs": "point-to-point bandwidth of one launch (MB/s, 10^6 bytes)",
}

# How a figure is pooled over the ok repetitions of a point: name -> meaning.
STATISTICS: Final[dict[str, str]] = {
    "median": "median over the ok repetitions (launches)",
    "min": "lowest over the ok repetitions",
    "max": "highest over the ok repetitions",
}

# `--stat NAME` -> the figure it compares: collbench.points.STATS, the one table.

# Columns of comparisons and summaries: name -> meaning.
COMPARISON: Final[dict[str, str]] = {
    "n": "ok repetitions of the point",
    "ci_low/ci_high": "distribution-free confidence interval of the median over repetitions",
    "ci_coverage": "the coverage that interval attains (below the nominal level when the "
                   "repetitions are too few)",
    "ratio": "median of the point / median of the baseline at the same size and context "
             "(< 1: faster than the baseline)",
    "ratio_ci_low/ratio_ci_high": "Hodges-Lehmann / Moses interval of the ratio",
    "effect": "the ratio in words: '1.53 ± 0.05 × faster than default' (± reaches both ends "
              "of the interval)",
    "p_raw": "exact two-sided Mann-Whitney p-value",
    "p_value": "p_raw after Holm's correction among the variants at one size",
    "significant": "p_value < 1 - confidence and the ratio interval excludes 1",
    "geomean_ratio": "geometric mean of the ratios over the sizes of a range, with a "
                     "Student t interval on log ratios",
    "regret": "how much slower the smoothed choice is than the unsmoothed one at a size",
}


def point_column(statistic: str, figure: str) -> str:
    """'median_avg_us': the figure pooled with the statistic over repetitions."""
    return f"{statistic}_{figure}"


def describe(statistic: str, figure: str) -> str:
    """One line for a header: what the aggregated column holds."""
    meaning = FIGURES.get(figure, f"the {figure} figure of one launch")
    return f"{point_column(statistic, figure)} = {STATISTICS[statistic]} of {figure} ({meaning})"


def effect_text(ratio: float | None, low: float | None, high: float | None,
                baseline: str, difference: bool = False) -> str:
    """hyperfine's wording of an effect against the baseline.

    A ratio (time / baseline time) reads '1.53 ± 0.05 × faster than default' (or slower);
    ± is the larger distance from the factor to either end of its confidence interval, so
    the whole interval lies within it. An interval wider than ± WIDE of the factor is
    given by its ends instead: '1.38 × faster than default (interval: from 5.21 × slower
    to 6.73 × faster)'. A difference (overlap, percentage points) reads
    '+12.0 ± 3.0 points more than default'.
    """
    if ratio is None:
        return "-"
    if difference:
        pm = (f" ± {max(ratio - low, high - ratio):.1f}" if low is not None and high is not None
              else "")
        word = "more" if ratio >= 0 else "less"
        return f"{abs(ratio):.1f}{pm} points {word} than {baseline}"
    if ratio <= 0:
        return "-"
    faster = ratio <= 1
    factor = 1 / ratio if faster else ratio
    pm = ""
    if low is not None and high is not None and low > 0 and high > 0:
        ends = (1 / high, 1 / low) if faster else (low, high)
        half = max(factor - ends[0], ends[1] - factor, 0.0)
        if half > WIDE * factor:  # ± would mislead on so wide (log-scale) an interval
            return (f"{_factor(ratio)} than {baseline} (interval: from {_factor(high)} to "
                    f"{_factor(low)})")
        pm = f" ± {half:.2f}"
    if factor < 1.005 and not pm:
        return f"as fast as {baseline}"
    return f"{factor:.2f}{pm} × {'faster' if faster else 'slower'} than {baseline}"


# Beyond this half-width (a fraction of the factor) an interval is given by its ends.
WIDE: Final = 0.25


def _factor(ratio: float) -> str:
    """'2.00 × faster' (ratio 0.5) or '1.50 × slower' (ratio 1.5)."""
    return f"{1 / ratio:.2f} × faster" if ratio <= 1 else f"{ratio:.2f} × slower"
