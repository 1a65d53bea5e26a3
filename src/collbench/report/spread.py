"""Spread over repetitions: every repetition as a dot for small n, boxes for larger n.

A boxplot of six points invents quartiles; with up to STRIP_MAX repetitions each one is
drawn (jittered sideways) with a tick at the median. Extreme values (beyond CLIP_IQR
interquartile ranges of the pooled log ratios, and 8x) would squash every other point
to a line: the axis stops short of them and an arrow at the edge says how far they went.
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
    clipped = False
    for label, pos, groups in series:
        if not groups:
            continue
        color = colors.get(label, (0.0, 0.0, 0.0, 1.0))
        shown = [[min(max(v, low), high) for v in g] for g in groups]
        if strips:
            _strips(ax, pos, shown, width * 0.8, color, label, rng)
        else:
            _draw_boxes(ax, pos, [_box(g) for g in shown], width * 0.85, color, label)
        clipped |= _mark_clipped(ax, pos, groups, low, high, color)
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
    if clipped:
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
                  low: float, high: float, color: Color) -> bool:
    marked = False
    for x, g in zip(pos, groups, strict=True):
        over, under = [v for v in g if v > high], [v for v in g if v < low]
        for vals, edge, mark, va in ((over, high, "^", "bottom"), (under, low, "v", "top")):
            if vals:
                worst = max(vals) if mark == "^" else min(vals)
                ax.plot([x], [edge], marker=mark, color=color, markersize=6, linestyle="none")
                ax.annotate(f"{worst:.3g}×" + (f" ({len(vals)})" if len(vals) > 1 else ""),
                            (x, edge), textcoords="offset points",
                            xytext=(0, 5 if mark == "^" else -5), ha="center", va=va,
                            fontsize=6.5, color="0.2")
                marked = True
    return marked


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
