"""The report's non-blocking section: overlap % vs size per MPI_Test count, and the
overlapped (overall) time against the collective timed alone (pure).

Read from the rows' metrics (measured or ingested OSU rows alike; docs/nonblocking.md):
per context (collective, process count, placement, params), algorithm, setting
(test_calls, compute) and size, the median over ok repetitions of each figure.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from matplotlib.figure import Figure

from collbench import points as door
from collbench.analyse import algorithm_label
from collbench.analyse.compare import block_title
from collbench.analyse.stability import SIMULATED
from collbench.report import figures, html
from collbench.report.output import Output
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import csv_table

FIGURES = ("overlap_pct", "overall_us", "pure_us", "test_us", "wait_us")


@dataclass(frozen=True)
class NbPoint:
    label: str  # algorithm label and setting: "default t=25" (", compute=2x" if not auto)
    algorithm: str
    test_calls: int | None
    size_bytes: int
    n: int
    values: Mapping[str, float]  # median over repetitions of each of FIGURES present
    simulated: bool = False  # SimGrid: progress is not modelled, so neither is overlap


# Under SimGrid a non-blocking collective's messages advance whatever the ranks do (the
# simulator does not model an MPI's progress engine), so the overlap it gives (near 100 %)
# is not a measurement: it is shown as not modelled. docs/nonblocking.md.
NOT_MODELLED = "not modelled (SimGrid does not model MPI progress)"


def read(store: Store, collective: str | None = None) -> dict[str, list[NbPoint]]:
    """Points of the non-blocking rows per context title (empty: no such rows)."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in door.read(store, collective=collective, ok=True):
        if r.get("overall_us") is None:
            continue
        nb = (door.context_of(r["context"]) or {}).get("nonblocking") or {}
        ctx = (str(r["collective"]), int(r["nprocs"] or 0), r["nodes"], r["ppn"],
               r["mapping"], r["binding"], door.context(r["params"]))
        label = algorithm_label(str(r["algorithm"]), int(r["segsize"] or 0),
                                int(r["fanout"] or 0))
        groups.setdefault((ctx, label, nb.get("test_calls"), nb.get("compute"),
                           int(r["size_bytes"])), []).append(r)
    out: dict[str, list[NbPoint]] = {}
    for (ctx, label, tests, compute, size), ms in sorted(
            groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2] or 0,
                                            str(kv[0][3]), kv[0][4])):
        values = {}
        for key in FIGURES:
            xs = [float(v) for m in ms if (v := m.get(key)) is not None]
            if xs:
                values[key] = statistics.median(xs)
        shown = label + (f" t={tests}" if tests is not None else " t=?") + (
            f" compute={compute}" if compute not in (None, "auto") else "")
        simulated = any(m.get("backend") in SIMULATED for m in ms)
        out.setdefault(block_title(*ctx), []).append(
            NbPoint(shown, label, tests, size, len(ms), values, simulated))
    return out


def overlap(title: str, points: Sequence[NbPoint]) -> Figure:
    """Overlap % (OSU's) vs size, one line per algorithm and MPI_Test count."""
    labels = list(dict.fromkeys(p.label for p in points))
    colors = figures.palette(labels)
    margin = figures._legend_margin(labels)
    fig, ax = figures._frame(7.5 + margin, 4.5, right=margin)
    for i, label in enumerate(labels):
        pts = sorted((p for p in points if p.label == label and p.size_bytes > 0
                      and "overlap_pct" in p.values and not p.simulated),
                     key=lambda p: p.size_bytes)
        if not pts:
            continue
        ax.plot([float(p.size_bytes) for p in pts], [p.values["overlap_pct"] for p in pts],
                marker=figures.MARKERS[i % len(figures.MARKERS)], markersize=3.5,
                linewidth=1.3, color=colors[label], label=label)
    if any(p.simulated for p in points):
        ax.text(0.5, 0.5, f"overlap {NOT_MODELLED}", transform=ax.transAxes, ha="center",
                va="center", fontsize=9, color="0.35", wrap=True)
    figures._size_axis(ax, [p.size_bytes for p in points if p.size_bytes > 0])
    ax.set_ylim(-2, 102)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel("overlap % (OSU), median over repetitions")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if ax.get_lines():
        figures._legend(ax)
    return fig


