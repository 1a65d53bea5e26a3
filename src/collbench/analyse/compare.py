"""`collbench compare`: every algorithm against a baseline, with statistics over repetitions.

A point is (collective, nprocs, nodes, ppn, mapping, binding, params, algorithm, segsize,
fanout, size). Its value is the median over ok repetitions of one statistic column; the
baseline is compared within the same context and size. Methods: docs/statistics.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from itertools import groupby
from typing import Any, Final

from collbench.analyse import nonblocking, stability
from collbench.analyse.stats import holm, log_ratio_ci, mann_whitney, median, median_ci, shift_ci
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.errors import UserError, choice_error, did_you_mean
from collbench.store import Store

STATS: Final = {"avg": "avg_us", "median": "median_us", "min": "min_us", "max": "max_us"}
# `compare --stat` also takes the non-blocking figures (from metrics; docs/statistics.md).
COMPARE_STATS: Final = {**STATS, **nonblocking.METRIC_STATS}
KEY_FIELDS: Final = ("collective", "nprocs", "nodes", "ppn", "mapping", "binding", "params",
                     "size_bytes")
_ROW_COLUMNS: Final = ("collective", "nprocs", "nodes", "ppn", "mapping", "binding", "params",
                       "algorithm", "segsize", "fanout", "size_bytes", "repetition",
                       "launch_id", "iterations", "status", "avg_us", "min_us", "max_us",
                       "median_us", "error", "metrics")
# Launch parameters that only force the algorithm (the algorithm columns already say which):
# dropped from `params` so that forced launches and the default share one context.

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

    @property
    def label(self) -> str:
        return algorithm_label(self.algorithm, self.segsize, self.fanout)

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
    stat: str  # the column compared: avg_us, median_us, min_us or max_us
    baseline: str
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

    def to_json(self) -> dict[str, Any]:
        def point(p: PointStat) -> dict[str, Any]:
            return dict(asdict(p), label=p.label, values=list(p.values))

        return {
            "stat": self.stat, "effect": self.effect, "baseline": self.baseline,
            "confidence": self.confidence,
            "repetitions": self.repetitions, "notice": self.notice, "method": METHOD,
            "points": [point(p) for p in self.points],
            "ratios": [dict(asdict(r), point=point(r.point), baseline=point(r.baseline))
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
    "test": "exact two-sided Mann-Whitney U (permutation distribution with ties)",
    "multiple_comparisons": "Holm within each size (all algorithms against the baseline)",
    "significant": "Holm-adjusted p < 1 - confidence and the ratio CI excludes 1",
    "recommended": "fastest algorithm significantly faster than the baseline, else the "
                   "baseline; with a single repetition, the fastest (untested)",
}


def algorithm_label(algorithm: str, segsize: int, fanout: int) -> str:
    """'pipeline[seg=8192]', 'chain[seg=8192,fanout=4]', 'binomial'."""
    extras = ([f"seg={segsize}"] if segsize else []) + ([f"fanout={fanout}"] if fanout else [])
    return algorithm + (f"[{','.join(extras)}]" if extras else "")


def block_title(collective: str, nprocs: int, nodes: int | None, ppn: int | None,
                mapping: str | None, binding: str | None, params: str | None) -> str:
    """'bcast np=4 map-by=core bind-to=core' (+ nodes and params where they say something)."""
    parts = [collective, f"np={nprocs}"]
    if nodes and nodes > 1:
        parts.append(f"nodes={nodes} ppn={ppn}")
    parts += [f"map-by={mapping}"] if mapping else []
    parts += [f"bind-to={binding}"] if binding else []
    parts += [f"params={params}"] if params else []
    return " ".join(parts)


def compare(store: Store, baseline: str = "default", stat: str = "avg",
            collective: str | None = None, nprocs: int | None = None,
            confidence: float = 0.95) -> Comparison:
    if stat not in COMPARE_STATS:
        raise choice_error("collbench compare", "--stat", stat, COMPARE_STATS)
    if not 0 < confidence < 1:
        raise UserError(f"collbench compare: --confidence {confidence:g} is not valid; "
                        "valid: a number between 0 and 1, such as 0.95")
    column = COMPARE_STATS[stat]
    difference = stat in nonblocking.DIFFERENCE_STATS
    groups = _group(_fetch(store, collective, nprocs))
    points = [p for key, rows in groups.items()
              if (p := _point(key, rows, column, confidence)) is not None]
    if not points:
        statuses = sorted({str(r["status"]) for rows in groups.values() for r in rows})
        what = (f"{column} (a non-blocking figure: only rows of ibcast, iallgather, ... "
                "have it)" if stat in nonblocking.METRIC_STATS else column)
        raise UserError(f"{store.root}: no ok measurements with {what} to compare "
                        f"(statuses present: {', '.join(statuses)}); see collbench show")
    base = _resolve_baseline(baseline, points)
    points.sort(key=lambda p: (*_order(p), p.label != base, p.label))
    ratios, missing = _ratios(points, base, confidence, difference)
    best = _best(points, ratios, base, difference)
    # Stability of an overlap percentage is that of the timing behind it (overall_us).
    watched = "overall_us" if difference else column
    observed = [_observed(key, rows, watched) for key, rows in groups.items()]
    warnings = stability.check(observed, column, confidence, _cores(store))
    if missing:
        warnings.append(stability.StabilityWarning(
            "; ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8
                                      else ""),
            f"baseline {base} not measured there: no ratios", "measure the baseline too, or "
            "pick another --baseline"))
    reps = max(p.n for p in points)
    notice = (stability.REPETITION_NOTICE.format(
        needed=stability.repetitions_needed(observed, confidence)) if reps == 1 else None)
    return Comparison(column, base, confidence, reps, tuple(points), tuple(ratios),
                      tuple(best), tuple(_ranges(best)), tuple(warnings), notice,
                      "difference" if difference else "ratio")


# --- reading --------------------------------------------------------------------------
PointKey = tuple[str, int, int | None, int | None, str | None, str | None, str | None, str,
                 int, int, int]


def _fetch(store: Store, collective: str | None, nprocs: int | None) -> list[dict[str, Any]]:
    con = store.connect()
    try:
        rows = _select(con, collective, nprocs)
        if not rows:
            _explain_empty(store, con, collective, nprocs)
        return rows
    finally:
        con.close()


def _select(con: Any, collective: str | None, nprocs: int | None) -> list[dict[str, Any]]:
    clauses, args = [], []
    for col, val in (("collective", collective), ("nprocs", nprocs)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    cur = con.execute(f"SELECT {', '.join(_ROW_COLUMNS)} FROM measurements{where}", args)
    rows = [dict(zip(_ROW_COLUMNS, r, strict=True)) for r in cur.fetchall()]
    for r in rows:  # the non-blocking figures as columns of their own
        metrics = nonblocking.parse_metrics(r["metrics"])
        r.update({col: nonblocking.figure(metrics, col)
                  for col in (*nonblocking.METRIC_STATS.values(), "overall_us")})
    return rows


def _explain_empty(store: Store, con: Any, collective: str | None, nprocs: int | None) -> None:
    present = con.execute("SELECT DISTINCT collective, nprocs FROM measurements").fetchall()
    if not present:
        raise UserError(f"{store.root}: no measurements stored yet; run `collbench run` "
                        "(or `--resume` an interrupted campaign) first")
    colls = sorted({str(c) for c, _ in present})
    if collective is not None and collective not in colls:
        raise UserError(f"{store.root}: no measurements of collective {collective!r}; "
                        f"present: {', '.join(colls)}{did_you_mean(collective, colls)}")
    counts = sorted({int(n) for c, n in present if collective in (None, c)})
    raise UserError(f"{store.root}: no measurements with nprocs={nprocs}"
                    f"{' of ' + collective if collective else ''}; present: "
                    f"{', '.join(map(str, counts))}")


def context_params(params: str | None, metrics: str | None = None) -> str | None:
    """The params that set a point's context: without forcing keys, with a non-blocking
    point's settings (test_calls, compute: from `metrics`) under "nonblocking"."""
    nb = nonblocking.setting(nonblocking.parse_metrics(metrics))
    if nb:
        base = context_params(params)
        data = json.loads(base) if base and base.startswith("{") else {}
        if base and not data:
            data = {"params": base}
        return json.dumps(dict(data, nonblocking=nb), sort_keys=True)
    if not params:
        return None
    try:
        data = json.loads(params)
    except ValueError:
        return params
    if not isinstance(data, dict):
        return params
    mca = {k: v for k, v in (data.get("mca") or {}).items() if not is_forcing_mca(k)}
    env = {k: v for k, v in (data.get("env") or {}).items() if not is_forcing_env(k)}
    rest = {k: v for k, v in data.items() if k not in ("mca", "env") and v}
    kept = dict(rest, **({"mca": mca} if mca else {}), **({"env": env} if env else {}))
    return json.dumps(kept, sort_keys=True) if kept else None


