"""The report's figures, drawn with matplotlib's object API (no pyplot: no global state).

Each function takes already-computed statistics and returns a Figure; `save` writes it as
PNG and/or SVG. Colours are assigned per algorithm label by the caller so that one label
keeps its colour across the figures of a block.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot: never look for a display

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullLocator,
)

from collbench.analyse import PointStat, RatioStat
from collbench.sizes import format_size
from collbench.store import publish

FORMATS: Final = {"png": ("png",), "svg": ("svg",), "both": ("png", "svg")}
DPI: Final = 110
MAX_CELL_TEXT: Final = (24, 24)  # (sizes, algorithms): above, numbers in cells are unreadable
MARKERS: Final = "osD^v<>ph*"
JOBS_PER_WORKER: Final = 4  # below, starting a worker costs more than it saves

Color = tuple[float, float, float, float]  # RGBA


def palette(labels: Sequence[str]) -> dict[str, Color]:
    """A distinct colour per label, in the given order (tab10, then tab20 beyond 10)."""
    cmap = colormaps["tab10" if len(labels) <= 10 else "tab20"]
    n = 10 if len(labels) <= 10 else 20
    return {label: to_rgba(cmap(i % n)) for i, label in enumerate(labels)}


def paths(stem: Path, fmt: str) -> list[Path]:
    """The files `save` writes for `stem`: PNG first (the page embeds the first)."""
    return [stem.with_suffix(f".{ext}") for ext in FORMATS[fmt]]


@dataclass(frozen=True)
class Job:
    """A figure to draw and save; picklable, so that worker processes can draw it."""

    draw: Callable[[], Figure]  # a functools.partial of one of this module's functions
    stem: Path
    fmt: str


def render(job: Job) -> list[Path]:
    return save(job.draw(), job.stem, job.fmt)


def render_all(jobs: Sequence[Job], workers: int | None = None) -> list[Path]:
    """Draw every job, in parallel worker processes when there are enough of them.

    Drawing (text layout and rasterising in matplotlib) costs ~0.25 s per figure and is
    the report's bottleneck; it is CPU-bound, so processes, not threads. Workers are
    forked: they start at once with matplotlib loaded, and unlike spawn or forkserver they
    do not re-import the caller's main script. The children only draw; the threads that
    fork leaves behind (OpenBLAS's pool, which is fork-safe; no DuckDB connection is open
    by then) are never needed there."""
    n = min(workers or os.cpu_count() or 1, len(jobs) // JOBS_PER_WORKER)
    if n < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return [p for job in jobs for p in render(job)]
    with warnings.catch_warnings():
        # Python >= 3.12 warns about fork() in a multi-threaded process: see above.
        warnings.filterwarnings("ignore", ".*multi-threaded.*fork", DeprecationWarning)
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork")) as pool:
            return [p for written in pool.map(render, jobs) for p in written]


def _saver(fig: Figure, ext: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        fig.savefig(tmp, format=ext, dpi=DPI, metadata={"Date": None} if ext == "svg" else {})
    return write


def save(fig: Figure, stem: Path, fmt: str) -> list[Path]:
    """Write `stem.png` and/or `stem.svg`; returns the paths written."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    # A fixed SVG id salt and no date: the same data gives byte-identical files.
    with matplotlib.rc_context({"svg.hashsalt": "collbench"}):
        for path in paths(stem, fmt):
            ext = path.suffix[1:]
            publish(path, _saver(fig, ext))
            out.append(path)
    return out


def _frame(width: float, height: float, *, left: float = 0.85, right: float = 0.25,
           bottom: float = 0.65, top: float = 0.45) -> tuple[Figure, Axes]:
    """A figure with one axes and fixed margins in inches.

    Fixed margins instead of constrained layout: the layout solver draws every figure twice
    and was most of the report's run time."""
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height)
    return fig, fig.add_subplot()


def _text_width(labels: Sequence[str], fontsize: float = 8) -> float:
    """Rough width in inches of the longest label (enough to reserve a margin)."""
    return max((len(s) for s in labels), default=0) * fontsize * 0.0085 + 0.1


