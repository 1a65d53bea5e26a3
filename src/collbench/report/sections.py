"""The page's sections: one per collective, one block per measurement context in it.

Each block queues its figures and writes its tables through Output, and returns what the
page shows of them; the notes say why a figure is missing rather than leaving a gap.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Sequence
from functools import partial
from typing import Final

from collbench.analyse import Comparison, PointStat, RatioStat, WinRange
from collbench.analyse.compare import block_title
from collbench.report import figures, heatmap, html, scaling, tables
from collbench.report.data import Context, Counts, Tails
from collbench.report.output import Output
from collbench.report.scaling import Machine
from collbench.report.spread import STRIP_MAX, spread

BOX_LABELS: Final = 4  # baseline + the 3 fastest: more boxes per size are unreadable
UNKNOWN: Final = Machine(None, None)


def collectives(comp: Comparison | None, counts: Counts, tails: Tails,
                dest: Output, machine: Machine = UNKNOWN) -> list[html.Collective]:
    names = sorted({c for c, _ in counts})
    by_context: dict[Context, list[PointStat]] = {}
    for p in comp.points if comp else ():
        by_context.setdefault(p.context, []).append(p)
    out = []
    for name in names:
        contexts = [ctx for ctx in by_context if ctx[0] == name]
        if comp is None or not contexts:
            bad = ", ".join(f"{s} {n}" for (c, s), n in sorted(counts.items()) if c == name)
            out.append(html.Collective(name, (), notes=(
                f"No successful measurement of {name} (points by status: {bad}); see "
                "`collbench show` for the errors.",)))
            continue
        points = [p for ctx in contexts for p in by_context[ctx]]
        ylim = _shared_scale(points)  # one latency scale for the collective's panels
        on_scaling = scaling.drawn(comp, name, points)
        blocks = tuple(_block(comp, ctx, by_context[ctx], tails, dest, ylim, on_scaling)
                       for ctx in contexts)
        figs = scaling.figures(comp, name, points, dest, machine)
        out.append(html.Collective(name, blocks, tuple(figs)))
    return out


def _block(comp: Comparison, ctx: Context, points: list[PointStat], tails: Tails,
           dest: Output, ylim: tuple[float, float] | None = None,
           on_scaling: set[tuple[Context, int]] | None = None) -> html.Block:
    title = block_title(*ctx)
    stem = dest.slug(_stem(ctx))
    labels = list(dict.fromkeys(p.label for p in points))
    labels.sort(key=lambda lab: (lab != comp.baseline, lab))
    colors = figures.palette(labels)
    ratios = [r for r in comp.ratios if r.point.context == ctx]
    best = [b for b in comp.best if b.key[:7] == ctx]
    ranges = [r for r in comp.ranges if _range_context(r) == ctx]
    reps = max(p.n for p in points)
    stat = comp.stat.removesuffix("_us")
    notes: list[str] = []
    figs: list[html.FigureRef] = []

    sizes = {p.size_bytes for p in points}
    if len(sizes) == 1 and (ctx, *sizes) in (on_scaling or set()):
        # A one-size block of a scaling sweep: its points are on the scaling figure.
        notes.append(f"One size measured here: its latencies are on the {ctx[0]} scaling "
                     "figure with the other process counts (below); the tables have the "
                     "numbers.")
    else:
        figs.append(_latency(comp, title, stem, points, colors, ranges, reps, ylim, dest))
    if len(labels) == 1:
        notes.append(f"Only one algorithm measured here ({labels[0]}): nothing to compare, "
                     "no heat map.")
    elif not ratios:
        notes.append(f"The baseline {comp.baseline} was not measured here: no ratios, "
                     "no heat map.")
    elif not figs:
        pass  # one size on the scaling figure: the ratio table says what a heat map would
    else:
        cells = ("full colour: significantly different from the baseline (Holm-corrected "
                 "exact Mann-Whitney), bold number; faded: tested, not significant"
                 + ("; hatched: untested (fewer than 2 repetitions on a side)"
                    if heatmap.untested(ratios, reps) else "")
                 if reps >= 2 else "a single repetition: no cell can be tested")
        figs.append(dest.figure(partial(heatmap.heatmap, title, ratios, comp.baseline, reps),
                                f"{stem}_ratio", f"{title}: ratio of each algorithm's {stat} "
                                f"to {comp.baseline}'s at each size (blue: faster, red: "
                                f"slower; one log colour scale, 1/{heatmap.RATIO_SPAN:g} to "
                                f"{heatmap.RATIO_SPAN:g}, in every heat map; grey: not "
                                f"measured); {cells}."))
    if reps < 2:
        notes.append("One repetition: no spread across repetitions and no significance; "
                     "run more repetitions (run.repetitions) to see the spread.")
    elif len(labels) > 1 and ratios:
        shown = _box_labels(comp.baseline, labels, ratios)
        how = ("every repetition as a dot, a bar at the median" if reps <= STRIP_MAX
               else "boxes: quartiles, whiskers to 1.5 IQR")
        figs.append(dest.figure(partial(spread, title, points, shown, comp.baseline, colors),
                                f"{stem}_repetitions",
                                f"{title}: spread of the {stat} over repetitions ({how}), "
                                f"each divided by {comp.baseline}'s median at that size "
                                f"(1 = baseline); {comp.baseline} and the {len(shown) - 1} "
                                "algorithms with the lowest geometric-mean ratio; values far "
                                "outside the rest sit at the edge, marked with their value."))
    # Size 0 has no meaningful per-iteration time to compare tails of.
    block_tails = [t for (c, _, size), t in tails.items() if c == ctx and size > 0]
    if len({t.size_bytes for t in block_tails}) >= 2:  # one size: the table says it all
        figs.append(dest.figure(partial(figures.tails, title, block_tails, colors),
                                f"{stem}_tails",
                                f"{title}: tail of the per-iteration times (raw samples): "
                                "p99 / p50 per launch, median over repetitions. Descriptive "
                                "only: iterations of one launch are not independent "
                                "observations."))
    files = dest.table(stem,
                       tables.block_markdown(comp, title, points, ratios, best, ranges,
                                             block_tails),
                       tables.block_csv(comp, points, ratios, best, block_tails))
    return html.Block(title, tables.recommendation(comp, ranges, ratios, best) if ranges
                      else None,
                      tables.ratio_table(comp, labels, points, ratios, best) if len(labels) > 1
                      else None, tuple(figs), tuple(notes), tuple(files))


def _stem(ctx: Context) -> str:
    coll, nprocs, nodes, ppn, mapping, binding, params = ctx
    parts = [str(coll), f"np{nprocs}"]
    parts += [f"n{nodes}x{ppn}"] if nodes and nodes > 1 else []
    parts += [f"map-{mapping}"] if mapping else []
    parts += [f"bind-{binding}"] if binding else []
    # Parameters can be long and contain anything: a short hash keeps stems distinct.
    parts += [f"p{hashlib.sha1(str(params).encode()).hexdigest()[:6]}"] if params else []
    return "_".join(parts)


def _range_context(r: WinRange) -> Context:
    return (r.collective, r.nprocs, r.nodes, r.ppn, r.mapping, r.binding, r.params)


def _box_labels(baseline: str, labels: Sequence[str], ratios: Sequence[RatioStat]) -> list[str]:
    """The baseline and the fastest others by geometric-mean ratio over sizes."""
    logs: dict[str, list[float]] = {}
    for r in ratios:
        if r.ratio > 0:
            logs.setdefault(r.point.label, []).append(math.log(r.ratio))
    ranked = sorted((lab for lab in labels if lab in logs),
                    key=lambda lab: statistics.fmean(logs[lab]))
    return [baseline, *ranked[:BOX_LABELS - 1]]


def _latency(comp: Comparison, title: str, stem: str, points: Sequence[PointStat],
             colors: dict[str, figures.Color], ranges: Sequence[WinRange], reps: int,
             ylim: tuple[float, float] | None, dest: Output) -> html.FigureRef:
    stat = comp.stat.removesuffix("_us")
    winners = [figures.WinSpan(r.algorithm, r.size_from, r.size_to) for r in ranges]
    band = ("bands: confidence interval of the median over repetitions" if reps >= 2 else
            "bands: fastest to slowest rank (min_us to max_us) of the single repetition")
    sizes = {p.size_bytes for p in points if p.size_bytes > 0}
    if len(sizes) < 2:
        what = (f"{stat} latency per algorithm at the one size measured, a dot per algorithm "
                f"(median over up to {reps} repetitions) with its "
                + ("confidence interval" if reps >= 2 else "fastest-to-slowest-rank range"))
    else:
        what = (f"{stat} latency vs message size, log-log (median over up to {reps} "
                f"repetitions): {comp.baseline} (baseline) bold black, the algorithms "
                "recommended for some size range in colour (the strip along the bottom shows "
                "which one holds each range), every other algorithm thin grey; "
                f"{band}, for the highlighted lines only; the latency scale is shared by "
                "every panel of this collective")
        if 0 in {p.size_bytes for p in points}:
            what += "; size 0 is not on the log axis (see the tables)"
    return dest.figure(partial(figures.latency, title, points, colors, stat, comp.baseline,
                               winners, ylim), f"{stem}_latency", f"{title}: {what}.")


def _shared_scale(points: Sequence[PointStat]) -> tuple[float, float] | None:
    """Latency limits covering every point and band of a collective, with a margin."""
    ys = [y for p in points if p.size_bytes > 0
          for y in (p.value, p.ci_low, p.ci_high, p.min_us, p.max_us)
          if y is not None and y > 0]
    return (min(ys) / 1.25, max(ys) * 1.25) if ys else None
