"""Spread over repetitions: every repetition as a dot for small n, boxes for larger n.

A boxplot of six points invents quartiles; with up to STRIP_MAX repetitions each one is
drawn (jittered sideways) with a tick at the median. Extreme values (beyond CLIP_IQR
interquartile ranges of the pooled log ratios, and 8x) would squash every other point
to a line: the axis stops short of them and an arrow at the edge says how far they went,
its value written upright inside the axis; where neighbours' labels would overlap (many
sizes and algorithms), one label per group of touching marks names the farthest value
and how many values the group holds.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from collbench.analyse import PointStat
from collbench.report.figures import Color, _frame, _legend, _legend_margin, _log_y
from collbench.sizes import format_size

STRIP_MAX: Final = 10  # up to this many repetitions: dots, not boxes
CLIP_IQR: Final = 3.0  # the axis ends this many IQRs (of log values) beyond the quartiles,
CLIP_MIN: Final = math.log(8.0)  # and never closer than 8x: only extremes are clipped
LABEL_PT: Final = 6.5  # font size of a clipped value's label
LABEL_GAP_PT: Final = LABEL_PT * 1.35  # upright labels closer than this would overlap


@dataclass(frozen=True)
class _Clip:
    """A value (or values) beyond the axis: drawn at `edge`, labelled with the farthest."""

    x: float
    edge: float
    worst: float
    count: int
    above: bool


def spread(title: str, points: Sequence[PointStat], labels: Sequence[str], baseline: str,
           colors: Mapping[str, Color]) -> Figure:
    """Repetitions per size and label, divided by the baseline's median at that size."""
    base = {p.size_bytes: p.value for p in points if p.label == baseline and p.value > 0}
    sizes = sorted(s for s in base if any(p.size_bytes == s and p.label in labels
                                          for p in points))
    at = {(p.label, p.size_bytes): p for p in points}
    strips = max((p.n for p in points if p.label in labels), default=0) <= STRIP_MAX
    width = 0.8 / max(1, len(labels))
    margin = _legend_margin([*labels, "clipped (value shown)"])
    rotate = len(sizes) > 14
    fig, ax = _frame(min(10.5, max(7.0, 0.14 * len(sizes) * max(1, len(labels)) + 1.2))
                     + margin, 4.6, right=margin, bottom=0.95 if rotate else 0.65)
    series: list[tuple[str, list[float], list[list[float]]]] = []
    for j, label in enumerate(labels):
        pos, groups = [], []
        for i, size in enumerate(sizes):
            p = at.get((label, size))
            if p is not None and p.values:
                pos.append(i + (j - (len(labels) - 1) / 2) * width)
                groups.append([v / base[size] for v in p.values])
        series.append((label, pos, groups))
    low, high = clip_limits([v for _, _, gs in series for g in gs for v in g])
    rng = random.Random(0)  # the same jitter every time: reports are reproducible
    clips: list[_Clip] = []
    for label, pos, groups in series:
        if not groups:
            continue
        color = colors.get(label, (0.0, 0.0, 0.0, 1.0))
        shown = [[min(max(v, low), high) for v in g] for g in groups]
        if strips:
            _strips(ax, pos, shown, width * 0.8, color, label, rng)
        else:
            _draw_boxes(ax, pos, [_box(g) for g in shown], width * 0.85, color, label)
        clips += _mark_clipped(ax, pos, groups, low, high, color)
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    _log_y(ax)
    ax.set_ylim(low / 1.08, high * 1.08)
    ax.set_xticks(range(len(sizes)), [format_size(s) for s in sizes],
                  rotation=90 if rotate else 0, fontsize=8)
    ax.set_xlim(-0.6, len(sizes) - 0.4)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel(f"time / {baseline}'s median (×)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    _label_clipped(ax, clips, fig)
    if clips:
        ax.plot([], [], linestyle="none", marker="^", color="0.3",
                label="clipped (value shown)")
    _legend(ax)
    return fig


def clip_limits(values: Sequence[float]) -> tuple[float, float]:
    """The axis range: every value, unless some lie beyond CLIP_IQR IQRs (in log) of the
    quartiles; then up to that far (and never hiding 1, the baseline)."""
    logs = sorted(math.log(v) for v in values if v > 0)
    if not logs:
        return 0.5, 2.0
    if len(logs) < 4:
        return min(math.exp(logs[0]), 1.0), max(math.exp(logs[-1]), 1.0)
    q1, _, q3 = statistics.quantiles(logs, n=4, method="inclusive")
    reach = max(CLIP_IQR * (q3 - q1), CLIP_MIN)
    lo, hi = max(logs[0], q1 - reach), min(logs[-1], q3 + reach)
    return min(math.exp(lo), 1.0), max(math.exp(hi), 1.0)


def _mark_clipped(ax: Axes, pos: Sequence[float], groups: Sequence[Sequence[float]],
                  low: float, high: float, color: Color) -> list[_Clip]:
    """An arrow at the edge for each clipped group; their labels come later, all at once."""
    out = []
    for x, g in zip(pos, groups, strict=True):
        over, under = [v for v in g if v > high], [v for v in g if v < low]
        for vals, edge, above in ((over, high, True), (under, low, False)):
            if vals:
                ax.plot([x], [edge], marker="^" if above else "v", color=color, markersize=6,
                        linestyle="none")
                out.append(_Clip(x, edge, max(vals) if above else min(vals), len(vals), above))
    return out


def _label_clipped(ax: Axes, clips: Sequence[_Clip], fig: Figure) -> None:
    """Upright labels inside the axis below (above) the arrow; marks closer than a label's
    height share one label: the farthest value, and the count of values behind it."""
    x0, x1 = ax.get_xlim()
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    per_unit = width_pt / (x1 - x0)  # points per x unit
    for above in (True, False):
        marks = sorted((c for c in clips if c.above == above), key=lambda c: c.x)
        group: list[_Clip] = []
        for c in [*marks, None]:
            if c is not None and (not group or (c.x - group[-1].x) * per_unit < LABEL_GAP_PT):
                group.append(c)
                continue
            if group:
                worst = (max if above else min)(group, key=lambda g: g.worst)
                count = sum(g.count for g in group)
                x = statistics.fmean(g.x for g in group)
                ax.annotate(f"{worst.worst:.3g}×" + (f" ({count})" if count > 1 else ""),
                            (x, worst.edge), textcoords="offset points",
                            xytext=(0, -7 if above else 7), ha="center",
                            va="top" if above else "bottom", rotation=90,
                            fontsize=LABEL_PT, color="0.2",
                            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white",
                                  "edgecolor": "none", "alpha": 0.8})
            group = [c] if c is not None else []


