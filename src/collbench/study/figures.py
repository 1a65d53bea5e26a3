"""A study's figures: per stage, the target metric per setting, and latency per size.

The per-size view reuses the report's spread figure (each setting drawn as a "label":
dots for few repetitions, boxes for many); the score view is one box per setting, the kept
one filled, extreme scores clipped and annotated.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from collbench.analyse.compare import PointStat
from collbench.analyse.stats import median
from collbench.report import figures
from collbench.report.scaling import Machine, Series, scaling
from collbench.report.spread import clip_limits, spread
from collbench.study.decide import Decision, Values


def score_boxplot(decision: Decision, title: str) -> Figure:
    """The scores of each setting (1 = the baseline's median latency at every point).

    Extreme scores (see report.spread.clip_limits) would flatten every box: the axis stops
    short of them and an arrow at the edge gives the most extreme value and how many."""
    shown = [s for s in decision.settings if s.scores]
    labels = [s.value + (" (baseline)" if s.is_baseline else "") for s in shown]
    fig = Figure(figsize=(max(4.5, 1.1 * len(shown) + 3.6), 3.8))
    fig.subplots_adjust(left=0.8 / fig.get_figwidth(), right=1 - 2.0 / fig.get_figwidth(),
                        bottom=0.2, top=0.86)
    ax = fig.add_subplot()
    low, high = clip_limits([v for s in shown for v in s.scores])
    if shown:
        clipped = [[min(max(v, low), high) for v in s.scores] for s in shown]
        parts = ax.boxplot(clipped, patch_artist=True, widths=0.5, showfliers=False,
                           medianprops={"color": "black", "linewidth": 1.5})
        for box, s in zip(parts["boxes"], shown, strict=True):
            kept = s.value == decision.kept
            box.set_facecolor(KEPT if kept else "white")
            box.set_edgecolor("black")
        for i, (s, vals) in enumerate(zip(shown, clipped, strict=True), 1):
            # Every score as a dot over its box: a box of a few scores hides how few.
            ax.scatter([i + 0.12 * ((k % 5) - 2) / 2 for k in range(len(vals))], vals, s=9,
                       color="black", alpha=0.6, linewidths=0, zorder=3)
            _mark(ax, i, [v for v in s.scores if v > high], high, "^")
            _mark(ax, i, [v for v in s.scores if v < low], low, "v")
        ax.set_xticks(range(1, len(shown) + 1), labels, fontsize=8)
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")  # ratios: 2x slower and 2x faster sit equally far from 1
    ax.set_ylim(low / 1.1, high * 1.1)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("setting")
    ax.set_ylabel("latency / baseline's (×),\ngeometric mean over points", fontsize=8)
    ax.set_title(f"{title}\nkept: {decision.kept}", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(handles=[Patch(facecolor=KEPT, edgecolor="black", label="kept setting"),
                       Patch(facecolor="white", edgecolor="black", label="not kept"),
                       Line2D([], [], color="black", marker="o", markersize=3,
                              linestyle="none", label="one repetition"),
                       Line2D([], [], color="0.4", linestyle="--", label="baseline (1)"),
                       Line2D([], [], color="black", marker="^", linestyle="none",
                              label="clipped (value shown)")],
              loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7.5, frameon=False)
    return fig


KEPT = "#4c9f70"


def _mark(ax: Axes, x: int, values: list[float], edge: float, marker: str) -> None:
    if not values:
        return
    worst = max(values) if marker == "^" else min(values)
    ax.plot([x], [edge], marker=marker, color="black", linestyle="none", markersize=6)
    ax.annotate(f"{worst:.3g}×" + (f" ({len(values)})" if len(values) > 1 else ""), (x, edge),
                textcoords="offset points", xytext=(8, 0), va="center", fontsize=7)


def point_stats(values: Values,
                context: tuple[str, int, str, int, int]) -> list[PointStat]:
    """PointStats of one (collective, nprocs, algorithm, segsize, fanout), labelled by
    setting: the shape the report's per-size spread figure draws."""
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


def scaling_series(values: Values, group: tuple[str, str, int, int],
                   sizes: int = 3) -> tuple[list[Series], list[int]]:
    """Per setting, the median over repetitions at each process count of one (collective,
    algorithm, segsize, fanout), at the smallest, a middle and the largest size measured at
    several process counts; bars span the repetitions (min to max)."""
    at: dict[tuple[str, int, int], list[float]] = {}
    for setting, reps in values.items():
        for vals in reps.values():
            for (c, n, a, sg, f, size), v in vals.items():
                if (c, a, sg, f) == group:
                    at.setdefault((setting, size, n), []).append(v)
    counts: dict[int, set[int]] = {}
    for _, size, n in at:
        counts.setdefault(size, set()).add(n)
    shown = sorted(size for size, ns in counts.items() if len(ns) >= 2)
    if len(shown) > sizes:
        shown = [shown[0], shown[len(shown) // 2], shown[-1]]
    out = []
    for setting in values:
        for size in shown:
            ns = sorted(n for (st, sz, n) in at if st == setting and sz == size)
            if len(ns) < 2:
                continue
            got = [at[(setting, size, n)] for n in ns]
            out.append(Series(setting, "", size, tuple(ns), tuple(median(r) for r in got),
                              tuple(min(r) for r in got), tuple(max(r) for r in got),
                              tuple(1 for _ in ns), tuple(False for _ in ns)))
    return out, shown


def write_stage(decision: Decision, values: Values,
                folder: Path, stem: str, title: str) -> list[Path]:
    """Every figure of one stage as PNG under `folder`; returns the files."""
    written = figures.save(score_boxplot(decision, title), folder / stem, "png")
    groups = sorted({(k[0], k[2], k[3], k[4]) for reps in values.values()
                     for vals in reps.values() for k in vals})
    for group in groups:  # the studies' main figure: latency vs process count per setting
        series, sizes = scaling_series(values, group)
        if series:
            name = f"{group[0]} {group[1]}"
            fig = scaling(f"{title}: {name}, latency vs process count (bars: min to max over "
                          "repetitions)", series, sizes, "latency", Machine(None, None),
                          decision.baseline)
            written += figures.save(fig, folder / f"{stem}-{_slug(name)}-scaling", "png")
    labels = [s.value for s in decision.settings]
    colors = figures.palette(labels)
    contexts = sorted({k[:5] for reps in values.values() for vals in reps.values()
                       for k in vals})
    for ctx in contexts:
        pts = point_stats(values, ctx)
        if not any(p.label == decision.baseline for p in pts):
            continue
        name = f"{ctx[0]} np={ctx[1]}" + (f" {ctx[2]}" if ctx[2] != "default" else "")
        fig = spread(f"{title}: {name}", pts, labels, decision.baseline, colors)
        written += figures.save(fig, folder / f"{stem}-{_slug(name)}", "png")
    return written


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text).strip("-")
