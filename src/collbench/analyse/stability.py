"""Stability warnings in the manner of pyperf: what looks unreliable, and what to do.

Checks work on the rows of each point (every status), so they need no database; the
same problem at several sizes of one algorithm is reported once, listing the sizes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from collbench.analyse.stats import cv, mad, median, min_p_value
from collbench.sizes import format_size

CV_MAX = 0.10  # pyperf's threshold: standard deviation above 10 % of the mean
RANK_SPREAD_MAX = 3.0  # (max - min over ranks) / avg; rooted collectives reach ~2 normally
OUTLIER_MADS = 3.0  # a repetition above median + 3 scaled MADs ...
OUTLIER_FACTOR = 2.0  # ... or above twice the median
MIN_ITERATIONS = 10
MIN_TIMED_US = 1000.0  # 1 ms of timed work per repetition: below, a single interrupt shows
MIN_REPETITIONS = 3
MAD_TO_SIGMA = 1.4826
BAD_STATUSES = ("failed", "timeout", "invalid")
MAX_NAMED = 8  # named failed points before "and N more"


@dataclass(frozen=True)
class StabilityWarning:
    where: str
    problem: str
    advice: str


@dataclass(frozen=True)
class Observed:
    """One point's rows, every status, as the checks need them."""

    block: str  # "bcast np=4 map-by=core bind-to=core"
    label: str  # algorithm label
    size_bytes: int
    nprocs: int
    nodes: int | None
    ppn: int | None
    values: tuple[float, ...]  # the compared statistic of each ok repetition
    rows: tuple[Mapping[str, Any], ...]  # every row of the point (status, iterations, ...)


def check(observed: Sequence[Observed], stat_column: str, confidence: float,
          cores: int | None) -> list[StabilityWarning]:
    out: list[StabilityWarning] = []
    out += _few_repetitions(observed, confidence)
    out += _bad_points(observed)
    out += _oversubscribed(observed, cores)
    # kind -> block -> label -> [(size, figure)]: one warning per kind and block.
    found: dict[str, dict[str, dict[str, list[tuple[int, float]]]]] = {}
    for ob in observed:
        for fn in (_spread, _rank_spread, _outliers, _few_iterations, _short):
            hit = fn(ob, stat_column)
            if hit is not None:
                kind, figure = hit
                by_label = found.setdefault(kind, {}).setdefault(ob.block, {})
                by_label.setdefault(ob.label, []).append((ob.size_bytes, figure))
    for kind, blocks in found.items():
        problem, advice, worst_of = _MESSAGES[kind]
        for block, labels in blocks.items():
            worst = worst_of(f for hits in labels.values() for _, f in hits)
            where = "; ".join(f"{label} at {_sizes([s for s, _ in hits])}"
                              for label, hits in sorted(labels.items()))
            out.append(StabilityWarning(f"{block}: {where}",
                                        problem.format(worst=worst, stat=stat_column), advice))
    return out


_MESSAGES: dict[str, tuple[str, str, Callable[[Iterable[float]], float]]] = {
    "spread": ("the {stat} of repetitions varies: standard deviation up to {worst:.0%} of "
               "the mean (> 10%)",
               "rerun with more repetitions; check for other jobs on the node and pin ranks "
               "(--bind-to core)", max),
    "ranks": ("ranks disagree: (max - min over ranks) reaches {worst:.1f}x the average",
              "check binding and oversubscription: a rank that is descheduled or shares a "
              "core keeps the others waiting", max),
    "outlier": ("a repetition lies far above the median (up to {worst:.1f}x the median)",
                "rerun with more repetitions; check for other jobs on the node", max),
    "few_iterations": ("only {worst:.0f} timed iterations per repetition (< 10)",
                       "increase measure.iterations", min),
    "short": ("too little timed work: as little as {worst:.0f} us per repetition "
              "(iterations x avg_us < 1 ms), so timer resolution and single interrupts show",
              "increase measure.iterations", min),
}


def _spread(ob: Observed, _: str) -> tuple[str, float] | None:
    c = cv(ob.values)
    return ("spread", c) if c is not None and c > CV_MAX else None


def _rank_spread(ob: Observed, _: str) -> tuple[str, float] | None:
    spreads = [(float(r["max_us"]) - float(r["min_us"])) / float(r["avg_us"])
               for r in _ok(ob) if _positive(r, "avg_us") and _known(r, "max_us", "min_us")]
    if not spreads:
        return None
    typical = median(spreads)  # one bad repetition is the outlier check's business
    return ("ranks", typical) if typical > RANK_SPREAD_MAX else None


def _outliers(ob: Observed, _: str) -> tuple[str, float] | None:
    if len(ob.values) < 3:  # with two values, neither is "far from the median"
        return None
    med = median(ob.values)
    if med <= 0:
        return None
    limit = med + max(OUTLIER_MADS * MAD_TO_SIGMA * mad(ob.values), 0.1 * med)
    far = [v for v in ob.values if v > min(limit, OUTLIER_FACTOR * med)]
    return ("outlier", max(far) / med) if far else None


