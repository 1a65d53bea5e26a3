"""`compare --summary`: the variant to use per size range of every block, and its effect.

The per-size recommendations of a Comparison are smoothed as `tune` smooths its rules
(analyse/smoothing.py: the fewest switches whose regret stays within --max-regret), then
merged into ranges. Each range states its effect against the baseline in hyperfine's words
with the geometric mean of the ratios over its sizes and a t interval on their logs
(one size: that size's own ratio interval). Table, JSON and CSV give the same content.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from itertools import groupby
from typing import Any, Final

from collbench.analyse import columns
from collbench.analyse.compare import (
    KEY_FIELDS,
    METHOD,
    Best,
    Comparison,
    RatioStat,
    WinRange,
    block_title,
)
from collbench.analyse.grid import warnings
from collbench.analyse.render import FALLBACK, text_or_markdown_table
from collbench.analyse.smoothing import Picked, Smoothing, smooth
from collbench.analyse.stats import geomean_ci
from collbench.sizes import format_size
from collbench.tables import csv_table

CONTEXT_FIELDS: Final = KEY_FIELDS[:7]
CSV_COLUMNS: Final = (*CONTEXT_FIELDS, "size_from", "size_to", "sizes", "recommended",
                      "baseline_kept", "baseline", "geomean_ratio", "ratio_ci_low",
                      "ratio_ci_high", "effect", "n", "significant_sizes", "switches_before",
                      "switches_after", "max_regret")


@dataclass(frozen=True)
class RangeSummary:
    algorithm: str  # the recommended variant over [size_from, size_to]
    size_from: int
    size_to: int
    sizes: int  # measured sizes in the range
    baseline_kept: bool  # the baseline, kept for lack of a significantly faster variant
    ratio: float | None  # geometric mean over the sizes of variant / baseline
    ci_low: float | None
    ci_high: float | None
    effect: str  # the ratio in hyperfine's words
    n: int = 0  # fewest ok repetitions behind the recommended variant's values in the range
    significant: int = 0  # sizes of the range where it is significantly faster (Holm)


@dataclass(frozen=True)
class BlockSummary:
    context: tuple[Any, ...]  # (collective, nprocs, nodes, ppn, mapping, binding, params)
    ranges: tuple[RangeSummary, ...]
    smoothing: Smoothing | None  # None: not smoothed (one size, a difference, or bound 0)

    @property
    def title(self) -> str:
        return block_title(*self.context)


@dataclass(frozen=True)
class Summary:
    comparison: Comparison
    max_regret: float
    blocks: tuple[BlockSummary, ...]

    def to_json(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "stat": c.stat, "value": c.value_name, "column": c.column,
            "baseline": c.baseline_text, "confidence": c.confidence,
            "repetitions": c.repetitions, "notice": c.notice, "max_regret": self.max_regret,
            "method": dict(METHOD, smoothing=SMOOTHING, range_effect=EFFECT),
            "blocks": [{
                "title": b.title, "context": dict(zip(CONTEXT_FIELDS, b.context, strict=True)),
                "ranges": [asdict(r) for r in b.ranges],
                "smoothing": None if b.smoothing is None else {
                    "switches_before": b.smoothing.switches_before,
                    "switches_after": b.smoothing.switches_after,
                    "switches_removed": b.smoothing.removed,
                    "max_regret": b.smoothing.max_regret,
                    "regret": [{"size_bytes": s, "regret": r} for s, r in b.smoothing.regret]},
            } for b in self.blocks],
            "warnings": [asdict(w) for w in c.warnings],
        }

    def csv_rows(self) -> list[dict[str, Any]]:
        out = []
        for b in self.blocks:
            sm = b.smoothing
            for r in b.ranges:
                out.append({
                    **dict(zip(CONTEXT_FIELDS, b.context, strict=True)),
                    "size_from": r.size_from, "size_to": r.size_to, "sizes": r.sizes,
                    "recommended": r.algorithm, "baseline_kept": r.baseline_kept,
                    "baseline": self.comparison.baseline_text, "geomean_ratio": r.ratio,
                    "ratio_ci_low": r.ci_low, "ratio_ci_high": r.ci_high, "effect": r.effect,
                    "n": r.n, "significant_sizes": r.significant,
                    "switches_before": sm.switches_before if sm else None,
                    "switches_after": sm.switches_after if sm else None,
                    "max_regret": sm.max_regret if sm else None})
        return out


SMOOTHING: Final = ("fewest switches between neighbouring sizes whose choice is at most "
                    "max_regret slower than the per-size recommendation (as tune)")
EFFECT: Final = ("geometric mean over the range's sizes of the ratio to the baseline, with a "
                 "Student t interval on log ratios; one size: its Moses interval")


def summarise(c: Comparison, max_regret: float = 0.05) -> Summary:
    ratios = {id(r.point): r for r in c.ratios}
    by_context: dict[tuple[Any, ...], list[Best]] = {}
    for b in c.best:
        by_context.setdefault(b.key[:7], []).append(b)
    blocks = []
    for context, bests in by_context.items():
        bests.sort(key=lambda b: b.key[7])
        picked: list[Picked] = []
        for b in bests:
            point = next((p for p in c.points if p.size_key == b.key
                          and p.label == b.recommended), b.winner)
            r = ratios.get(id(point))
            picked.append((b.key[7], point, r.ratio if r else None))
        smoothing = None
        if max_regret > 0 and c.effect == "ratio" and len(bests) > 1:
            picked, smoothing = smooth(picked, bests, c, ratios, max_regret=max_regret,
                                       significance=c.repetitions >= 2)
        blocks.append(BlockSummary(context, tuple(_ranges(c, picked, bests)), smoothing))
    return Summary(c, max_regret, tuple(blocks))


def _ranges(c: Comparison, picked: Sequence[Picked],
            bests: Sequence[Best]) -> list[RangeSummary]:
    ratios = {id(r.point): r for r in c.ratios}
    fallback = {b.key[7] for b in bests if b.note == "no significant difference"}
    out = []
    for label, run_ in groupby(picked, key=lambda x: x[1].label):
        run = list(run_)
        sizes = [size for size, _, _ in run]
        found = [r for _, p, _ in run if (r := ratios.get(id(p))) is not None]
        kept = label == c.baseline and any(s in fallback for s in sizes)
        ratio = low = high = None
        if label == c.baseline:
            effect = FALLBACK if kept else "baseline"
        elif not found:
            effect = "no baseline measured"
        elif len(found) == 1:
            (r,) = found
            ratio, low, high = r.ratio, r.ci_low, r.ci_high
            effect = columns.effect_text(ratio, low, high, c.baseline_text,
                                         c.effect == "difference")
        elif c.effect == "difference":  # no geometric mean of percentage points
            effect = _per_size(c, found)
        else:
            ratio, ci = geomean_ci([r.ratio for r in found], c.confidence)
            low, high = (ci.low, ci.high) if ci else (None, None)
            effect = _range_effect(c, found, ratio, low, high)
        out.append(RangeSummary(label, sizes[0], sizes[-1], len(sizes), kept, ratio, low,
                                high, effect, min(p.n for _, p, _ in run),
                                sum(1 for r in found if r.significant)))
    return out


def _range_effect(c: Comparison, found: Sequence[RatioStat], ratio: float,
                  low: float | None, high: float | None) -> str:
    """The geometric mean with its interval when that interval says something; when it
    reaches across 1 (few sizes, ratios far apart: a t interval on 2 sizes is 12.7 standard
    errors wide) it is no evidence either way, and the per-size ratios are given instead."""
    if low is not None and high is not None and (high < 1 or low > 1):
        return (columns.effect_text(ratio, low, high, c.baseline_text)
                + f" (geometric mean of {len(found)} sizes)")
    return _per_size(c, found)


def _per_size(c: Comparison, found: Sequence[RatioStat]) -> str:
    """'2.00–100.05 × faster than default at its 2 sizes' (each size's own ratio)."""
    each = sorted(r.ratio for r in found)
    diff = c.effect == "difference"
    ends = [columns.effect_text(v, None, None, c.baseline_text, diff) for v in each[::-1]]
    first, last = (ends[0].split(" ", 1), ends[-1].split(" ", 1)) if not diff else ([], [])
    if len(first) == 2 and len(last) == 2 and first[1] == last[1]:  # the same direction
        return f"{first[0]}–{last[0]} {first[1]} at its {len(found)} sizes"
    return f"from {ends[-1]} to {ends[0]} at its {len(found)} sizes"


def recommended(c: Comparison, max_regret: float = 0.05) -> Comparison:
    """The comparison with its ranges replaced by recommended_ranges (for the report)."""
    return replace(c, ranges=recommended_ranges(c, max_regret))


def recommended_ranges(c: Comparison, max_regret: float = 0.05) -> tuple[WinRange, ...]:
    """The recommendation of `compare --summary` as win ranges: what the report shows, so
    that the report, `compare --summary` and `tune` (which smooths with the same
    analyse/smoothing.py) name the same variant for the same folder."""
    out = []
    for b in summarise(c, max_regret).blocks:
        coll, nprocs, nodes, ppn, mapping, binding, params = b.context
        out += [WinRange(coll, nprocs, mapping, params, r.algorithm, r.size_from, r.size_to,
                         nodes, ppn, binding, r.baseline_kept) for r in b.ranges]
    return tuple(out)


def render_summary(s: Summary, fmt: str, all_warnings: bool = False) -> str:
    if fmt == "json":
        return json.dumps(s.to_json(), indent=1) + "\n"
    if fmt == "csv":
        return csv_table(s.csv_rows(), CSV_COLUMNS) + "\n"
    c = s.comparison
    md = fmt == "markdown"
    smoothed = (f"smoothed as tune smooths (at most {s.max_regret:.1%} slower per size to "
                "switch less; --max-regret 0: off)" if s.max_regret > 0 else "not smoothed")
    legend = [f"{c.value_name} (median over up to {c.repetitions} repetitions) against "
              f"{c.baseline_text}, {c.confidence:.0%} confidence; recommended as `collbench "
              f"compare` recommends per size, {smoothed}", TABLE_LEGEND]
    if c.notice:
        legend.append(f"NOTE: {c.notice}")
    lines = ([f"- {x}" for x in legend] if md else [f"# {x}" for x in legend])
    for b in s.blocks:
        rows = [{"sizes": _span(r.size_from, r.size_to), "recommended": r.algorithm,
                 f"effect against {c.baseline_text}": "-" if r.effect == "baseline"
                 else r.effect, "n": r.n,
                 "significant": "-" if r.algorithm == c.baseline
                 else f"{r.significant}/{r.sizes}"} for r in b.ranges]
        lines += ["", f"## {b.title}" if md else f"# {b.title}", "",
                  text_or_markdown_table(rows, list(rows[0]), md)]
        sm = b.smoothing
        if sm is not None and (sm.removed or sm.regret):
            worst = max((r for _, r in sm.regret), default=0.0)
            lines.append(("- " if md else "") + f"smoothing: {sm.switches_before} -> "
                         f"{sm.switches_after} switches, at most {worst:.1%} slower than the "
                         f"per-size choice at {len(sm.regret)} sizes")
    found = warnings(c, all_warnings)
    if found:
        lines += ["", *found]
    return "\n".join(lines).rstrip() + "\n"


TABLE_LEGEND: Final = ("n: fewest repetitions behind a range; significant: its sizes where "
                       "the recommended variant is significantly faster (Holm), of all")


def _span(a: int, b: int) -> str:
    return format_size(a) + (f"–{format_size(b)}" if b != a else "")
