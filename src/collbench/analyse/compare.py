"""`collbench compare`: every algorithm against a baseline, with statistics over repetitions.

A point is (collective, nprocs, nodes, ppn, mapping, binding, params, algorithm, segsize,
fanout, size). Its value is the median over ok repetitions of one figure (`median_avg_us`,
analyse/columns.py); the baseline is compared within the same context and size. The
variants are the algorithms, or the values of another column (analyse/dimensions.py,
`--baseline COLUMN=VALUE`). Methods: docs/statistics.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import groupby
from typing import Any, Final

from collbench import points as door
from collbench.analyse import columns, dimensions, stability
from collbench.analyse.nonblocking import NOT_MODELLED
from collbench.analyse.rows import fetch
from collbench.analyse.stats import holm, log_ratio_ci, mann_whitney, median, median_ci, shift_ci
from collbench.catalog import components
from collbench.errors import UserError, did_you_mean
from collbench.store import Store

KEY_FIELDS: Final = ("collective", "nprocs", "nodes", "ppn", "mapping", "binding", "params",
                     "size_bytes")

Context = tuple[str, int, int | None, int | None, str | None, str | None, str | None]
SizeKey = tuple[str, int, int | None, int | None, str | None, str | None, str | None, int]


@dataclass(frozen=True)
class PointStat:
    """One point, pooled over its ok repetitions."""

    collective: str
    nprocs: int
    nodes: int | None
    ppn: int | None
    mapping: str | None
    binding: str | None
    params: str | None  # launch parameters without the algorithm-forcing ones; None if empty
    algorithm: str
    segsize: int
    fanout: int
    size_bytes: int
    n: int  # ok repetitions
    value: float  # median over repetitions of the chosen statistic
    ci_low: float | None
    ci_high: float | None
    values: tuple[float, ...]  # per-repetition values of the statistic
    min_us: float | None  # min of min_us (for bands)
    max_us: float | None  # max of max_us
    ci_coverage: float | None = None  # attained coverage of [ci_low, ci_high]
    component: str | None = None  # the coll component that served it (rows format 3)

    @property
    def label(self) -> str:
        return algorithm_label(self.algorithm, self.segsize, self.fanout, self.component)

    @property
    def context(self) -> Context:
        return (self.collective, self.nprocs, self.nodes, self.ppn, self.mapping, self.binding,
                self.params)

    @property
    def size_key(self) -> SizeKey:
        return (*self.context, self.size_bytes)


@dataclass(frozen=True)
class RatioStat:
    point: PointStat
    baseline: PointStat
    ratio: float  # point.value / baseline.value: < 1 is faster than the baseline
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # Holm-adjusted within the size (the one the verdict uses)
    significant: bool | None  # None: not testable (fewer than 2 repetitions on a side)
    p_raw: float | None = None  # unadjusted exact Mann-Whitney p-value
    ci_coverage: float | None = None


@dataclass(frozen=True)
class Best:
    key: SizeKey  # (collective, nprocs, nodes, ppn, mapping, binding, params, size_bytes)
    winner: PointStat  # lowest value
    ratio: float | None  # winner / baseline; None without a baseline at this size
    significant: bool | None  # winner significantly different from the baseline
    recommended: str  # label recommended after the significance rule
    note: str = ""  # why recommended differs from the winner, or why it is untested


@dataclass(frozen=True)
class WinRange:
    collective: str
    nprocs: int
    mapping: str | None
    params: str | None
    algorithm: str  # the recommended label over [size_from, size_to]
    size_from: int
    size_to: int
    nodes: int | None = None
    ppn: int | None = None
    binding: str | None = None
    fallback: bool = False  # baseline recommended because nothing was significantly faster


StabilityWarning = stability.StabilityWarning


@dataclass(frozen=True)
class Comparison:
    stat: str  # the figure compared: avg_us, median_us, min_us, max_us, completion_us, ...
    baseline: str  # the variant compared against (an algorithm label, or a column's value)
    confidence: float
    repetitions: int  # max ok repetitions seen
    points: tuple[PointStat, ...]
    ratios: tuple[RatioStat, ...]  # every point with a baseline, except the baseline itself
    best: tuple[Best, ...]
    ranges: tuple[WinRange, ...]
    warnings: tuple[StabilityWarning, ...]
    notice: str | None = None  # shown above every output when nothing can be tested
    # "ratio" (value / baseline, < 1 better) or, for overlap_pct, "difference" (value -
    # baseline in percentage points, > 0 better); RatioStat.ratio holds that effect.
    effect: str = "ratio"
    column: str = dimensions.ALGORITHM  # the column whose values are the variants

    @property
    def value_name(self) -> str:
        """The name of a point's value: 'median_avg_us' (columns.point_column)."""
        return columns.point_column("median", self.stat)

    @property
    def baseline_text(self) -> str:
        """'default', or 'btl=self,vader' when another column holds the variants."""
        return dimensions.Baseline(self.column, self.baseline).text

    def to_json(self) -> dict[str, Any]:
        def point(p: PointStat) -> dict[str, Any]:
            return dict(asdict(p), label=p.label, values=list(p.values))

        return {
            "stat": self.stat, "value": self.value_name, "effect": self.effect,
            "column": self.column, "baseline": self.baseline,
            "confidence": self.confidence,
            "repetitions": self.repetitions, "notice": self.notice, "method": METHOD,
            "points": [point(p) for p in self.points],
            "ratios": [dict(asdict(r), point=point(r.point), baseline=point(r.baseline),
                            effect=columns.effect_text(
                                r.ratio, r.ci_low, r.ci_high, self.baseline_text,
                                self.effect == "difference"))
                       for r in self.ratios],
            "best": [dict(asdict(b), key=dict(zip(KEY_FIELDS, b.key, strict=True)),
                          winner=point(b.winner)) for b in self.best],
            "ranges": [asdict(r) for r in self.ranges],
            "warnings": [asdict(w) for w in self.warnings],
        }