def overall_vs_pure(title: str, points: Sequence[NbPoint]) -> Figure:
    """Overall (post, compute with MPI_Test calls, wait) and pure latency vs size, log-log:
    solid lines per algorithm and MPI_Test count, dashed the pure time per algorithm."""
    labels = list(dict.fromkeys(p.label for p in points))
    algs = list(dict.fromkeys(p.algorithm for p in points))
    colors = figures.palette([*labels, *(f"{a} pure" for a in algs)])
    names = [*(f"{label} overall" for label in labels), *(f"{a} pure" for a in algs)]
    margin = figures._legend_margin(names)
    fig, ax = figures._frame(7.5 + margin, 5.0, right=margin)
    for i, label in enumerate(labels):
        pts = sorted((p for p in points if p.label == label and p.size_bytes > 0
                      and "overall_us" in p.values), key=lambda p: p.size_bytes)
        ax.plot([float(p.size_bytes) for p in pts], [p.values["overall_us"] for p in pts],
                marker=figures.MARKERS[i % len(figures.MARKERS)], markersize=3.5,
                linewidth=1.3, color=colors[label], label=f"{label} overall")
    for alg in algs:
        by_size: dict[int, list[float]] = {}
        for p in points:
            if p.algorithm == alg and p.size_bytes > 0 and "pure_us" in p.values:
                by_size.setdefault(p.size_bytes, []).append(p.values["pure_us"])
        sizes = sorted(by_size)
        ax.plot([float(s) for s in sizes], [statistics.median(by_size[s]) for s in sizes],
                linestyle="--", linewidth=1.3, color=colors[f"{alg} pure"],
                marker="x" if len(sizes) == 1 else None,  # one size: a point, not a line
                label=f"{alg} pure")
    figures._size_axis(ax, [p.size_bytes for p in points if p.size_bytes > 0])
    figures._log_y(ax)
    ax.set_xlabel("message size (bytes per rank)")
    ax.set_ylabel("µs, median over repetitions")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    figures._legend(ax)
    return fig


def _table(points: Sequence[NbPoint]) -> tuple[str, str]:
    cols = ["size", "setting", "n", *FIGURES]
    rows = [[format_size(p.size_bytes), p.label, str(p.n),
             *("not modelled" if k == "overlap_pct" and p.simulated else
               f"{p.values[k]:.2f}" if k in p.values else "-" for k in FIGURES)]
            for p in points]
    md = "\n".join(["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols),
                    *("| " + " | ".join(r) + " |" for r in rows)])
    # The CSV holds the numbers unrounded, spelled as in every collbench CSV (tables.py).
    csv = csv_table([{"size": format_size(p.size_bytes), "setting": p.label, "n": p.n,
                      **{k: None if k == "overlap_pct" and p.simulated else p.values.get(k)
                         for k in FIGURES}} for p in points], cols)
    return md, csv


def section(store: Store, dest: Output, collective: str | None = None) -> html.Collective | None:
    """The section, or None when the folder holds no non-blocking figures."""
    blocks = []
    for title, points in read(store, collective).items():
        stem = dest.slug(f"nb-{title}")
        sized = [p for p in points if p.size_bytes > 0]
        figs = []
        if sized:
            figs = [
                dest.figure(partial(overlap, title, sized), f"{stem}_overlap",
                            f"{title}: OSU's overlap % (share of the pure communication time "
                            "hidden behind the compute; MPI_Test time counts as not hidden) "
                            "vs message size, one line per algorithm and number of MPI_Test "
                            "calls (t)."),
                dest.figure(partial(overall_vs_pure, title, sized), f"{stem}_overall",
                            f"{title}: overall time of the overlapped run (post + compute "
                            "with the MPI_Test calls + wait) against the collective timed "
                            "alone (pure, dashed), log-log."),
            ]
        files = dest.table(stem, *_table(points))
        blocks.append(html.Block(title, None, None, tuple(figs), (), tuple(files)))
    if not blocks:
        return None
    return html.Collective("Non-blocking collectives: overlap", tuple(blocks), notes=(
        "Overlap % = max(0, 100 - (overall - compute) / pure x 100) (OSU 7.4); t = MPI_Test "
        "calls interleaved with the compute. docs/nonblocking.md explains the figures.",))