def _size_axis(ax: Axes, sizes: Sequence[int], axis: str = "x") -> None:
    """Log2 byte axis with K/M labels on (a readable subset of) the measured sizes."""
    shown = sorted(set(sizes))
    step = max(1, math.ceil(len(shown) / 12))
    ticks = shown[::step]
    target = ax.xaxis if axis == "x" else ax.yaxis
    if axis == "x":
        ax.set_xscale("log", base=2)
    else:
        ax.set_yscale("log", base=2)
    target.set_major_locator(FixedLocator([float(t) for t in ticks]))
    target.set_major_formatter(FuncFormatter(lambda v, _: format_size(round(v))))
    target.set_minor_locator(NullLocator())


def _log_y(ax: Axes) -> None:
    """Log y axis labelled 1, 2, 5, 10, ... in plain numbers: the default labels go through
    mathtext, which is slow, and a narrow range would get no label at all."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(NullLocator())


def _legend(ax: Axes) -> None:
    # Outside the axes (the caller reserves the margin): inside, lines hide the data, and
    # matplotlib's "best" placement is slow.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _legend_margin(labels: Sequence[str]) -> float:
    return _text_width(labels) + 0.55


def latency(title: str, points: Sequence[PointStat], colors: Mapping[str, Color],
            stat: str) -> Figure:
    """Latency vs size, log-log, one line per label, with a CI (or min–max over ranks) band.

    Size 0 has no place on a log axis; when it is the only size (barrier), one bar per
    label instead."""
    use_ci = any(p.n >= 2 for p in points)
    if not any(p.size_bytes > 0 for p in points):
        return _bars(title, points, colors, stat, use_ci)
    labels = list(dict.fromkeys(p.label for p in points))
    margin = _legend_margin(labels)
    fig, ax = _frame(7.5 + margin, 5.0, right=margin)
    by_label: dict[str, list[PointStat]] = {}
    for p in points:
        if p.size_bytes > 0:  # a log axis has no 0
            by_label.setdefault(p.label, []).append(p)
    for i, (label, pts) in enumerate(by_label.items()):
        pts.sort(key=lambda p: p.size_bytes)
        x = [float(p.size_bytes) for p in pts]
        color = colors.get(label, "black")
        ax.plot(x, [p.value for p in pts], marker=MARKERS[i % len(MARKERS)], markersize=3.5,
                linewidth=1.3, color=color, label=label)
        low = [p.ci_low if use_ci else p.min_us for p in pts]
        high = [p.ci_high if use_ci else p.max_us for p in pts]
        band = [(xi, lo, hi) for xi, lo, hi in zip(x, low, high, strict=True)
                if lo is not None and hi is not None and lo > 0]
        if band:
            ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                            color=color, alpha=0.13, linewidth=0)
    _size_axis(ax, [p.size_bytes for p in points if p.size_bytes > 0])
    _log_y(ax)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel(f"{stat} (µs), median over repetitions")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax)
    return fig


def _bars(title: str, points: Sequence[PointStat], colors: Mapping[str, Color], stat: str,
          use_ci: bool) -> Figure:
    labels = list(dict.fromkeys(p.label for p in points))
    fig, ax = _frame(8.0, max(2.5, 0.35 * len(labels) + 1.4), left=_text_width(labels) + 0.3)
    values = [next(p for p in points if p.label == lab) for lab in labels]
    low = [(p.ci_low if use_ci else p.min_us) or p.value for p in values]
    high = [(p.ci_high if use_ci else p.max_us) or p.value for p in values]
    ax.barh(range(len(labels)), [p.value for p in values],
            xerr=[[max(0.0, p.value - lo) for p, lo in zip(values, low, strict=True)],
                  [max(0.0, hi - p.value) for p, hi in zip(values, high, strict=True)]],
            color=[colors.get(lab, "grey") for lab in labels], alpha=0.8, capsize=3)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{stat} (µs), median over repetitions")
    ax.set_title(f"{title} (size 0)", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def heatmap(title: str, ratios: Sequence[RatioStat], baseline: str, repetitions: int) -> Figure:
    """Ratio to the baseline per (algorithm, size): diverging colours centred on 1, log scale.

    Hatched cells are not significantly different from the baseline (or untestable)."""
    labels = sorted({r.point.label for r in ratios})
    sizes = sorted({r.point.size_bytes for r in ratios})
    cell = {(r.point.label, r.point.size_bytes): r for r in ratios}
    values = [[cell[(lab, s)].ratio if (lab, s) in cell else math.nan for s in sizes]
              for lab in labels]
    finite = [v for row in values for v in row if v > 0 and math.isfinite(v)]
    span = min(100.0, max([1.25] + [max(v, 1 / v) for v in finite]))
    cmap = colormaps["RdBu_r"].with_extremes(bad="#dddddd")
    left = _text_width(labels) + 0.25
    width = min(18.0, max(6.5, 0.42 * len(sizes) + left + 1.6))
    rotate = len(sizes) > 14
    fig, ax = _frame(width, max(2.8, 0.36 * len(labels) + 1.9), left=left, right=1.5,
                     bottom=1.05 if rotate else 0.85, top=0.65)
    masked = [[v if v > 0 else math.nan for v in row] for row in values]
    mesh = ax.pcolormesh(range(len(sizes) + 1), range(len(labels) + 1), masked, cmap=cmap,
                         norm=LogNorm(vmin=1 / span, vmax=span), edgecolors="white",
                         linewidth=0.5)
    pos = ax.get_position()
    bar = fig.colorbar(mesh, cax=fig.add_axes((pos.x1 + 0.15 / width, pos.y0, 0.18 / width,
                                               pos.height)))
    bar.set_label(f"ratio to {baseline} (< 1: faster)")
    bar.ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    readable = len(sizes) <= MAX_CELL_TEXT[0] and len(labels) <= MAX_CELL_TEXT[1]
    # Hatch the cells that are not significant, unless none is: all-hatched says nothing
    # and hides the colours; the title says it instead.
    tested = repetitions >= 2
    hatch = hatched(ratios, repetitions)
    for (label, size), r in cell.items():
        x, y = sizes.index(size), labels.index(label)
        if hatch and not r.significant:
            ax.add_patch(Rectangle((x, y), 1, 1, fill=False, hatch="///", linewidth=0,
                                   edgecolor=(0.25, 0.25, 0.25, 0.55)))
        if readable and r.ratio > 0:
            strong = abs(math.log(r.ratio)) > 0.6 * math.log(span)
            ax.text(x + 0.5, y + 0.5, _short(r.ratio), ha="center", va="center", fontsize=7,
                    color="white" if strong else "black",
                    fontweight="bold" if r.significant else "normal")
    ax.set_xticks([i + 0.5 for i in range(len(sizes))], [format_size(s) for s in sizes],
                  rotation=90 if rotate else 0, fontsize=8)
    ax.set_yticks([i + 0.5 for i in range(len(labels))], labels, fontsize=8)
    ax.invert_yaxis()  # first label on top, as in the tables
    ax.set_xlabel("message size (bytes per rank)")
    why = ("" if hatch else "\n(no ratio is significant: too few repetitions or no real "
           "difference)" if tested else "\n(1 repetition: no significance test possible)")
    ax.set_title(title + why, fontsize=10)
    if hatch:
        fig.legend(handles=[Patch(facecolor="white", edgecolor="0.3", hatch="///",
                                  label="not significant / untested")],
                   loc="lower right", fontsize=8, frameon=False)
    return fig


def hatched(ratios: Sequence[RatioStat], repetitions: int) -> bool:
    """Whether `heatmap` hatches the non-significant cells (captions must say the same)."""
    return repetitions >= 2 and any(r.significant for r in ratios)


def _short(v: float) -> str:
    return f"{v:.2f}" if v < 10 else f"{v:.0f}"


def boxplot(title: str, points: Sequence[PointStat], labels: Sequence[str], baseline: str,
            colors: Mapping[str, Color]) -> Figure:
    """Repetitions per size and label, divided by the baseline's median at that size."""
    base = {p.size_bytes: p.value for p in points if p.label == baseline and p.value > 0}
    sizes = sorted(s for s in base if any(p.size_bytes == s and p.label in labels
                                          for p in points))
    width = 0.8 / max(1, len(labels))
    margin = _legend_margin(labels)
    rotate = len(sizes) > 14
    # Capped so that the page shows it near full size: wider, its labels become unreadable.
    fig, ax = _frame(min(10.5, max(7.0, 0.14 * len(sizes) * max(1, len(labels)) + 1.2))
                     + margin, 4.6, right=margin, bottom=0.95 if rotate else 0.65)
    at = {(p.label, p.size_bytes): p for p in points}
    for j, label in enumerate(labels):
        pos, boxes = [], []
        for i, size in enumerate(sizes):
            p = at.get((label, size))
            if p is not None and p.values:
                pos.append(i + (j - (len(labels) - 1) / 2) * width)
                boxes.append(_box([v / base[size] for v in p.values]))
        if boxes:
            _draw_boxes(ax, pos, boxes, width * 0.85, colors.get(label, (0.0, 0.0, 0.0, 1.0)),
                        label)
    ax.axhline(1.0, color="0.4", linewidth=0.8, linestyle="--")
    _log_y(ax)
    ax.set_xticks(range(len(sizes)), [format_size(s) for s in sizes],
                  rotation=90 if rotate else 0, fontsize=8)
    ax.set_xlim(-0.6, len(sizes) - 0.4)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel(f"time / {baseline}'s median")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    _legend(ax)
    return fig


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


