"""A Comparison as aligned text, CSV, JSON or Markdown (pipe tables for papers and reports)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from collbench.analyse import columns, stability
from collbench.analyse.compare import (
    METHOD,
    Best,
    Comparison,
    PointStat,
    RatioStat,
    WinRange,
    block_title,
)
from collbench.sizes import format_size
from collbench.tables import csv_table

FORMATS: Final = ("table", "csv", "json", "markdown")
FALLBACK: Final = "baseline (no significant difference)"
SHORT_COVERAGE: Final = "†"

# "value" stands for the point's named value column, e.g. median_avg_us (columns.py).
CSV_COLUMNS: Final = (
    "collective", "nprocs", "nodes", "ppn", "mapping", "binding", "params", "algorithm",
    "size_bytes", "stat", "n", "value", "ci_low", "ci_high", "ci_coverage", "baseline",
    "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_ci_coverage", "effect", "p_raw",
    "p_value", "significant", "is_best", "recommended")


def csv_columns(c: Comparison) -> list[str]:
    """CSV_COLUMNS with the value named (median_avg_us) and the variant column named."""
    rename = {"value": c.value_name, "algorithm": c.column}
    return [rename.get(col, col) for col in CSV_COLUMNS]


def render(c: Comparison, fmt: str, all_warnings: bool = False) -> str:
    if fmt == "json":
        return json.dumps(c.to_json(), indent=1) + "\n"
    if fmt == "csv":
        return csv_table(_csv_rows(c), csv_columns(c)) + "\n"
    md = fmt == "markdown"
    out = header(c, md)
    ratios = {id(r.point): r for r in c.ratios}
    best = {b.key: b for b in c.best}
    for title, pts in _blocks(c.points):
        rows = [_point_row(c, p, ratios.get(id(p))) for p in pts]
        bests = [best[k] for k in dict.fromkeys(p.size_key for p in pts)]
        ranges = [r for r in c.ranges if _range_title(r) == title]
        out += [f"## {title}" if md else f"# {title}", "",
                text_or_markdown_table(rows, _point_columns(c), md), "",
                "Best per size:" if md else "best per size:", "",
                text_or_markdown_table([_best_row(c, b) for b in bests], _best_columns(c), md),
                "",
                ("Winners: " if md else "winners: ") + format_ranges(ranges), "", ""]
    if c.warnings:
        shown, more = (list(c.warnings), None) if all_warnings else stability.brief(c.warnings)
        out.append("## Warnings\n" if md else "warnings:")
        out += [f"- {stability.line(w)}" if md else f"  {stability.line(w)}" for w in shown]
        if more:
            out.append(f"- {more}" if md else f"  {more}")
    return "\n".join(out).rstrip() + "\n"


def format_ranges(ranges: Sequence[WinRange]) -> str:
    """'1–8K binomial, 16K–1M pipeline, 2M default: baseline (no significant difference)'."""
    parts = []
    for r in ranges:
        span = format_size(r.size_from) + (
            f"–{format_size(r.size_to)}" if r.size_to != r.size_from else "")
        who = f"{r.algorithm}: {FALLBACK}" if r.fallback else r.algorithm
        parts.append(f"{span} {who}")
    return ", ".join(parts)


# --- pieces -----------------------------------------------------------------------------
def header(c: Comparison, md: bool) -> list[str]:
    pct = f"{c.confidence:.0%}" if round(c.confidence * 100, 6).is_integer() \
        else f"{c.confidence:.1%}"
    base = c.baseline_text
    lines = [
        f"{columns.describe('median', c.stat)}; up to {c.repetitions} repetitions; "
        f"baseline: {base}; confidence: {pct}",
        f"ratio = {c.value_name} / {base}'s (< 1: faster); effect: the ratio in hyperfine's "
        f"words, '1.53 ± 0.05 × faster than {base}', ± reaching both ends of the ratio CI "
        f"({METHOD['ratio_ci']}); p: {METHOD['test']}, Holm within each size; "
        f"significant = Holm p < {1 - c.confidence:.3g} and the ratio CI excludes 1"
        if c.effect == "ratio" else
        f"diff = {c.value_name} - {base}'s in percentage points (> 0: more overlap than "
        f"the baseline); diff CI: Hodges-Lehmann / Moses interval of the differences; p: "
        f"{METHOD['test']}, Holm within each size; significant = Holm p < "
        f"{1 - c.confidence:.3g} and the diff CI excludes 0",
        f"recommended: {METHOD['recommended']}",
    ]
    if _any_short_coverage(c):
        lines.append(f"{SHORT_COVERAGE} too few repetitions for a {pct} interval: shown is the "
                     "widest one they allow, with lower coverage (see ci_coverage in csv/json)")
    if c.notice:
        lines.append(f"**{c.notice}**" if md else f"NOTE: {c.notice}")
    if md:
        return ["# collbench compare", "", *[f"- {ln}" for ln in lines], ""]
    return [f"# {ln}" for ln in lines] + [""]


def _any_short_coverage(c: Comparison) -> bool:
    covs = [p.ci_coverage for p in c.points] + [r.ci_coverage for r in c.ratios]
    return any(v is not None and v < c.confidence - 1e-9 for v in covs)


def _blocks(points: Sequence[PointStat]) -> list[tuple[str, list[PointStat]]]:
    out: dict[str, list[PointStat]] = {}
    for p in points:
        out.setdefault(block_title(*p.context), []).append(p)
    return list(out.items())


def _range_title(r: WinRange) -> str:
    return block_title(r.collective, r.nprocs, r.nodes, r.ppn, r.mapping, r.binding, r.params)


def _point_columns(c: Comparison) -> list[str]:
    effect = "ratio" if c.effect == "ratio" else "diff"
    return ["size", c.column, "n", c.value_name, "CI", effect, "effect", "p", "verdict"]


def _best_columns(c: Comparison) -> list[str]:
    return ["size", "fastest", c.value_name, "effect", "p", "recommended", "note"]


def effect_of(c: Comparison, r: RatioStat | None) -> str:
    """The effect in hyperfine's words ('1.53 ± 0.05 × faster than default')."""
    if r is None:
        return "-"
    return columns.effect_text(r.ratio, r.ci_low, r.ci_high, c.baseline_text,
                               c.effect == "difference")