METHOD: Final = {
    "value": "median over repetitions of the statistic",
    "value_ci": "distribution-free order-statistic interval for the median (binomial)",
    "ratio": "value / baseline value",
    "ratio_ci": "Hodges-Lehmann / Moses interval on log times (exact)",
    "effect": "the ratio in hyperfine's words: '1.53 ± 0.05 × faster than default'",
    "test": "exact two-sided Mann-Whitney U (permutation distribution with ties)",
    "multiple_comparisons": "Holm within each size (every variant against the baseline)",
    "significant": "Holm-adjusted p < 1 - confidence and the ratio CI excludes 1",
    "recommended": "fastest variant (algorithm, or value of the --baseline column) "
                   "significantly faster than the baseline, else the baseline; with a "
                   "single repetition, the fastest (untested)",
}


def algorithm_label(algorithm: str, segsize: int, fanout: int,
                    component: str | None = None) -> str:
    """'pipeline[seg=8192]', 'chain[seg=8192,fanout=4]', 'binomial', and the component
    where it is not the algorithm's own: 'default@han' (catalog.components.label_suffix)."""
    extras = ([f"seg={segsize}"] if segsize else []) + ([f"fanout={fanout}"] if fanout else [])
    return (algorithm + (f"[{','.join(extras)}]" if extras else "")
            + components.label_suffix(component))


def block_title(collective: str, nprocs: int, nodes: int | None, ppn: int | None,
                mapping: str | None, binding: str | None, params: str | None) -> str:
    """'bcast np=4 map-by=core bind-to=core' (+ nodes and params where they say something)."""
    parts = [collective, f"np={nprocs}"]
    if nodes and nodes > 1:
        parts.append(f"nodes={nodes} ppn={ppn}")
    parts += [f"map-by={mapping}"] if mapping else []
    parts += [f"bind-to={binding}"] if binding else []
    data = door.context_of(params) if params else None
    if isinstance(data, dict):  # what --baseline COLUMN=VALUE moved into the context
        parts += [f"{k}={data.pop(k)}" for k in ("mpi", "algorithm") if k in data]
        params = json.dumps(data, sort_keys=True) if data else None
    parts += [f"params={params}"] if params else []
    return " ".join(parts)