def _group(rows: Sequence[dict[str, Any]]) -> dict[PointKey, list[dict[str, Any]]]:
    out: dict[PointKey, list[dict[str, Any]]] = {}
    for r in rows:
        key: PointKey = (str(r["collective"]), int(r["nprocs"] or 0), r["nodes"], r["ppn"],
                         r["mapping"], r["binding"],
                         context_params(r["params"], r.get("metrics")),
                         str(r["algorithm"]), int(r["segsize"] or 0), int(r["fanout"] or 0),
                         int(r["size_bytes"] or 0))
        out.setdefault(key, []).append(r)
    return out


def _cores(store: Store) -> int | None:
    try:
        cores = store.provenance().get("cores")
    except UserError:
        return None
    return cores if isinstance(cores, int) and cores > 0 else None


# --- statistics per point, ratio, best --------------------------------------------------
def _point(key: PointKey, rows: Sequence[dict[str, Any]], column: str,
           confidence: float) -> PointStat | None:
    ok = [r for r in rows if r["status"] == "ok" and r[column] is not None]
    if not ok:
        return None
    ok.sort(key=lambda r: (r["repetition"] is None, r["repetition"] or 0, r["launch_id"] or ""))
    values = tuple(float(r[column]) for r in ok)
    ci = median_ci(values, confidence)
    mins = [float(r["min_us"]) for r in ok if r["min_us"] is not None]
    maxs = [float(r["max_us"]) for r in ok if r["max_us"] is not None]
    return PointStat(*key, n=len(values), value=median(values),
                     ci_low=ci.low if ci else None, ci_high=ci.high if ci else None,
                     values=values, min_us=min(mins) if mins else None,
                     max_us=max(maxs) if maxs else None,
                     ci_coverage=ci.coverage if ci else None)