@dataclass(frozen=True)
class ScalingLine:
    placement: str  # "map-by=core bind-to=core"
    size_bytes: int
    nprocs: tuple[int, ...]
    values: tuple[float, ...]


def scaling(title: str, lines: Sequence[ScalingLine], sizes: Sequence[int],
            stat: str) -> Figure:
    """Latency vs process count, one panel per size, one line per placement."""
    placements = sorted({ln.placement for ln in lines})
    margin = _legend_margin(placements)
    width = 3.6 * len(sizes) + 0.6 + margin
    fig = Figure(figsize=(width, 3.9))
    fig.subplots_adjust(left=0.8 / width, right=1 - margin / width, bottom=0.6 / 3.9,
                        top=1 - 0.7 / 3.9, wspace=0.3)
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    colors = palette(placements)
    for ax, size in zip(axes, sizes, strict=True):
        for k, place in enumerate(placements):
            for ln in lines:
                if ln.placement == place and ln.size_bytes == size:
                    ax.plot(ln.nprocs, ln.values, marker=MARKERS[k % len(MARKERS)],
                            color=colors[place], label=place)
        counts = sorted({n for ln in lines for n in ln.nprocs})
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator([float(n) for n in counts]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        _log_y(ax)
        ax.set_title(f"size {format_size(size)}", fontsize=9)
        ax.set_xlabel("processes")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(f"{stat} (µs)")
    _legend(axes[-1])
    fig.suptitle(title, fontsize=10)
    return fig


@dataclass(frozen=True)
class Tail:
    """Quantiles of one point's raw per-iteration samples (median over repetitions)."""

    label: str
    size_bytes: int
    count: int
    p50: float
    p99: float


def tails(title: str, rows: Sequence[Tail], colors: Mapping[str, Color]) -> Figure:
    """p99 / p50 of per-iteration samples vs size: how heavy each algorithm's tail is."""
    margin = _legend_margin(sorted({t.label for t in rows}))
    fig, ax = _frame(7.5 + margin, 4.2, right=margin)
    by_label: dict[str, list[Tail]] = {label: [] for label in colors}  # legend in colour order
    for t in rows:
        if t.size_bytes > 0 and t.p50 > 0:
            by_label.setdefault(t.label, []).append(t)
    by_label = {label: ts for label, ts in by_label.items() if ts}
    for i, (label, ts) in enumerate(by_label.items()):
        ts.sort(key=lambda t: t.size_bytes)
        ax.plot([float(t.size_bytes) for t in ts], [t.p99 / t.p50 for t in ts],
                marker=MARKERS[i % len(MARKERS)], markersize=3.5, linewidth=1.2,
                color=colors.get(label, "black"), label=label)
    _size_axis(ax, [t.size_bytes for ts in by_label.values() for t in ts])
    _log_y(ax)
    ax.set_ylim(bottom=1.0)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel("p99 / p50 of iterations")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    _legend(ax)
    return fig
