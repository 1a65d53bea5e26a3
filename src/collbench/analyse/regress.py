"""`collbench regress OLD NEW`: the points that became slower, the way CI gates work.

Points of the two folders are matched on what was measured (collective, algorithm,
segsize, fanout, nprocs, nodes, ppn, mapping, binding, size): the MPI, the MCA/environment
context and the machine may differ, that is what a regression check compares. Each side
must hold one MPI and one context per point (collbench.points.narrow), or the match would
pool two experiments.

Per matched point: the median over ok repetitions of the figure on each side, the ratio
NEW / OLD (Hodges-Lehmann estimate with its Moses interval on log times, as `compare`)
and the exact Mann-Whitney p-value of the point. A point is a regression when it is at
least `threshold` slower (ratio of medians >= 1 + threshold) and, where both sides have
two or more repetitions, significantly so (p < 1 - confidence and the interval's low end
above 1). The p-values are not corrected over the points, as pyperf's compare_to does
not: a gate must not lose its power as a campaign grows (with Holm over 100 points, 5
repetitions a side could never show a 2x slowdown), and the threshold is what keeps
noise out. With fewer repetitions a point cannot be tested: it is judged by the
threshold alone and named "untested".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from collbench import points
from collbench.analyse.compare import algorithm_label, block_title
from collbench.analyse.stats import log_ratio_ci, mann_whitney, median
from collbench.errors import UserError
from collbench.store import Store

# Without the component too: a baseline of format 1-2 (component unknown) still matches.
MATCH: Final = tuple(f for f in points.IDENTITY if f not in ("mpi", "context", "component"))
VERDICTS: Final = ("regression", "regression (untested)", "slower, not significant",
                   "same", "faster")


@dataclass(frozen=True)
class PointChange:
    block: str  # 'bcast np=4 map-by=core'
    algorithm: str  # label with segsize/fanout
    size_bytes: int
    old_n: int
    new_n: int
    old: float  # median over ok repetitions
    new: float
    ratio: float  # new / old medians
    ratio_low: float | None  # Moses interval of the Hodges-Lehmann ratio
    ratio_high: float | None
    p_value: float | None  # exact Mann-Whitney, two-sided; None: untested
    verdict: str


@dataclass(frozen=True)
class Regressions:
    figure: str
    threshold: float
    confidence: float
    changes: tuple[PointChange, ...]
    only_old: int
    only_new: int

    @property
    def regressions(self) -> tuple[PointChange, ...]:
        return tuple(c for c in self.changes if c.verdict.startswith("regression"))

    def to_json(self) -> dict[str, Any]:
        return {"figure": self.figure, "value": f"median_{self.figure}",
                "threshold": self.threshold, "confidence": self.confidence,
                "only_old": self.only_old, "only_new": self.only_new,
                "regressions": len(self.regressions),
                "changes": [asdict(c) for c in self.changes]}


def _points(store: Store, rows: list[dict[str, Any]], figure: str
            ) -> dict[tuple[Any, ...], tuple[float, ...]]:
    points.narrow([r for r in rows if r["status"] == "ok"], MATCH, str(store.root),
                  "collbench regress")
    return {p.key: p.values for p in points.pool(rows, figure, MATCH, positive=True)
            if p.values}


def regress(old: Store, new: Store, stat: str = "avg", threshold: float = 0.05,
            confidence: float = 0.95, collective: str | None = None) -> Regressions:
    if not 0 <= threshold < 100:
        raise UserError(f"collbench regress: --threshold {threshold:g} is not valid; valid: "
                        "a fraction from 0 to 100, such as 0.05 (or 5%)")
    if not 0 < confidence < 1:
        raise UserError(f"collbench regress: --confidence {confidence:g} is not valid; "
                        "valid: a number between 0 and 1, such as 0.95")
    old_rows = points.read(old, collective=collective)  # each folder read once
    new_rows = points.read(new, collective=collective)
    figure = points.figure_of(stat, old_rows, "collbench regress")
    a, b = _points(old, old_rows, figure), _points(new, new_rows, figure)
    common = [k for k in a if k in b]
    if not common:
        raise UserError(f"collbench regress: {old.root} and {new.root} have no ok point of "
                        f"{figure} in common; valid: two folders measuring the same "
                        "collectives, algorithms, sizes and placements")
    tested = {k: mann_whitney(b[k], a[k]).p_value for k in common
              if len(a[k]) >= 2 and len(b[k]) >= 2}
    alpha = 1 - confidence
    changes = [_change(k, a[k], b[k], tested.get(k), threshold, alpha, confidence)
               for k in sorted(common, key=_order)]
    return Regressions(figure, threshold, confidence, tuple(changes),
                       len(set(a) - set(b)), len(set(b) - set(a)))


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, "" if v is None else v) for v in key)


def _change(key: tuple[Any, ...], old: Sequence[float], new: Sequence[float],
            p_value: float | None, threshold: float, alpha: float,
            confidence: float) -> PointChange:
    f = dict(zip(MATCH, key, strict=True))
    old_m, new_m = median(old), median(new)
    ratio = new_m / old_m
    ci = log_ratio_ci(new, old, confidence) if p_value is not None else None
    low, high = (ci[1].low, ci[1].high) if ci else (None, None)
    beyond = ratio >= 1 + threshold
    if p_value is None:
        verdict = "regression (untested)" if beyond else (
            "faster" if ratio <= 1 - threshold else "same")
    elif p_value < alpha and low is not None and low > 1:
        verdict = "regression" if beyond else "same"  # real but within the threshold
    elif p_value < alpha and high is not None and high < 1:
        verdict = "faster"
    else:
        verdict = "slower, not significant" if beyond else "same"
    block = block_title(f["collective"], f["nprocs"], f["nodes"], f["ppn"], f["mapping"],
                        f["binding"], None)
    return PointChange(block, algorithm_label(str(f["algorithm"]), f["segsize"], f["fanout"]),
                       f["size_bytes"], len(old), len(new), old_m, new_m, ratio, low, high,
                       p_value, verdict)


COLUMNS: Final = ("block", "algorithm", "size", "old", "new", "ratio", "ratio_ci", "p_value",
                  "n", "verdict")


def rows(r: Regressions, everything: bool = False) -> list[dict[str, Any]]:
    """Table rows: the regressions (and with `everything`, every matched point)."""
    from collbench.sizes import format_size

    shown = r.changes if everything else r.regressions
    return [{"block": c.block, "algorithm": c.algorithm, "size": format_size(c.size_bytes),
             "old": f"{c.old:.4g}", "new": f"{c.new:.4g}", "ratio": f"{c.ratio:.3f}",
             "ratio_ci": "-" if c.ratio_low is None or c.ratio_high is None else
             f"[{c.ratio_low:.3f}, {c.ratio_high:.3f}]",
             "p_value": "-" if c.p_value is None else f"{c.p_value:.3g}",
             "n": f"{c.old_n}/{c.new_n}", "verdict": c.verdict} for c in shown]


def summary(r: Regressions) -> str:
    """One line: how many points, how many regressions (tested / untested)."""
    untested = sum(c.verdict == "regression (untested)" for c in r.regressions)
    pct = f"{r.threshold * 100:g} %"
    text = (f"{len(r.regressions)} regressions of {len(r.changes)} matched points "
            f"(median_{r.figure}, NEW/OLD >= 1 + {pct}"
            f"{', significant at ' + format(r.confidence, 'g') if r.changes else ''})")
    if untested:
        text += f"; {untested} untested (fewer than 2 repetitions on a side: threshold only)"
    if r.only_old or r.only_new:
        text += f"; not matched: {r.only_old} only in OLD, {r.only_new} only in NEW"
    return text
