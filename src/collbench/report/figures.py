"""The report's figures, drawn with matplotlib's object API (no pyplot: no global state).

Each function takes already-computed statistics and returns a Figure; `save` writes it as
PNG and/or SVG. Colours are assigned per algorithm label by the caller so that one label
keeps its colour across the figures of a block.
"""

from __future__ import annotations

import html
import itertools
import json
import math
import multiprocessing
import os
import re
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot: never look for a display

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogLocator,
    NullLocator,
)
from PIL import Image

from collbench.analyse import PointStat
from collbench.sizes import format_size
from collbench.storefiles import publish

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
    """The files `save` writes for `stem`: PNG first (the page embeds the first). The
    extension is added, never substituted: a stem may hold a dot (an OSU version, 5.9)."""
    return [stem.with_name(f"{stem.name}.{ext}") for ext in FORMATS[fmt]]


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


def describe(fig: Figure) -> dict[str, Any]:
    """What a reader (or a test) checks without looking: every axes' labels and title,
    and every legend entry. Saved in the files' Description and shown on the page."""
    axes = [{"x": ax.get_xlabel(), "y": ax.get_ylabel(), "title": ax.get_title()}
            for ax in fig.axes if ax.get_label() != "colorbar"]
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    entries = [t.get_text() for lg in legends if lg is not None for t in lg.get_texts()]
    bars = [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "colorbar"]
    return {"axes": axes, "legend": entries, "colorbar": bars}


def description(path: Path) -> str | None:
    """The `describe` text saved in a PNG or SVG file, if any."""
    try:
        if path.suffix == ".png":
            with Image.open(path) as im:
                text = getattr(im, "text", {}).get("Description")
                return text if isinstance(text, str) else None
        found = re.search(r"<dc:description>(.*?)</dc:description>", path.read_text(), re.S)
        return html.unescape(found.group(1)) if found else None
    except (OSError, ValueError):
        return None


def _saver(fig: Figure, ext: str) -> Callable[[Path], None]:
    meta = json.dumps(describe(fig), ensure_ascii=False)
    def write(tmp: Path) -> None:
        fig.savefig(tmp, format=ext, dpi=DPI, metadata={"Date": None, "Description": meta}
                    if ext == "svg" else {"Description": meta})
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


