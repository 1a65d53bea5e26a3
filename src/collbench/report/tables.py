"""The report's tables: HTML tables for the page, Markdown and CSV files beside it.

Pure functions of the comparison: they format, the caller decides where the text goes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from collbench.analyse import Best, Comparison, PointStat, RatioStat, WinRange
from collbench.analyse.render import (
    SHORT_COVERAGE,
    effect_of,
    fmt_interval,
    fmt_num,
    fmt_p,
    text_or_markdown_table,
)
from collbench.report import figures, html
from collbench.sizes import format_size
from collbench.tables import csv_table


# --- HTML (one block of the page) ---------------------------------------------------------
def ratio_table(comp: Comparison, labels: Sequence[str], points: Sequence[PointStat],
                ratios: Sequence[RatioStat], best: Sequence[Best]) -> html.Table:
    """Sizes down, algorithms across: the baseline's value, then each ratio to it."""
    by = _lookup(ratios)
    values = {(p.label, p.size_bytes): p for p in points}
    others = [lab for lab in labels if lab != comp.baseline]
    rows = []
    for b in sorted(best, key=lambda b: b.key[7]):
        size = b.key[7]
        base = values.get((comp.baseline, size))
        row: list[html.Cell | str] = [
            format_size(size), html.Cell(fmt_num(base.value) if base else "-", "num")]
        for lab in others:
            r = by.get((lab, size))
            css = ["num"]
            if r is not None and r.significant:
                css.append("faster" if r.ratio < 1 else "slower")
            if b.winner.label == lab:
                css.append("fastest")
            row.append(html.Cell(f"{fmt_num(r.ratio)}{_marker(r)}" if r else "-", " ".join(css)))
        row += [b.winner.label, b.recommended]
        rows.append(tuple(row))
    untested = comp.repetitions < 2
    caption = (f"Ratio = {comp.value_name} / {comp.baseline_text}'s (< 1: faster). "
               + ("Single repetition: no significance (?)." if untested else
                  "* significant (Holm-corrected exact Mann-Whitney and CI excluding 1; "
                  "blue faster, red slower), ? untested; bold: fastest."))
    return html.Table(("size", f"{comp.baseline_text} {comp.value_name}", *others, "fastest",
                       "recommended"), tuple(rows), caption)


def recommendation(comp: Comparison, ranges: Sequence[WinRange],
                   ratios: Sequence[RatioStat], best: Sequence[Best]) -> html.Table:
    """One row per win range: the algorithm to use there, and why."""
    by = _lookup(ratios)
    rows = []
    for w in ranges:
        span = [b for b in best if w.size_from <= b.key[7] <= w.size_to]
        found = [r for b in span if (r := by.get((w.algorithm, b.key[7]))) is not None]
        vals = [r.ratio for r in found]
        ratio = ("1" if w.algorithm == comp.baseline else
                 f"{fmt_num(min(vals))}–{fmt_num(max(vals))}" if len(set(vals)) > 1 else
                 fmt_num(vals[0]) if vals else "-")
        rows.append((_size_range(w), w.algorithm, ratio, _evidence(comp, w, span, found)))
    return html.Table(("sizes", "recommended", f"ratio to {comp.baseline}", "evidence"),
                      tuple(rows))


def _evidence(comp: Comparison, w: WinRange, span: Sequence[Best],
              found: Sequence[RatioStat]) -> str:
    if w.fallback:
        return f"no algorithm significantly faster than {comp.baseline}"
    if w.algorithm == comp.baseline:
        return f"{comp.baseline} is the fastest"
    sig = sum(1 for r in found if r.significant)
    if any(r.significant is None for r in found):
        return "untested (fewer than 2 repetitions): fastest measured, not significant"
    notes = sorted({b.note for b in span if b.note})
    return (f"significantly faster at {sig} of {len(span)} sizes"
            + (f"; {'; '.join(notes)}" if notes else ""))


# --- files (one block: Markdown and CSV) -----------------------------------------------------
def block_markdown(comp: Comparison, title: str, points: Sequence[PointStat],
                   ratios: Sequence[RatioStat], best: Sequence[Best],
                   ranges: Sequence[WinRange], tails: Sequence[figures.Tail]) -> str:
    """The block's long table, formatted for reading, with a legend and the winners."""
    stat = comp.value_name
    cols = ["size", "algorithm", "n", stat, "CI", "min_min_us", "max_max_us", "ratio",
            "ratio CI", "p", "sig", "best"] + (["p99_us"] if tails else [])
    rows = []
    for d in _long_rows(comp, points, ratios, best, tails):
        tag = [t for t, on in (("fastest", d["fastest"]), ("recommended", d["recommended"]))
               if on]
        base = d["algorithm"] == comp.baseline
        rows.append({
            "size": d["size"], "algorithm": d["algorithm"], "n": d["n"], stat: fmt_num(d[stat]),
            "CI": fmt_interval(d["ci_low"], d["ci_high"], d["ci_coverage"], comp.confidence),
            "min_min_us": fmt_num(d["min_min_us"]), "max_max_us": fmt_num(d["max_max_us"]),
            "ratio": "1" if base else fmt_num(d["ratio"]),
            "ratio CI": fmt_interval(d["ratio_ci_low"], d["ratio_ci_high"],
                                  d["ratio_ci_coverage"], comp.confidence),
            "p": fmt_p(d["p_value"]), "sig": "baseline" if base else
            {True: "*", False: "n.s.", None: "?"}[d["significant"]],
            "best": ", ".join(tag) or "", "p99_us": fmt_num(d["p99_us"])})
    winners = "; ".join(
        f"{_size_range(w)} {w.algorithm}" + (" (no significant difference)" if w.fallback else "")
        for w in ranges)
    pct = f"{comp.confidence:.0%}"
    return "\n".join([
        f"## {title}", "",
        f"{stat}: median over repetitions (up to {comp.repetitions}) of {comp.stat}; CI of "
        f"the median ({pct}); min_min_us/max_max_us: fastest/slowest rank over all "
        f"repetitions; ratio = {stat} / {comp.baseline_text}'s with Hodges-Lehmann CI; p: "
        "exact Mann-Whitney, Holm "
        f"per size; sig: * significant, n.s. not, ? untested; {SHORT_COVERAGE} interval "
        f"below {pct} coverage (too few repetitions).", "",
        text_or_markdown_table(rows, cols, True), "", f"Recommended: {winners}" if winners else ""])