def compare(store: Store, baseline: str = "default", stat: str = "avg",
            collective: str | None = None, nprocs: int | None = None,
            confidence: float = 0.95) -> Comparison:
    if not 0 < confidence < 1:
        raise UserError(f"collbench compare: --confidence {confidence:g} is not valid; "
                        "valid: a number between 0 and 1, such as 0.95")
    column_name = dimensions.parse(baseline)[0]
    if column_name == "collective" and collective is not None:
        # bcast against ibcast: --collective names either; both are read.
        fetched = [r for r in fetch(store, None, nprocs)
                   if dimensions.blocking(str(r["collective"]))
                   == dimensions.blocking(collective)]
        if not fetched:
            fetch(store, collective, nprocs)  # the one-line reason
    else:
        fetched = fetch(store, collective, nprocs)
    column = door.figure_of(stat, fetched)
    fetched, left_out = _modelled(store, fetched, column)
    difference = stat in door.DIFFERENCE_STATS
    chosen = dimensions.resolve(baseline, fetched)
    groups = door.pool(dimensions.rewrite(fetched, chosen, _row_label), column)
    points = [p for g in groups if (p := _point(g, confidence)) is not None]
    if not points:
        statuses = sorted({str(r["status"]) for g in groups for r in g.rows})
        what = (f"{column} (a non-blocking figure: only rows of ibcast, iallgather, ... "
                "have it)" if stat in door.NONBLOCKING_STATS else column)
        raise UserError(f"{store.root}: no ok measurements with {what} to compare "
                        f"(statuses present: {', '.join(statuses)}); see collbench show")
    base = (_resolve_baseline(chosen.value, points, fetched)
            if chosen.column == dimensions.ALGORITHM else chosen.value)
    points.sort(key=lambda p: (*_order(p), p.label != base, p.label))
    ratios, missing = _ratios(points, base, confidence, difference)
    best = _best(points, ratios, base, difference)
    # Stability of an overlap percentage is that of the timing behind it (overall_us).
    watched = "overall_us" if difference else column
    observed = [_observed(g, watched) for g in groups]
    warnings = stability.check(observed, column, confidence, _cores(store))
    if missing:
        warnings.append(stability.StabilityWarning(
            "; ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8
                                      else ""),
            f"baseline {base} not measured there: no ratios", "measure the baseline too, or "
            "pick another --baseline"))
    if left_out:
        warnings.append(stability.StabilityWarning(
            f"{left_out} simulated rows", f"{column} not modelled (SimGrid does not model MPI "
            "progress): left out", "compare overall_us or pure_us of simulated rows"))
    reps = max(p.n for p in points)
    notice = stability.repetition_notice(observed, confidence, reps)
    return Comparison(column, base, confidence, reps, tuple(points), tuple(ratios),
                      tuple(best), tuple(_ranges(best)), tuple(warnings), notice,
                      "difference" if difference else "ratio", chosen.column)


def _modelled(store: Store, rows: list[dict[str, Any]], column: str
              ) -> tuple[list[dict[str, Any]], int]:
    """The rows whose `column` means something, and how many simulated ones were left out;
    one line when none is left."""
    if column not in NOT_MODELLED:
        return rows, 0
    kept = [r for r in rows if r.get("backend") not in stability.SIMULATED]
    if not kept:
        raise UserError(f"{store.root}: {column} is not modelled under SimGrid (it does not "
                        "model MPI progress, so every simulated overlap reads 100 %); valid: "
                        "--stat overall, pure or avg, which SimGrid simulates")
    return kept, len(rows) - len(kept)


