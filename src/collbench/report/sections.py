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
from collbench.report import figures, html, tables
from collbench.report.data import Context, Counts, Tails
from collbench.report.output import Output

BOX_LABELS: Final = 4  # baseline + the 3 fastest: more boxes per size are unreadable
SCALING_SIZES: Final = 3


def collectives(comp: Comparison | None, counts: Counts, tails: Tails,
                dest: Output) -> list[html.Collective]:
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
        blocks = tuple(_block(comp, ctx, by_context[ctx], tails, dest) for ctx in contexts)
        points = [p for ctx in contexts for p in by_context[ctx]]
        scaling = _scaling(comp, name, points, dest)
        out.append(html.Collective(name, blocks, (scaling,) if scaling else ()))
    return out


def _block(comp: Comparison, ctx: Context, points: list[PointStat], tails: Tails,
           dest: Output) -> html.Block:
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

    band = ("the band is the confidence interval of the median over repetitions"
            if reps >= 2 else "the band spans the fastest to the slowest rank (min_us to max_us)"
            " of the single repetition")
    sizes = {p.size_bytes for p in points}
    if 0 in sizes and len(sizes) > 1:
        band += "; size 0 is not shown on the log axis (see the tables)"
    figs.append(dest.figure(partial(figures.latency, title, points, colors, stat),
                            f"{stem}_latency",
                            f"{title}: {stat} latency vs message size, log-log, one line per "
                            f"algorithm (median over up to {reps} repetitions); {band}."))
    if len(labels) == 1:
        notes.append(f"Only one algorithm measured here ({labels[0]}): nothing to compare, "
                     "no heat map.")
    elif not ratios:
        notes.append(f"The baseline {comp.baseline} was not measured here: no ratios, "
                     "no heat map.")
    else:
        hatch = ("hatched cells are not significantly different from the baseline "
                 "(Holm-corrected exact Mann-Whitney) or could not be tested; bold numbers "
                 "are significant" if figures.hatched(ratios, reps) else
                 "no ratio is significant here, so no cell is hatched" if reps >= 2 else
                 "a single repetition: no cell can be tested for significance")
        figs.append(dest.figure(partial(figures.heatmap, title, ratios, comp.baseline, reps),
                                f"{stem}_ratio", f"{title}: ratio of each algorithm's {stat} "
                                f"to {comp.baseline}'s at each size (blue: faster, red: "
                                "slower, log colour scale centred on 1; grey: not measured); "
                                f"{hatch}."))
    if reps < 2:
        notes.append("One repetition: no boxplots across repetitions and no significance; "
                     "run more repetitions (run.repetitions) to see the spread.")
    elif len(labels) > 1 and ratios:
        shown = _box_labels(comp.baseline, labels, ratios)
        figs.append(dest.figure(partial(figures.boxplot, title, points, shown, comp.baseline,
                                        colors),
                                f"{stem}_repetitions",
                                f"{title}: spread of the {stat} over repetitions, each divided "
                                f"by {comp.baseline}'s median at that size (1 = baseline); "
                                f"{comp.baseline} and the {len(shown) - 1} algorithms with the "
                                "lowest geometric-mean ratio."))
    # Size 0 has no meaningful per-iteration time to compare tails of.
    block_tails = [t for (c, _, size), t in tails.items() if c == ctx and size > 0]
    if block_tails:
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


def _scaling(comp: Comparison, name: str, points: Sequence[PointStat],
             dest: Output) -> html.FigureRef | None:
    """Baseline latency vs process count per placement, at a few representative sizes."""
    base = [p for p in points if p.label == comp.baseline]
    if len({p.nprocs for p in base}) < 2:
        return None
    series: dict[tuple[str, int], dict[int, float]] = {}
    for p in base:
        series.setdefault((_placement(p), p.size_bytes), {}).setdefault(p.nprocs, p.value)
    sizes = sorted({s for (_, s), v in series.items() if len(v) >= 2})
    if not sizes:
        return None
    if len(sizes) > SCALING_SIZES:
        mid = math.log(max(1, sizes[0]) * sizes[-1]) / 2  # geometric middle
        sizes = [sizes[0], min(sizes[1:-1], key=lambda s: abs(math.log(s) - mid)), sizes[-1]]
    lines = [figures.ScalingLine(place, size, tuple(sorted(v)),
                                 tuple(v[n] for n in sorted(v)))
             for (place, size), v in series.items() if size in sizes and len(v) >= 2]
    stat = comp.stat.removesuffix("_us")
    draw = partial(figures.scaling, f"{name}: {comp.baseline} vs process count", lines, sizes,
                   stat)
    return dest.figure(draw, dest.slug(f"{name}_scaling"),
                       f"{name}: {stat} latency of the baseline ({comp.baseline}, measured at "
                       "every process count, unlike the per-size winners) against the number "
                       "of processes, one line per placement, at the smallest, a middle and "
                       "the largest size measured at several process counts.")


def _placement(p: PointStat) -> str:
    parts = [f"ppn={p.ppn}"] if p.nodes and p.nodes > 1 else []
    parts += [f"map-by={p.mapping}"] if p.mapping else []
    parts += [f"bind-to={p.binding}"] if p.binding else []
    parts += [f"params={p.params}"] if p.params else []
    return " ".join(parts) or "default placement"