def block_csv(comp: Comparison, points: Sequence[PointStat], ratios: Sequence[RatioStat],
              best: Sequence[Best], tails: Sequence[figures.Tail]) -> str:
    """The block's long table, unformatted numbers for further analysis."""
    # Tail columns only when samples exist, so that a campaign without them gets no
    # always-empty columns.
    cols = ["size_bytes", "algorithm", "n", comp.value_name, "ci_low", "ci_high",
            "ci_coverage", "min_min_us", "max_max_us", "ratio", "ratio_ci_low", "ratio_ci_high",
            "effect", "p_value", "significant", "fastest", "recommended",
            *(["samples", "p50_us", "p99_us"] if tails else [])]
    return csv_table(_long_rows(comp, points, ratios, best, tails), cols)


def _long_rows(comp: Comparison, points: Sequence[PointStat], ratios: Sequence[RatioStat],
               best: Sequence[Best], tails: Sequence[figures.Tail]) -> list[dict[str, Any]]:
    """One row per (size, algorithm), OSU's avg/min/max plus the comparison."""
    by = {id(r.point): r for r in ratios}
    winners = {b.key[7]: b for b in best}
    tail = {(t.label, t.size_bytes): t for t in tails}
    rows = []
    for p in sorted(points, key=lambda p: (p.size_bytes, p.label != comp.baseline, p.label)):
        r, b, t = by.get(id(p)), winners.get(p.size_bytes), tail.get((p.label, p.size_bytes))
        rows.append({
            "size_bytes": p.size_bytes, "size": format_size(p.size_bytes), "algorithm": p.label,
            "n": p.n, comp.value_name: p.value, "ci_low": p.ci_low, "ci_high": p.ci_high,
            "ci_coverage": p.ci_coverage, "min_min_us": p.min_us, "max_max_us": p.max_us,
            "ratio": 1.0 if p.label == comp.baseline else (r.ratio if r else None),
            "ratio_ci_low": r.ci_low if r else None, "ratio_ci_high": r.ci_high if r else None,
            "ratio_ci_coverage": r.ci_coverage if r else None,
            "effect": effect_of(comp, r) if r else None,
            "p_value": r.p_value if r else None, "significant": r.significant if r else None,
            "fastest": b is not None and b.winner is p,
            "recommended": b is not None and b.recommended == p.label,
            "samples": t.count if t else None, "p50_us": t.p50 if t else None,
            "p99_us": t.p99 if t else None})
    return rows


# --- files (whole campaign) -------------------------------------------------------------
def recommendations(comp: Comparison) -> tuple[str, str]:
    """Every win range of the campaign in one table (the tuning decision at a glance):
    its Markdown and CSV text."""
    rows = [{"collective": w.collective, "nprocs": w.nprocs, "nodes": w.nodes, "ppn": w.ppn,
             "mapping": w.mapping, "binding": w.binding, "params": w.params,
             "size_from": w.size_from, "size_to": w.size_to, "recommended": w.algorithm,
             "baseline_kept": w.fallback} for w in comp.ranges]
    cols = list(rows[0]) if rows else ["collective"]
    md_rows = [{k: "-" if v is None else format_size(v) if k.startswith("size_")
                and isinstance(v, int) else v for k, v in r.items()} for r in rows]
    md = (f"# Recommended algorithm per size range (baseline {comp.baseline_text}, "
          f"{comp.value_name})\n\n" + text_or_markdown_table(md_rows, cols, True))
    return md, csv_table(rows, cols)


# --- helpers ------------------------------------------------------------------------------
def _marker(r: RatioStat | None) -> str:
    """'*' significant, '' not, '?' untested."""
    if r is None:
        return ""
    return "?" if r.significant is None else "*" if r.significant else ""


def _lookup(ratios: Iterable[RatioStat]) -> dict[tuple[str, int], RatioStat]:
    return {(r.point.label, r.point.size_bytes): r for r in ratios}


def _size_range(w: WinRange) -> str:
    """'64–4K', or one size when the range holds only one."""
    return format_size(w.size_from) + (
        f"–{format_size(w.size_to)}" if w.size_to != w.size_from else "")
