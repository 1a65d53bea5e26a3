"""A study's figures: per stage, the target metric per setting, and latency per size.

The per-size view reuses the report's boxplot (each setting drawn as a "label"); the
score view is one box per setting, the kept one filled.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from collbench.analyse.compare import PointStat
from collbench.analyse.stats import median
from collbench.report import figures
from collbench.study.decide import Decision, Values


def score_boxplot(decision: Decision, title: str) -> Figure:
    """The scores of each setting (1 = the baseline's median latency at every point)."""
    shown = [s for s in decision.settings if s.scores]
    labels = [s.value + (" (baseline)" if s.is_baseline else "") for s in shown]
    fig = Figure(figsize=(max(4.0, 1.1 * len(shown) + 2.0), 3.8))
    fig.subplots_adjust(left=0.18, right=0.97, bottom=0.2, top=0.86)
    ax = fig.add_subplot()
    if shown:
        parts = ax.boxplot([list(s.scores) for s in shown], patch_artist=True, widths=0.5)
        for box, s in zip(parts["boxes"], shown, strict=True):
            kept = s.value == decision.kept
            box.set_facecolor("#4c9f70" if kept else "white")
            box.set_edgecolor("black")
        ax.set_xticks(range(1, len(shown) + 1), labels, fontsize=8)
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")  # ratios: 2x slower and 2x faster sit equally far from 1
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("latency / baseline's\n(geometric mean over points)", fontsize=8)
    ax.set_title(f"{title}\nkept: {decision.kept}", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    return fig


def point_stats(values: Values,
                context: tuple[str, int, str, int, int]) -> list[PointStat]:
    """PointStats of one (collective, nprocs, algorithm, segsize, fanout), labelled by
    setting: the shape the report's per-size boxplot draws."""
    coll, nprocs = context[:2]
    out = []
    for setting, reps in values.items():
        sizes = sorted({k[5] for vals in reps.values() for k in vals if k[:5] == context})
        for size in sizes:
            xs = tuple(vals[(*context, size)] for vals in reps.values()
                       if (*context, size) in vals)
            out.append(PointStat(coll, nprocs, None, None, None, None, None, setting, 0, 0,
                                 size, len(xs), median(xs), None, None, xs, min(xs), max(xs)))
    return out


def write_stage(decision: Decision, values: Values,
                folder: Path, stem: str, title: str) -> list[Path]:
    """Every figure of one stage as PNG under `folder`; returns the files."""
    written = figures.save(score_boxplot(decision, title), folder / stem, "png")
    labels = [s.value for s in decision.settings]
    colors = figures.palette(labels)
    contexts = sorted({k[:5] for reps in values.values() for vals in reps.values()
                       for k in vals})
    for ctx in contexts:
        pts = point_stats(values, ctx)
        if not any(p.label == decision.baseline for p in pts):
            continue
        name = f"{ctx[0]} np={ctx[1]}" + (f" {ctx[2]}" if ctx[2] != "default" else "")
        fig = figures.boxplot(f"{title}: {name}", pts, labels, decision.baseline, colors)
        written += figures.save(fig, folder / f"{stem}-{_slug(name)}", "png")
    return written


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")