def _point_row(c: Comparison, p: PointStat, r: RatioStat | None) -> dict[str, Any]:
    base = p.label == c.baseline
    effect = "ratio" if c.effect == "ratio" else "diff"
    return {
        "size": format_size(p.size_bytes), c.column: p.label, "n": p.n,
        c.value_name: fmt_num(p.value),
        "CI": fmt_interval(p.ci_low, p.ci_high, p.ci_coverage, c.confidence),
        effect: ("1" if effect == "ratio" else "0") if base else fmt_num(r.ratio if r else None),
        "effect": "baseline" if base else effect_of(c, r),
        "p": fmt_p(r.p_value if r else None),
        "verdict": "baseline" if base else _verdict(r, c.effect),
    }


def _best_row(c: Comparison, b: Best) -> dict[str, Any]:
    ratio = next((r for r in c.ratios if r.point is b.winner), None)
    return {
        "size": format_size(b.key[7]), "fastest": b.winner.label,
        c.value_name: fmt_num(b.winner.value),
        "effect": "baseline" if b.winner.label == c.baseline else effect_of(c, ratio),
        "p": fmt_p(ratio.p_value if ratio else None),
        "recommended": b.recommended, "note": b.note or "-",
    }


def _verdict(r: RatioStat | None, effect: str = "ratio") -> str:
    if r is None:
        return "no baseline"
    if r.significant is None:
        return "untested"
    if not r.significant:
        return "n.s."
    if effect == "difference":
        return "more overlap" if r.ratio > 0 else "less overlap"
    return "faster" if r.ratio < 1 else "slower"


def _csv_rows(c: Comparison) -> list[dict[str, Any]]:
    ratios = {id(r.point): r for r in c.ratios}
    winners = {id(b.winner): b for b in c.best}
    recommended = {b.key: b.recommended for b in c.best}
    rows = []
    for p in c.points:
        r = ratios.get(id(p))
        rows.append({
            "collective": p.collective, "nprocs": p.nprocs, "nodes": p.nodes, "ppn": p.ppn,
            "mapping": p.mapping, "binding": p.binding, "params": p.params,
            c.column: p.label, "size_bytes": p.size_bytes, "stat": c.stat, "n": p.n,
            c.value_name: p.value, "ci_low": p.ci_low, "ci_high": p.ci_high,
            "ci_coverage": p.ci_coverage, "baseline": c.baseline_text,
            "ratio": (1.0 if c.effect == "ratio" else 0.0) if p.label == c.baseline
            else (r.ratio if r else None),
            "ratio_ci_low": r.ci_low if r else None, "ratio_ci_high": r.ci_high if r else None,
            "ratio_ci_coverage": r.ci_coverage if r else None,
            "effect": None if p.label == c.baseline else effect_of(c, r),
            "p_raw": r.p_raw if r else None, "p_value": r.p_value if r else None,
            "significant": r.significant if r else None, "is_best": id(p) in winners,
            "recommended": recommended.get(p.size_key),
        })
    return rows


def fmt_num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}" if abs(v) < 1e5 else f"{v:.4g}"


def fmt_p(v: float | None) -> str:
    return "-" if v is None else f"{v:.2g}"


def fmt_interval(low: float | None, high: float | None, coverage: float | None,
              confidence: float) -> str:
    if low is None or high is None:
        return "-"
    short = coverage is not None and coverage < confidence - 1e-9
    return f"[{fmt_num(low)}, {fmt_num(high)}]{SHORT_COVERAGE if short else ''}"


def text_or_markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], md: bool) -> str:
    cells = [[str(r.get(col, "-")) for col in columns] for r in rows]
    if md:
        lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
        return "\n".join(lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |"
                                  for row in cells])
    widths = [max([len(col)] + [len(row[i]) for row in cells]) for i, col in enumerate(columns)]
    right = [all(_numeric(row[i]) for row in cells) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if r else v.ljust(w)
                         for v, w, r in zip(values, widths, right, strict=True)).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths])] + [line(r) for r in cells])


def _numeric(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return cell == "-"
    return True