def _row_label(row: dict[str, Any]) -> str:
    return algorithm_label(str(row["algorithm"]), int(row["segsize"] or 0),
                           int(row["fanout"] or 0), row.get("component"))


def _cores(store: Store) -> int | None:
    try:
        cores = store.provenance().get("cores")
    except UserError:
        return None
    return cores if isinstance(cores, int) and cores > 0 else None


# --- statistics per point, ratio, best --------------------------------------------------
def _point(group: door.Point, confidence: float) -> PointStat | None:
    if not group.values:
        return None
    ident = dict(zip(door.IDENTITY, group.key, strict=True))
    values = group.values
    ok = [r for r in group.rows if r["status"] == "ok"]
    ci = median_ci(values, confidence)
    mins = [float(r["min_us"]) for r in ok if r["min_us"] is not None]
    maxs = [float(r["max_us"]) for r in ok if r["max_us"] is not None]
    return PointStat(ident["collective"], ident["nprocs"], ident["nodes"], ident["ppn"],
                     ident["mapping"], ident["binding"], ident["context"],
                     str(ident["algorithm"]), ident["segsize"], ident["fanout"],
                     ident["size_bytes"], n=len(values), value=median(values),
                     ci_low=ci.low if ci else None, ci_high=ci.high if ci else None,
                     values=values, min_us=min(mins) if mins else None,
                     max_us=max(maxs) if maxs else None,
                     ci_coverage=ci.coverage if ci else None,
                     component=str(ident["component"]))


def _order(p: PointStat) -> tuple[Any, ...]:
    return (p.collective, p.nprocs, p.nodes or 0, p.ppn or 0, p.mapping or "", p.binding or "",
            p.params or "", p.size_bytes)


def _resolve_baseline(baseline: str, points: Sequence[PointStat],
                      rows: Sequence[dict[str, Any]] = ()) -> str:
    labels = sorted({p.label for p in points})
    if baseline in labels:
        return baseline
    variants = sorted({p.label for p in points if p.algorithm == baseline})
    if len(variants) == 1:
        return variants[0]
    if variants:
        raise UserError(f"collbench compare: --baseline {baseline!r} is ambiguous; give one of "
                        f"{', '.join(variants)}")
    present = dict(dimensions.choices(rows), algorithm=labels)
    raise UserError(f"collbench compare: --baseline {baseline!r} was not measured here; "
                    f"valid: {dimensions.valid_text(present)}"
                    f"{did_you_mean(baseline, labels)}")


def _by_size(points: Sequence[PointStat]) -> dict[SizeKey, list[PointStat]]:
    out: dict[SizeKey, list[PointStat]] = {}
    for p in points:
        out.setdefault(p.size_key, []).append(p)
    return out


def _ratios(points: Sequence[PointStat], base: str, confidence: float,
            difference: bool = False) -> tuple[list[RatioStat], list[str]]:
    """Every point against the baseline at its size: the ratio value / baseline with its
    log-scale Moses interval, or (difference) value - baseline with the plain one."""
    out: list[RatioStat] = []
    missing: list[str] = []
    alpha = 1 - confidence
    for key, pts in _by_size(points).items():
        ref = next((p for p in pts if p.label == base), None)
        if ref is None:
            missing.append(f"{block_title(*key[:7])} size {key[7]}")
            continue
        if ref.value <= 0 and not difference:
            continue
        tested = []
        for p in pts:
            if p is ref:
                continue
            testable = p.n >= 2 and ref.n >= 2
            p_raw = mann_whitney(p.values, ref.values).p_value if testable else None
            hl = ((shift_ci if difference else log_ratio_ci)(p.values, ref.values, confidence)
                  if testable else None)
            tested.append((p, p_raw, hl[1] if hl else None))
        raw = [t[1] for t in tested if t[1] is not None]
        adjusted = iter(holm(raw))
        for p, p_raw, ci in tested:
            p_adj = next(adjusted) if p_raw is not None else None
            none = 0.0 if difference else 1.0  # the effect of "no difference"
            significant = (None if p_adj is None else
                           p_adj < alpha and ci is not None and (ci.high < none
                                                                 or ci.low > none))
            effect = p.value - ref.value if difference else p.value / ref.value
            out.append(RatioStat(p, ref, effect, ci.low if ci else None,
                                 ci.high if ci else None, p_adj, significant, p_raw,
                                 ci.coverage if ci else None))
    return out, missing


