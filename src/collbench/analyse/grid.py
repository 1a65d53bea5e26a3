"""The quick-look table of a one-line run: size × algorithm, OSU's layout with statistics.

One table per context (collective, process count, ...): a row per size, a column per
variant holding the median over repetitions of the named statistic, each cell marked with
its verdict against the baseline (the same exact Mann-Whitney tests, Holm within the size,
that `compare` runs), and what `compare` recommends at that size. Wider than WIDTH columns,
the variants wrap in blocks, each repeating the size column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from collbench.analyse import columns, stability
from collbench.analyse.compare import Comparison, PointStat, RatioStat, block_title
from collbench.analyse.render import fmt_num
from collbench.sizes import format_size

WIDTH: Final = 100
GAP: Final = 2
FASTER, SLOWER, UNTESTED = "*", "!", "?"
WORST: Final = 3  # stability warnings shown by default, worst first


def legend(c: Comparison) -> list[str]:
    base = c.baseline_text
    better, worse = (("more", "less") if c.effect == "difference" else ("faster", "slower"))
    return [f"# {columns.describe('median', c.stat)}",
            f"# {FASTER} significantly {better} than {base}, {SLOWER} significantly {worse}, "
            f"{UNTESTED} untested (fewer than 2 repetitions), no mark: no significant "
            f"difference ({c.confidence:.0%}, exact Mann-Whitney, Holm per size); "
            "recommended: as `collbench compare`"]


def mark(r: RatioStat | None, difference: bool = False) -> str:
    if r is None or r.significant is None:
        return UNTESTED if r is not None else " "
    if not r.significant:
        return " "
    better = r.ratio > 0 if difference else r.ratio < 1
    return FASTER if better else SLOWER


def grid(c: Comparison, width: int = WIDTH) -> str:
    """Every context of the comparison as size × variant tables (text)."""
    ratios = {id(r.point): r for r in c.ratios}
    recommended = {b.key: b.recommended for b in c.best}
    contexts: dict[str, list[PointStat]] = {}
    for p in c.points:
        contexts.setdefault(block_title(*p.context), []).append(p)
    out = legend(c)
    if c.notice:
        out.append(f"# NOTE: {c.notice}")
    for title, pts in contexts.items():
        labels = list(dict.fromkeys(p.label for p in pts))  # the baseline first (compare's order)
        sizes = sorted({p.size_bytes for p in pts})
        cell = {(p.size_bytes, p.label): fmt_num(p.value) + (
            "" if p.label == c.baseline else mark(ratios.get(id(p)), c.effect == "difference"))
            for p in pts}
        rec = {p.size_bytes: recommended.get(p.size_key, "-") for p in pts}
        out += ["", f"# {title}: {c.value_name}"]
        out += _tables(sizes, labels, cell, rec, width)
    return "\n".join(out) + "\n"


def _tables(sizes: Sequence[int], labels: Sequence[str], cell: dict[tuple[int, str], str],
            rec: dict[int, str], width: int) -> list[str]:
    size_col = [format_size(s) for s in sizes]
    size_w = max(len("size"), *map(len, size_col))
    rec_w = max(len("recommended"), *map(len, rec.values()))
    widths = {lab: max(len(lab), *(len(cell.get((s, lab), "-")) for s in sizes))
              for lab in labels}
    blocks: list[list[str]] = [[]]
    used = size_w + GAP + rec_w  # the first block also holds the recommendation
    for lab in labels:
        if blocks[-1] and used + GAP + widths[lab] > width:
            blocks.append([])
            used = size_w
        blocks[-1].append(lab)
        used += GAP + widths[lab]
    out: list[str] = []
    for i, block in enumerate(blocks):
        head = ["size".rjust(size_w)] + ([("recommended".ljust(rec_w))] if i == 0 else [])
        head += [lab.rjust(widths[lab]) for lab in block]
        out += ([""] if i else []) + [(" " * GAP).join(head).rstrip()]
        for s, name in zip(sizes, size_col, strict=True):
            row = [name.rjust(size_w)] + ([rec[s].ljust(rec_w)] if i == 0 else [])
            row += [cell.get((s, lab), "-").rjust(widths[lab]) for lab in block]
            out.append((" " * GAP).join(row).rstrip())
    return out


def warnings(c: Comparison, all_warnings: bool = False, limit: int = WORST) -> list[str]:
    """A count and the worst `limit` stability warnings (every one with all_warnings)."""
    if not c.warnings:
        return []
    shown = list(c.warnings) if all_warnings else list(c.warnings[:limit])
    rest = len(c.warnings) - len(shown)
    head = f"{len(c.warnings)} stability warning{'s' if len(c.warnings) != 1 else ''}"
    out = [head + (f", the worst {len(shown)}:" if rest else ":")]
    out += [f"  {stability.line(w)}" for w in shown]
    if rest:
        out.append(f"  {rest} more: --all shows every one")
    return out