def _order(p: PointStat) -> tuple[Any, ...]:
    return (p.collective, p.nprocs, p.nodes or 0, p.ppn or 0, p.mapping or "", p.binding or "",
            p.params or "", p.size_bytes)


def _resolve_baseline(baseline: str, points: Sequence[PointStat]) -> str:
    labels = sorted({p.label for p in points})
    if baseline in labels:
        return baseline
    variants = sorted({p.label for p in points if p.algorithm == baseline})
    if len(variants) == 1:
        return variants[0]
    if variants:
        raise UserError(f"collbench compare: --baseline {baseline!r} is ambiguous; give one of "
                        f"{', '.join(variants)}")
    raise UserError(f"collbench compare: --baseline {baseline!r} was not measured here; "
                    f"algorithms present: {', '.join(labels)}{did_you_mean(baseline, labels)}")


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


def _observed(key: PointKey, rows: Sequence[dict[str, Any]],
              column: str) -> stability.Observed:
    ok = sorted((r for r in rows if r["status"] == "ok" and r[column] is not None),
                key=lambda r: (r["repetition"] or 0, r["launch_id"] or ""))
    return stability.Observed(
        block=block_title(*key[:7]), label=algorithm_label(key[7], key[8], key[9]),
        size_bytes=key[10], nprocs=key[1], nodes=key[2], ppn=key[3],
        values=tuple(float(r[column]) for r in ok), rows=tuple(rows))