def _best(points: Sequence[PointStat], ratios: Sequence[RatioStat], base: str,
          difference: bool = False) -> list[Best]:
    """The winner per size: the lowest time, or (difference: overlap) the highest value."""
    by_point = {id(r.point): r for r in ratios}
    sign = -1.0 if difference else 1.0
    out = []
    for key, pts in _by_size(points).items():
        winner = min(pts, key=lambda p: (sign * p.value, p.label != base, p.label))
        ref = next((p for p in pts if p.label == base), None)
        r = by_point.get(id(winner))
        if ref is None:
            out.append(Best(key, winner, None, None, winner.label, "no baseline measured"))
        elif winner is ref:
            out.append(Best(key, winner, 0.0 if difference else 1.0, None, base))
        elif r is None or r.significant is None:
            out.append(Best(key, winner, r.ratio if r else None, None, winner.label,
                            "untested: fewer than 2 repetitions"))
        elif r.significant:
            out.append(Best(key, winner, r.ratio, True, winner.label))
        else:
            faster = [x for x in ratios if x.baseline is ref and x.significant
                      and (x.ratio > 0 if difference else x.ratio < 1)]
            if faster:
                alt = min(faster, key=lambda x: sign * x.point.value).point.label
                word = "better" if difference else "faster"
                note = f"{winner.label} not significantly {word} than {base}; {alt} is"
                out.append(Best(key, winner, r.ratio, False, alt, note))
            else:
                out.append(Best(key, winner, r.ratio, False, base, "no significant difference"))
    return out


def _ranges(best: Sequence[Best]) -> list[WinRange]:
    """Adjacent measured sizes with the same recommendation, merged, per context."""
    by_context: dict[tuple[Any, ...], list[Best]] = {}
    for b in best:
        by_context.setdefault(b.key[:7], []).append(b)
    out: list[WinRange] = []
    for (coll, np_, nodes, ppn, mapping, binding, params), bs in by_context.items():
        ordered = sorted(bs, key=lambda b: b.key[7])
        # "baseline is fastest" and "nothing beats the baseline significantly" recommend
        # the same thing: one range, marked as a fallback if any size in it is one.
        for label, run_ in groupby(ordered, key=lambda b: b.recommended):
            run = list(run_)
            out.append(WinRange(coll, np_, mapping, params, label, run[0].key[7],
                                run[-1].key[7], nodes, ppn, binding,
                                any(_fallback(b) for b in run)))
    return out


def _fallback(b: Best) -> bool:
    return b.note == "no significant difference"


def _observed(group: door.Point, column: str) -> stability.Observed:
    ident = dict(zip(door.IDENTITY, group.key, strict=True))
    ok = [r for r in group.rows if r["status"] == "ok" and r[column] is not None]
    title = block_title(ident["collective"], ident["nprocs"], ident["nodes"], ident["ppn"],
                        ident["mapping"], ident["binding"], ident["context"])
    return stability.Observed(
        block=title, label=algorithm_label(ident["algorithm"], ident["segsize"],
                                           ident["fanout"], ident["component"]),
        size_bytes=ident["size_bytes"], nprocs=ident["nprocs"], nodes=ident["nodes"],
        ppn=ident["ppn"], values=tuple(float(r[column]) for r in ok), rows=group.rows)