def _few_iterations(ob: Observed, _: str) -> tuple[str, float] | None:
    iters = [int(r["iterations"]) for r in _ok(ob) if r.get("iterations") is not None]
    return ("few_iterations", float(min(iters))) if iters and min(iters) < MIN_ITERATIONS \
        else None


def _short(ob: Observed, _: str) -> tuple[str, float] | None:
    totals = [int(r["iterations"]) * float(r["avg_us"]) for r in _ok(ob)
              if _known(r, "iterations", "avg_us")]
    return ("short", min(totals)) if totals and min(totals) < MIN_TIMED_US else None


def repetitions_needed(observed: Sequence[Observed], confidence: float) -> int:
    """Repetitions per point for a difference to be able to reach significance.

    Holm over the k algorithms compared with the baseline at one size: the smallest exact
    Mann-Whitney p-value, 2 / C(2n, n), must beat (1 - confidence) / k. At least 3.
    """
    family, alpha = _family(observed), 1 - confidence
    return max(MIN_REPETITIONS,
               next(k for k in range(2, 10_000) if family * min_p_value(k, k) < alpha))


def _family(observed: Sequence[Observed]) -> int:
    """Most algorithms compared with the baseline at one size (the Holm family size)."""
    per_size: dict[tuple[str, int], set[str]] = {}
    for ob in observed:
        per_size.setdefault((ob.block, ob.size_bytes), set()).add(ob.label)
    return max([1] + [len(labels) - 1 for labels in per_size.values()])


def _few_repetitions(observed: Sequence[Observed],
                     confidence: float) -> list[StabilityWarning]:
    counts = [len(ob.values) for ob in observed if ob.values]
    if not counts:
        return []
    n, needed = min(counts), repetitions_needed(observed, confidence)
    if n >= needed:
        return []
    advice = f"run with run.repetitions >= {needed}"
    if n == 1:
        problem = "only 1 repetition at some points: no confidence interval or significance there"
    elif _family(observed) * min_p_value(n, n) >= 1 - confidence:
        problem = (f"only {n} repetitions at some points: too few for any difference to be "
                   f"significant at {1 - confidence:g} once corrected for the algorithms "
                   "compared per size (Holm)")
    else:
        problem = f"only {n} repetitions at some points: confidence intervals are wide"
    return [StabilityWarning("campaign", problem, advice)]


REPETITION_NOTICE: Final = ("1 repetition: no confidence intervals or significance; run with "
                            "run.repetitions >= {needed}")


def _bad_points(observed: Sequence[Observed]) -> list[StabilityWarning]:
    out = []
    for status in BAD_STATUSES:
        named = []
        for ob in observed:
            bad = [r for r in ob.rows if r.get("status") == status]
            if bad:
                reps = ",".join(sorted({str(r.get("repetition")) for r in bad}))
                named.append(f"{ob.block} {ob.label} {format_size(ob.size_bytes)} (rep {reps})")
        if not named:
            continue
        more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
        advice = {
            "failed": "see the error column (collbench show); rerun with --resume "
                      "--retry-failed",
            "timeout": "raise run.timeout or reduce the sizes; rerun with --resume "
                       "--retry-failed",
            "invalid": "the algorithm computed a wrong result: these points are excluded; "
                       "report it to the MPI developers",
        }[status]
        out.append(StabilityWarning("; ".join(named[:MAX_NAMED]) + more,
                                    f"{len(named)} point(s) {status}", advice))
    return out


def _oversubscribed(observed: Sequence[Observed], cores: int | None) -> list[StabilityWarning]:
    if not cores:
        return []
    blocks = sorted({ob.block for ob in observed if _ranks_per_node(ob) > cores})
    if not blocks:
        return []
    return [StabilityWarning(
        "; ".join(blocks), f"more ranks per node than the {cores} cores recorded in "
        "provenance.json (oversubscribed)",
        "timings of oversubscribed runs are noisy: compare algorithms with nprocs <= cores")]


def _ranks_per_node(ob: Observed) -> int:
    if ob.ppn:
        return ob.ppn
    return ob.nprocs // ob.nodes if ob.nodes else ob.nprocs


def _ok(ob: Observed) -> list[Mapping[str, Any]]:
    return [r for r in ob.rows if r.get("status") == "ok"]


def _known(r: Mapping[str, Any], *cols: str) -> bool:
    return all(r.get(c) is not None for c in cols)


def _positive(r: Mapping[str, Any], col: str) -> bool:
    return r.get(col) is not None and float(r[col]) > 0


def _sizes(sizes: Sequence[int], limit: int = 6) -> str:
    s = sorted(set(sizes))
    shown = ", ".join(format_size(x) for x in s[:limit])
    return shown + (f" and {len(s) - limit} more sizes" if len(s) > limit else "")