def _strips(ax: Axes, pos: Sequence[float], groups: Sequence[Sequence[float]], width: float,
            color: Color, label: str, rng: random.Random) -> None:
    xs = [x + rng.uniform(-width / 3, width / 3) for x, g in zip(pos, groups, strict=True)
          for _ in g]
    ys = [v for g in groups for v in g]
    ax.scatter(xs, ys, s=11, color=[(*color[:3], 0.75)], linewidths=0, label=label, zorder=2)
    half = width / 2
    ax.hlines([statistics.median(g) for g in groups], [x - half for x in pos],
              [x + half for x in pos], color=color, linewidth=1.8, zorder=3)


@dataclass(frozen=True)
class _Box:
    q1: float
    median: float
    q3: float
    low: float  # whiskers: the farthest values within 1.5 IQR of the box (Tukey)
    high: float
    fliers: tuple[float, ...]


def _box(values: Sequence[float]) -> _Box:
    v = sorted(values)
    q1, med, q3 = statistics.quantiles(v, n=4, method="inclusive") if len(v) > 1 else v * 3
    reach = 1.5 * (q3 - q1)
    inside = [x for x in v if q1 - reach <= x <= q3 + reach]
    return _Box(q1, med, q3, inside[0], inside[-1],
                tuple(x for x in v if x < q1 - reach or x > q3 + reach))


def _draw_boxes(ax: Axes, pos: Sequence[float], boxes: Sequence[_Box], width: float,
                color: Color, label: str) -> None:
    """Boxplots drawn as a few collections per label: Axes.boxplot makes ~7 artists per box,
    which made boxplots the slowest figures of large reports."""
    ax.bar(pos, [b.q3 - b.q1 for b in boxes], width, [b.q1 for b in boxes],
           color=(*color[:3], 0.35), edgecolor=color, linewidth=0.8, label=label)
    half = width / 2
    ax.hlines([b.median for b in boxes], [x - half for x in pos], [x + half for x in pos],
              color=color, linewidth=1.6)
    ax.vlines(pos, [b.low for b in boxes], [b.q1 for b in boxes], color=color, linewidth=0.8)
    ax.vlines(pos, [b.q3 for b in boxes], [b.high for b in boxes], color=color, linewidth=0.8)
    fx = [x for x, b in zip(pos, boxes, strict=True) for _ in b.fliers]
    fy = [f for b in boxes for f in b.fliers]
    if fx:
        ax.scatter(fx, fy, s=9, facecolors="none", edgecolors=[color], linewidths=0.8)
