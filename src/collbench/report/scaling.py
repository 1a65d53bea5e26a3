"""Latency vs process count: the studies' main figure.

One figure per collective and placement (mapping, binding, launch parameters), one panel
per message size, one line per algorithm: every algorithm measured at two or more process
counts (beyond SCALING_LABELS, the baseline and those recommended most often), so a
scaling campaign of one size is one figure rather than a one-point figure per process
count. A line follows the process count across node boundaries (the node count is part of
the x position, not of the line's identity); the boundaries themselves are drawn: sockets
and the cores of a node on one node, nodes beyond. Points with more ranks per node than
cores are drawn hollow and the region shaded: they measure the scheduler, not the
algorithm.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

from collbench.report.figures import MARKERS, _legend_margin, _log_y, palette
from collbench.sizes import format_size

if TYPE_CHECKING:
    from collbench.analyse import Comparison, PointStat
    from collbench.analyse.compare import Context
    from collbench.report import html
    from collbench.report.output import Output

SCALING_SIZES: Final = 3  # panels per figure
MAX_TICKS: Final = 12  # labelled process counts per panel
# Every algorithm up to 10 (tab10's colours); beyond, the baseline and those that win most.
SCALING_LABELS: Final = 10


@dataclass(frozen=True)
class Series:
    """One algorithm at one placement and size, over process counts."""

    label: str  # algorithm label
    placement: str  # "map-by=core bind-to=core"
    size_bytes: int
    nprocs: tuple[int, ...]
    values: tuple[float, ...]
    low: tuple[float | None, ...]  # interval ends (CI, else min over ranks)
    high: tuple[float | None, ...]
    nodes: tuple[int, ...]  # nodes used at each process count
    over: tuple[bool, ...]  # oversubscribed at each process count


@dataclass(frozen=True)
class Machine:
    """What the boundaries are drawn from (provenance.json)."""

    cores: int | None  # per node
    sockets: int | None  # per node


def scaling(title: str, series: Sequence[Series], sizes: Sequence[int], stat: str,
            machine: Machine, baseline: str = "") -> Figure:
    """The baseline black and bold, as in the latency figures; a placement is named in the
    legend only when there are several."""
    several = len({s.placement for s in series}) > 1
    names = list(dict.fromkeys(_name(s, several) for s in series))
    colors = palette(names)
    base = {_name(s, several) for s in series if s.label == baseline}
    if not several:  # one baseline line: black, as everywhere; several keep their colours
        colors.update(dict.fromkeys(base, (0.0, 0.0, 0.0, 1.0)))
    extra = ["oversubscribed (hollow, shaded)", "node boundary", "socket boundary"]
    margin = _legend_margin([*names, *extra])
    width = 3.8 * len(sizes) + 0.7 + margin
    fig = Figure(figsize=(width, 4.2))
    fig.subplots_adjust(left=0.85 / width, right=1 - margin / width, bottom=0.65 / 4.2,
                        top=1 - 0.75 / 4.2, wspace=0.32)
    # Each size its own latency range: sizes differ by orders of magnitude.
    axes = fig.subplots(1, len(sizes), squeeze=False)[0]
    counts = sorted({n for s in series for n in s.nprocs})
    marks: set[str] = set()
    for ax, size in zip(axes, sizes, strict=True):
        for s in (s for s in series if s.size_bytes == size):
            k = names.index(_name(s, several))
            _line(ax, s, colors[_name(s, several)], MARKERS[k % len(MARKERS)],
                  2.2 if s.label == baseline else 1.3)
            marks |= {"over"} if any(s.over) else set()
        marks |= _boundaries(ax, [s for s in series if s.size_bytes == size], machine)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(_ticks(counts)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_locator(NullLocator())
        _log_y(ax)
        ax.set_title(f"size {format_size(size)}", fontsize=9)
        ax.set_xlabel("processes (MPI ranks)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(f"{stat} latency (µs), median over repetitions")
    order = {n: i for i, n in enumerate(names)}  # markers as drawn, legend baseline first
    names.sort(key=lambda n: n not in base)
    handles: list[Line2D | Patch] = [
        Line2D([], [], color=colors[n], marker=MARKERS[order[n] % len(MARKERS)],
               label=f"{n} (baseline)" if n in base else n) for n in names]
    if "over" in marks:
        handles.append(Line2D([], [], color="0.3", marker="o", markerfacecolor="white",
                              linestyle="none", label="oversubscribed (hollow, shaded)"))
    if "node" in marks:
        handles.append(Line2D([], [], color="0.35", linestyle="--", label="node boundary"))
    if "socket" in marks:
        handles.append(Line2D([], [], color="0.55", linestyle=":", label="socket boundary"))
    axes[-1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                    fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    return fig


def _ticks(counts: Sequence[int]) -> list[float]:
    """Every process count when they are few; else the powers of two among them and the
    ends (a sweep of every count from 2 to 256 would print 255 labels on top of each other)."""
    if len(counts) <= MAX_TICKS:
        return [float(n) for n in counts]
    shown = {counts[0], counts[-1], *(n for n in counts if n & (n - 1) == 0)}
    if len(shown) > MAX_TICKS:  # wide ranges: every other power of two
        shown = {counts[0], counts[-1], *(n for n in shown if n.bit_length() % 2)}
    return [float(n) for n in sorted(shown)]


def _name(s: Series, placement: bool) -> str:
    return f"{s.label} {s.placement}".strip() if placement else s.label


def _line(ax: Axes, s: Series, color: tuple[float, float, float, float], marker: str,
          width: float) -> None:
    err_low = [v - lo if lo is not None else 0.0 for v, lo in zip(s.values, s.low, strict=True)]
    err_high = [hi - v if hi is not None else 0.0
                for v, hi in zip(s.values, s.high, strict=True)]
    ax.errorbar(s.nprocs, s.values, yerr=[[max(0.0, e) for e in err_low],
                                          [max(0.0, e) for e in err_high]],
                color=color, marker="none", capsize=2.5, linewidth=width, elinewidth=0.9)
    for over in (False, True):
        xs = [n for n, o in zip(s.nprocs, s.over, strict=True) if o == over]
        ys = [v for v, o in zip(s.values, s.over, strict=True) if o == over]
        if xs:
            ax.plot(xs, ys, linestyle="none", marker=marker, markersize=5.5, color=color,
                    markerfacecolor="white" if over else color, markeredgewidth=1.2)


def _boundaries(ax: Axes, series: Sequence[Series], machine: Machine) -> set[str]:
    """Dashed lines where the node count grows, dotted ones at each socket's last core
    (one node), and the oversubscribed region shaded."""
    drawn: set[str] = set()
    steps = sorted({(n, nodes) for s in series for n, nodes in zip(s.nprocs, s.nodes,
                                                                     strict=True)})
    for (n0, k0), (n1, k1) in itertools.pairwise(steps):
        if k1 > k0:
            ax.axvline((n0 * n1) ** 0.5, color="0.35", linestyle="--", linewidth=0.9)
            drawn.add("node")
    single = all(k <= 1 for _, k in steps)
    counts = [n for n, _ in steps]
    if single and machine.cores and machine.sockets and machine.sockets > 1 and counts:
        per = machine.cores // machine.sockets
        for k in range(1, machine.sockets):
            edge = per * k + 0.5
            if counts[0] < edge < counts[-1]:
                ax.axvline(edge, color="0.55", linestyle=":", linewidth=1.0)
                drawn.add("socket")
    over = [n for s in series for n, o in zip(s.nprocs, s.over, strict=True) if o]
    if over:
        fits = [n for s in series for n, o in zip(s.nprocs, s.over, strict=True) if not o]
        start = (max(fits) * min(over)) ** 0.5 if fits else min(over) / 1.2
        ax.axvspan(start, max(over) * 1.2, color="#f4d9d0", alpha=0.5, linewidth=0, zorder=0)
        drawn.add("over")
    return drawn


# --- from a comparison to figures -----------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """One figure: a collective at one placement, the sizes drawn, its lines."""

    collective: str
    placement: str
    sizes: tuple[int, ...]
    lines: dict[tuple[str, int], dict[int, PointStat]]  # (label, size) -> nprocs -> point
    single: tuple[str, ...]  # algorithms measured at one process count only: not drawn


def plans(comp: Comparison, name: str, points: Sequence[PointStat]) -> list[Plan]:
    """The scaling figures of collective `name`: one per placement with a line."""
    counts = Counter(r.algorithm for r in comp.ranges
                     if r.collective == name and r.algorithm != comp.baseline)
    by_place: dict[str, list[PointStat]] = {}
    for p in points:
        by_place.setdefault(placement(p), []).append(p)
    out = []
    for place, pts in sorted(by_place.items()):
        every = {p.label for p in pts}
        labels = every if len(every) <= SCALING_LABELS else {comp.baseline, *(
            lab for lab, _ in counts.most_common(SCALING_LABELS - 1))}
        lines: dict[tuple[str, int], dict[int, PointStat]] = {}
        for p in pts:
            if p.label in labels:
                lines.setdefault((p.label, p.size_bytes), {}).setdefault(p.nprocs, p)
        lines = {k: v for k, v in lines.items() if len(v) >= 2}
        sizes = _sizes(lines)
        if not sizes:
            continue
        drawn = {lab for lab, size in lines if size in sizes}
        out.append(Plan(name, place, tuple(sizes),
                        {k: v for k, v in lines.items() if k[1] in sizes},
                        tuple(sorted(labels - drawn))))
    return out


def _sizes(lines: dict[tuple[str, int], dict[int, PointStat]]) -> list[int]:
    """Up to SCALING_SIZES sizes: the one measured at the most process counts (a scaling
    sweep of one size), then the largest and a geometric middle of the rest."""
    reach: dict[int, set[int]] = {}
    for (_, size), pts in lines.items():
        reach.setdefault(size, set()).update(pts)
    if not reach:
        return []
    ordered = sorted(reach)
    chosen = [max(ordered, key=lambda s: (len(reach[s]), -s))]
    if ordered[-1] not in chosen:
        chosen.append(ordered[-1])
    rest = [s for s in ordered if s not in chosen]
    if rest and len(chosen) < SCALING_SIZES:
        mid = sum(math.log(max(s, 1)) for s in chosen) / len(chosen)
        chosen.append(min(rest, key=lambda s: abs(math.log(max(s, 1)) - mid)))
    return sorted(chosen)


def figures(comp: Comparison, name: str, points: Sequence[PointStat], dest: Output,
            machine: Machine) -> list[html.FigureRef]:
    """Latency vs process count of collective `name`, one figure per placement."""
    found = plans(comp, name, points)
    stat = comp.stat.removesuffix("_us")
    out = []
    for plan in found:
        series = [_series(label, plan.placement, size, pts, machine)
                  for (label, size), pts in sorted(plan.lines.items())]
        title = f"{name}: latency vs process count"
        title += f", {plan.placement}" if len(found) > 1 and plan.placement else ""
        stem = f"{name}_scaling" + (f"_{plan.placement}" if len(found) > 1 else "")
        labels = sorted({s.label for s in series})
        caption = (f"{title}: {stat} latency against the number of processes, one line per "
                   f"algorithm ({len(labels)}: {', '.join(labels)}; {comp.baseline}, the "
                   f"baseline, bold; every algorithm measured at two or more process counts, "
                   f"or beyond {SCALING_LABELS} the ones recommended for the most size "
                   "ranges), at the size measured at the most process counts, the largest "
                   "and one between; bars: confidence interval of the median (a single "
                   "repetition: fastest to slowest rank); lines continue across node "
                   "boundaries (dashed); dotted: socket boundaries; hollow points and the "
                   "shaded region: more ranks per node than cores (oversubscribed)")
        if plan.single:
            caption += (f"; not drawn, measured at one process count only: "
                        f"{', '.join(plan.single)}")
        draw = partial(scaling, title, series, list(plan.sizes), stat, machine,
                       comp.baseline)
        out.append(dest.figure(draw, dest.slug(stem), caption + "."))
    return out


def drawn(comp: Comparison, name: str, points: Sequence[PointStat]
          ) -> set[tuple[Context, int]]:
    """(context, size) of every point a scaling figure of `name` draws."""
    return {(p.context, size) for plan in plans(comp, name, points)
            for (_, size), pts in plan.lines.items() for p in pts.values()}


def _series(label: str, place: str, size: int, pts: dict[int, PointStat],
            machine: Machine) -> Series:
    ordered = [pts[n] for n in sorted(pts)]
    ci = all(p.n >= 2 for p in ordered)
    return Series(label, place, size, tuple(p.nprocs for p in ordered),
                  tuple(p.value for p in ordered),
                  tuple(p.ci_low if ci else p.min_us for p in ordered),
                  tuple(p.ci_high if ci else p.max_us for p in ordered),
                  tuple(p.nodes or 1 for p in ordered),
                  tuple(bool(machine.cores) and _per_node(p) > (machine.cores or 0)
                        for p in ordered))


def _per_node(p: PointStat) -> int:
    return p.ppn or (p.nprocs // p.nodes if p.nodes else p.nprocs)


def placement(p: PointStat) -> str:
    """How ranks are placed, without their number: a line runs across node counts."""
    parts = [f"map-by={p.mapping}"] if p.mapping else []
    parts += [f"bind-to={p.binding}"] if p.binding else []
    parts += [f"params={p.params}"] if p.params else []
    return " ".join(parts)