def latency(title: str, points: Sequence[PointStat], colors: Mapping[str, Color], stat: str,
            baseline: str = "", winners: Sequence[WinSpan] = (),
            ylim: tuple[float, float] | None = None) -> Figure:
    """Latency vs size, log-log: the baseline bold, the algorithms that win some size range
    in colour with their band, every other algorithm a thin grey line (context, not
    competitors); a strip under the curves marks which winner holds each size range.

    With a single size (barrier's 0, or one size measured) a line has nothing to join:
    a dot chart instead."""
    use_ci = any(p.n >= 2 for p in points)
    if not points:  # nothing measured: an empty, labelled frame rather than an error
        fig, ax = _frame(7.5, 3.0)
        ax.set_xlabel("message size (bytes per rank)")
        ax.set_ylabel(f"{stat} latency (µs)")
        ax.set_title(f"{title}: no measurement", fontsize=10)
        return fig
    if len({p.size_bytes for p in points if p.size_bytes > 0}) < 2:
        return dots(title, points, colors, stat, baseline, use_ci)
    shown = {w.label for w in winners} | {baseline}
    labels = list(dict.fromkeys(p.label for p in points))
    legend_labels = [lab for lab in labels if lab in shown] + ["other algorithms"]
    margin = _legend_margin(legend_labels)
    fig, ax = _frame(7.5 + margin, 5.0, right=margin)
    by_label: dict[str, list[PointStat]] = {}
    for p in points:
        if p.size_bytes > 0:  # a log axis has no 0
            by_label.setdefault(p.label, []).append(p)
    others = 0
    # Grey lines first, so that the highlighted ones are drawn over them.
    for label, pts in sorted(by_label.items(), key=lambda kv: (kv[0] in shown, kv[0])):
        pts.sort(key=lambda p: p.size_bytes)
        x = [float(p.size_bytes) for p in pts]
        y = [p.value for p in pts]
        if label not in shown:
            rest = len(set(by_label) - shown)
            ax.plot(x, y, color="0.62", linewidth=0.7, alpha=0.85, zorder=1,
                    label="_" if others else f"other algorithms ({rest})")
            others += 1
            continue
        base = label == baseline
        color = (0.0, 0.0, 0.0, 1.0) if base else colors.get(label, (0.0, 0.0, 0.0, 1.0))
        ax.plot(x, y, color=color, linewidth=2.4 if base else 1.5, zorder=3 if base else 2,
                marker="o" if base else MARKERS[(labels.index(label) + 1) % len(MARKERS)],
                markersize=3.5, label=f"{label} (baseline)" if base else label)
        low = [p.ci_low if use_ci else p.min_us for p in pts]
        high = [p.ci_high if use_ci else p.max_us for p in pts]
        band = [(xi, lo, hi) for xi, lo, hi in zip(x, low, high, strict=True)
                if lo is not None and hi is not None and lo > 0]
        if band:
            ax.fill_between([b[0] for b in band], [b[1] for b in band], [b[2] for b in band],
                            color=color, alpha=0.15, linewidth=0, zorder=0)
    sizes = [p.size_bytes for p in points if p.size_bytes > 0]
    _size_axis(ax, sizes)
    _log_y(ax)
    if ylim is not None:
        ax.set_ylim(*ylim)
    _winner_strip(ax, winners, sorted(set(sizes)), colors, baseline)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel(f"{stat} latency (µs), median over repetitions")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    handles, names = ax.get_legend_handles_labels()
    order = sorted(range(len(names)), key=lambda i: (not names[i].endswith("(baseline)"),
                                                     names[i].startswith("other algorithms")))
    ax.legend([handles[i] for i in order], [names[i] for i in order], loc="upper left",
              bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return fig


@dataclass(frozen=True)
class WinSpan:
    """An algorithm recommended over [size_from, size_to] (a compare WinRange)."""

    label: str
    size_from: int
    size_to: int


def _winner_strip(ax: Axes, winners: Sequence[WinSpan], sizes: Sequence[int],
                  colors: Mapping[str, Color], baseline: str) -> None:
    """A band along the bottom of the axes, coloured by the recommended algorithm: each
    range reaches halfway (in log size) to the neighbouring measured sizes."""
    if not winners or len(sizes) < 2:
        return
    edges = [math.sqrt(a * b) for a, b in itertools.pairwise(sizes)]
    lo = {s: (sizes[0] / math.sqrt(sizes[1] / sizes[0]) if i == 0 else edges[i - 1])
          for i, s in enumerate(sizes)}
    hi = {s: (sizes[-1] * math.sqrt(sizes[-1] / sizes[-2]) if i == len(sizes) - 1
              else edges[i]) for i, s in enumerate(sizes)}
    for w in winners:
        if w.size_from in lo and w.size_to in hi:
            color = (0.0, 0.0, 0.0, 1.0) if w.label == baseline else colors.get(
                w.label, (0.5, 0.5, 0.5, 1.0))
            ax.axvspan(max(lo[w.size_from], sizes[0]), min(hi[w.size_to], sizes[-1]),
                       ymin=0.0, ymax=0.025, color=color, linewidth=0, alpha=0.9)


def dots(title: str, points: Sequence[PointStat], colors: Mapping[str, Color], stat: str,
         baseline: str, use_ci: bool) -> Figure:
    """One size: a dot per algorithm (fastest on top) with its interval; baseline black."""
    size = min(p.size_bytes for p in points)
    pts = sorted((p for p in points if p.size_bytes == size), key=lambda p: p.value)
    labels = [p.label for p in pts]
    what = "confidence interval of the median" if use_ci else "fastest to slowest rank"
    keys = [f"{baseline} (baseline)", "median", f"bar: {what}"]
    margin = _legend_margin(keys)
    fig, ax = _frame(6.0 + margin, max(2.6, 0.32 * len(labels) + 1.6),
                     left=_text_width(labels) + 0.3, right=margin)
    for i, p in enumerate(pts):
        lo = (p.ci_low if use_ci else p.min_us) or p.value
        hi = (p.ci_high if use_ci else p.max_us) or p.value
        color = (0.0, 0.0, 0.0, 1.0) if p.label == baseline else colors.get(p.label, "grey")
        ax.errorbar([p.value], [i], xerr=[[max(0.0, p.value - lo)], [max(0.0, hi - p.value)]],
                    fmt="o", color=color, markersize=6 if p.label == baseline else 4.5,
                    capsize=3, linewidth=1.2)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylim(len(labels) - 0.5, -0.5)  # fastest on top
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    lo, hi = ax.get_xlim()
    if hi / lo < 10:  # fewer than two labelled ticks in a narrow range: label the ends
        ax.xaxis.set_major_locator(FixedLocator([lo, (lo * hi) ** 0.5, hi]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.set_xlabel(f"{stat} latency (µs), median over repetitions")
    ax.set_ylabel("algorithm")
    ax.set_title(f"{title} (size {format_size(size)})", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(handles=[Line2D([], [], color="black", marker="o", linestyle="none",
                              label=keys[0]),
                       Line2D([], [], color="0.4", marker="o", linestyle="none", label=keys[1]),
                       Line2D([], [], color="0.4", marker="|", markersize=10,
                              linestyle="-", label=keys[2])],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
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
