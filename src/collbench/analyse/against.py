"""`collbench compare A --against B`: how far one source is from another.

A and B are any two results folders (measured, ingested, simulated, predicted by
`collbench model predict`); B may also be a `.p2p.toml` model, predicted here at every
point of A. A is the reference: per point the ratio B/A and the absolute error |B − A|/A;
per (collective, algorithm) the median and p95 of those errors; per (collective, nprocs,
mapping, size) whether both pick the same best algorithm and the selection penalty (A's
latency of B's choice over A's best); the sizes where the best algorithm changes, and
where those crossovers moved. Points are paired on (collective, algorithm label, nprocs,
mapping, size); each side's value is the median over its ok repetitions of one statistic.
"default" is compared as a point but takes no part in selection (it is one of the others).
The measures themselves are `collbench.models.accuracy`.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from collbench.analyse.compare import block_title
from collbench.analyse.modeldata import (
    CollectiveRow,
    collective_rows,
    machine_shape,
    pingpong_level,
)
from collbench.errors import UserError
from collbench.models import accuracy
from collbench.models.accuracy import (
    CrossoverShift,
    ErrorSummary,
    Key,
    Paired,
    PointError,
    Selection,
)
from collbench.models.networks import DEFAULT_NETWORK, NETWORKS, Network
from collbench.models.p2p import P2PModel
from collbench.models.predict import (
    DEFAULT,
    MAX_US,
    beyond,
    modelled,
    predict_point,
    topology,
    unbounded,
)
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import csv_table

FORMATS: Final = ("table", "csv", "json", "markdown")
POINT_COLUMNS: Final = ("collective", "algorithm", "nprocs", "mapping", "size_bytes", "a_us",
                        "b_us", "ratio", "abs_pct")


@dataclass(frozen=True)
class AlgorithmError:
    collective: str
    algorithm: str
    points: int
    median_abs_pct: float
    p95_abs_pct: float
    median_ratio: float


# Message-size bands the errors are also summarised over (inclusive bounds, bytes): where
# small-message overheads, mid-size protocols and bandwidth each dominate.
BANDS: Final = (("<= 1 KiB", 0, 1024), ("1-64 KiB", 1025, 65535), (">= 64 KiB", 65536, None))


def band_of(size: int) -> str:
    return next(name for name, lo, hi in BANDS if size >= lo and (hi is None or size <= hi))


@dataclass(frozen=True)
class BandError:
    collective: str  # "" = every collective and algorithm
    algorithm: str
    band: str
    points: int
    median_abs_pct: float
    p95_abs_pct: float


@dataclass(frozen=True)
class Against:
    a: str
    b: str
    stat: str
    points: tuple[PointError, ...]
    overall: ErrorSummary
    algorithms: tuple[AlgorithmError, ...]
    selections: tuple[Selection, ...]
    same_fraction: float | None
    penalty: ErrorSummary | None  # % slower than A's best, over configurations
    shifts: tuple[CrossoverShift, ...]
    only_a: int
    only_b: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Paired points where A is 0 µs: B's error is undefined (not in any error figure).
    undefined: tuple[Paired, ...] = ()
    bands: tuple[BandError, ...] = ()  # per (collective, algorithm, band), then overall

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "stat": self.stat, "only_a": self.only_a,
            "only_b": self.only_b, "overall": asdict(self.overall),
            "zero_a": [_undefined_row(p) for p in self.undefined],
            "zero_b": len(self.zero_b()),
            "algorithms": [asdict(x) for x in self.algorithms],
            "bands": [asdict(x) for x in self.bands],
            "selection": {"configurations": len(self.selections),
                          "same_fraction": self.same_fraction,
                          "penalty_pct": asdict(self.penalty) if self.penalty else None,
                          "per_size": [asdict(s) for s in self.selections]},
            "crossovers": [asdict(c) for c in self.shifts],
            "points": [_point_row(p) for p in self.points],
            "notes": list(self.notes),
            "method": METHOD,
        }

    def zero_b(self) -> list[PointError]:
        """Points where B is 0 µs and A is not: an error of exactly 100 %."""
        return [p for p in self.points if p.predicted_us == 0]


METHOD: Final = {
    "reference": "A; B is judged against it",
    "value": "median over ok repetitions of the statistic (avg_us: OSU's average over ranks)",
    "ratio": "B / A per point",
    "abs_pct": "|B - A| / A * 100 per point (100 where B is 0 us; undefined where A is 0 "
               "us: such points are listed in zero_a and left out of every error figure)",
    "per_algorithm": "median and 95th percentile of abs_pct over the algorithm's points",
    "bands": "the same per size band: <= 1 KiB, 1025 B - 64 KiB - 1, >= 64 KiB (per "
             "algorithm, and over every point: collective and algorithm empty)",
    "selection": "per collective, nprocs, mapping and size with >= 2 forced algorithms on "
                 "both sides: the best of A, the best of B, same or not",
    "penalty": "A's latency of B's best / A's best - 1, in % (the regret of choosing by B)",
    "crossover": "first size where A's best algorithm changes; where B's same change is "
                 "(nearest in log size), and the factor between the two",
}


def _values(rows: Sequence[CollectiveRow], where: str) -> dict[Key, float]:
    out: dict[Key, float] = {}
    seen: dict[Key, CollectiveRow] = {}
    for r in rows:
        key = Key(r.collective, r.label, r.nprocs, r.mapping or "", r.size_bytes)
        if key in out:
            other = seen[key]
            context = block_title(r.collective, r.nprocs, r.nodes, r.ppn, r.mapping, None, None)
            raise UserError(
                f"{where}: {context} {r.label} size {r.size_bytes} was measured in more "
                f"than one context (nodes/ppn {other.nodes}/{other.ppn} and "
                f"{r.nodes}/{r.ppn}, or several MCA settings); valid: one per point: "
                "narrow with --collective/--nprocs")
        out[key] = r.value_us
        seen[key] = r
    return out


def read_points(store: Store, stat: str = "avg", collective: str | None = None,
                nprocs: int | None = None) -> dict[Key, float]:
    """Per point (collective, label, nprocs, mapping, size): the median of `stat`."""
    rows = [r for r in collective_rows(store, stat, collective, pingpong=True, zero=True)
            if nprocs is None or r.nprocs == nprocs]
    return _values(rows, str(store.root))


def predicted_points(store: Store, model: P2PModel, stat: str = "avg",
                     collective: str | None = None, nprocs: int | None = None,
                     net: Network = NETWORKS[DEFAULT_NETWORK], where: str = "p2p model"
                     ) -> tuple[dict[Key, float], list[str]]:
    """The model's prediction at every modelled point of the folder (its placement, the
    machine shape of its provenance or SimGrid platform; messages as `net` says).

    A prediction that is not a time (not finite, or beyond predict.MAX_US) is a one-line
    UserError: leaving the point out would hide the model's worst error from the measures
    of how wrong it is."""
    shape = machine_shape(store)
    rows = [r for r in collective_rows(store, stat, collective, pingpong=True, zero=True)
            if nprocs is None or r.nprocs == nprocs]
    out: dict[Key, float] = {}
    skipped: set[str] = set()
    for r in rows:
        if r.collective == "latency" and r.nprocs == 2:  # the ping-pong itself
            level = pingpong_level(r.mapping, r.nodes, r.ppn, str(store.root))
            if level is not None:
                key = Key(r.collective, r.label, 2, r.mapping or "", r.size_bytes)
                out[key] = _bounded(model.time_us(level, r.size_bytes), key, where)
            continue
        if not modelled(r.collective, r.algorithm):
            skipped.add(f"{r.collective}/{r.label}")
            continue
        topo = topology(r.nprocs, r.nodes, r.ppn, r.mapping, shape, str(store.root))
        try:  # a forced segment size or fanout is the schedule's own parameter
            avg, lo, hi = predict_point(model, topo, r.collective, r.algorithm, r.size_bytes,
                                        segsize=r.segsize, fanout=r.fanout, net=net)
        except UserError as e:
            if "level" in str(e):
                raise
            skipped.add(f"{r.collective}/{r.label}")
            continue
        value = {"avg": avg, "median": avg, "min": lo, "max": hi}[stat]
        key = Key(r.collective, r.label, r.nprocs, r.mapping or "", r.size_bytes)
        out[key] = _bounded(value, key, where)
    notes = [f"not modelled, left out: {', '.join(sorted(skipped))}"] if skipped else []
    return out, notes


def _bounded(value: float, key: Key, where: str) -> float:
    if unbounded(value) is not None:
        raise UserError(f"{where}: {key.collective} {key.algorithm} np={key.nprocs} "
                        f"{key.mapping or '-'} size {key.size_bytes}: predicted "
                        f"{beyond(value)}; valid: a model whose predictions are times of "
                        f"at most {MAX_US:g} us")
    return value


def against(a: dict[Key, float], b: dict[Key, float], a_name: str, b_name: str,
            stat: str = "avg", notes: Sequence[str] = ()) -> Against:
    """Pair the two sides and measure B against A (module docstring)."""
    common = sorted(set(a) & set(b))
    if not common:
        raise UserError(f"{a_name} and {b_name} have no point in common (collective, "
                        "algorithm, nprocs, mapping, size); valid: two sources of the same "
                        "configurations" + _hint(a, b))
    paired = [Paired(k, a[k], b[k]) for k in common if a[k] > 0 and b[k] > 0]
    # A 0 µs value is a value: where only B is 0 its error is 100 %; where A is 0 the
    # error is undefined. Both are counted and named, never taken for "only in A".
    zero_b = [PointError(k, a[k], b[k], 0.0, 100.0) for k in common if a[k] > 0 and b[k] <= 0]
    undefined = tuple(Paired(k, a[k], b[k]) for k in common if a[k] <= 0)
    errors = sorted([*accuracy.point_errors(paired), *zero_b], key=lambda e: e.key)
    if not errors:
        raise UserError(f"{a_name}: every point it shares with {b_name} is 0 us, so no error "
                        "can be computed; valid: a reference with times > 0 us")
    notes = list(notes)
    zero_configs = {_config(e.key) for e in zero_b} | {_config(p.key) for p in undefined}
    if zero_configs:
        left = {_config(p.key) for p in paired if p.key.algorithm != DEFAULT} & zero_configs
        if left:
            notes.append(f"{len(left)} configurations with a 0 us value left out of the "
                         "best-algorithm measures (a 0 us time has no meaningful ranking)")
        paired = [p for p in paired if _config(p.key) not in zero_configs]
    groups: dict[tuple[str, str], list[PointError]] = {}
    for e in errors:
        groups.setdefault((e.key.collective, e.key.algorithm), []).append(e)
    algs = tuple(AlgorithmError(c, alg, len(es), s.median_abs_pct, s.p95_abs_pct,
                                statistics.median(e.ratio for e in es))
                 for (c, alg), es in sorted(groups.items())
                 for s in [accuracy.summarize([e.abs_pct for e in es])])
    forced = [p for p in paired if p.key.algorithm != DEFAULT]
    sel = accuracy.selections(forced)
    same, penalty = None, None
    if sel:
        same, penalty = accuracy.selection_summary(forced)
    shifts = accuracy.crossover_shifts(forced) if sel else []
    return Against(a_name, b_name, stat, tuple(errors),
                   accuracy.summarize([e.abs_pct for e in errors]), algs, tuple(sel), same,
                   penalty, tuple(shifts), len(set(a) - set(b)), len(set(b) - set(a)),
                   tuple(notes), undefined, _bands(errors))


def _bands(errors: Sequence[PointError]) -> tuple[BandError, ...]:
    groups: dict[tuple[str, str, str], list[float]] = {}
    for e in errors:
        band = band_of(e.key.size_bytes)
        groups.setdefault((e.key.collective, e.key.algorithm, band), []).append(e.abs_pct)
        groups.setdefault(("", "", band), []).append(e.abs_pct)
    order = {name: i for i, (name, _, _) in enumerate(BANDS)}
    keys = sorted(groups, key=lambda k: (k[0] == "", k[0], k[1], order[k[2]]))
    return tuple(BandError(c, alg, band, s.points, s.median_abs_pct, s.p95_abs_pct)
                 for c, alg, band in keys
                 for s in [accuracy.summarize(groups[(c, alg, band)])])


def _config(k: Key) -> tuple[str, int, str, int]:
    return (k.collective, k.nprocs, k.mapping, k.size_bytes)


def _hint(a: dict[Key, float], b: dict[Key, float]) -> str:
    def show(side: dict[Key, float]) -> str:
        colls = sorted({k.collective for k in side})
        counts = sorted({k.nprocs for k in side})
        maps = sorted({k.mapping or "-" for k in side})
        return f"collectives {','.join(colls)}; np {','.join(map(str, counts))}; " \
               f"map-by {','.join(maps)}"
    return f" (A: {show(a)}; B: {show(b)})"


# --- rendering ------------------------------------------------------------------------------

def _undefined_row(p: Paired) -> dict[str, Any]:
    """A point where A is 0 µs: its values, no ratio or error (undefined)."""
    return {"collective": p.key.collective, "algorithm": p.key.algorithm,
            "nprocs": p.key.nprocs, "mapping": p.key.mapping, "size_bytes": p.key.size_bytes,
            "a_us": p.measured_us, "b_us": p.predicted_us, "ratio": None, "abs_pct": None}


def _point_row(p: PointError) -> dict[str, Any]:
    return {"collective": p.key.collective, "algorithm": p.key.algorithm,
            "nprocs": p.key.nprocs, "mapping": p.key.mapping, "size_bytes": p.key.size_bytes,
            "a_us": p.measured_us, "b_us": p.predicted_us, "ratio": p.ratio,
            "abs_pct": p.abs_pct}


def render(r: Against, fmt: str, worst: int = 10) -> str:
    if fmt == "json":
        return json.dumps(r.to_json(), indent=1) + "\n"
    if fmt == "csv":
        return csv_table([*map(_point_row, r.points), *map(_undefined_row, r.undefined)],
                         POINT_COLUMNS) + "\n"
    md = fmt == "markdown"
    from collbench.analyse.render import text_or_markdown_table as tbl

    out = [("# " if md else "") + f"{r.b} against {r.a} (reference), {r.stat}", ""]
    out += [f"- {line}" if md else line for line in summary_lines(r)]
    out += ["", ("## " if md else "") + "Error per algorithm (absolute %, B against A)", ""]
    out.append(tbl([{"collective": x.collective, "algorithm": x.algorithm,
                     "points": x.points, "median %": _f(x.median_abs_pct),
                     "p95 %": _f(x.p95_abs_pct), "median B/A": f"{x.median_ratio:.3f}"}
                    for x in r.algorithms],
                   ("collective", "algorithm", "points", "median %", "p95 %", "median B/A"),
                   md))
    if r.bands:
        out += ["", ("## " if md else "") + "Error per size band (absolute %, median / p95, "
                "points)", ""]
        out.append(tbl(_band_rows(r.bands), ("collective", "algorithm",
                                             *(name for name, _, _ in BANDS)), md))
    if r.selections:
        out += ["", ("## " if md else "") + "Best algorithm per configuration", ""]
        out.append(tbl(_selection_rows(r.selections),
                       ("context", "sizes", "same best", "penalty median %", "penalty max %",
                        "sizes where B picks otherwise"), md))
    if r.shifts:
        out += ["", ("## " if md else "") + "Crossovers (A's best changes; where B's does)",
                ""]
        out.append(tbl([{"context": block_title(c.measured.collective, c.measured.nprocs,
                                                None, None, c.measured.mapping or None, None,
                                                None),
                         "change": f"{c.measured.before} -> {c.measured.after}",
                         "A at": format_size(c.measured.at_bytes),
                         "B at": format_size(c.predicted_at_bytes)
                         if c.predicted_at_bytes is not None else "never",
                         "factor": f"{c.factor:.3g}" if c.factor else "-"}
                        for c in r.shifts],
                       ("context", "change", "A at", "B at", "factor"), md))
    if worst and r.points:
        out += ["", ("## " if md else "") + f"Largest errors (of {len(r.points)} points; "
                "all with --format csv)", ""]
        rows = sorted(r.points, key=lambda p: -p.abs_pct)[:worst]
        out.append(tbl([dict(_point_row(p), size=format_size(p.key.size_bytes),
                             a_us=f"{p.measured_us:.4g}", b_us=f"{p.predicted_us:.4g}",
                             ratio=f"{p.ratio:.3f}", abs_pct=_f(p.abs_pct)) for p in rows],
                       ("collective", "algorithm", "nprocs", "mapping", "size", "a_us", "b_us",
                        "ratio", "abs_pct"), md))
    zeros = [*map(_undefined_row, r.undefined), *map(_point_row, r.zero_b())]
    if zeros:
        out += ["", ("## " if md else "") + f"Points with a 0 us value ({len(zeros)}; all "
                "with --format csv)", ""]
        out.append(tbl([dict(z, size=format_size(z["size_bytes"]), a_us=f"{z['a_us']:.4g}",
                             b_us=f"{z['b_us']:.4g}",
                             error="undefined (A = 0)" if z["abs_pct"] is None else "100 %")
                        for z in zeros[:worst or len(zeros)]],
                       ("collective", "algorithm", "nprocs", "mapping", "size", "a_us", "b_us",
                        "error"), md))
    if r.notes:
        out += [""] + [f"note: {n}" for n in r.notes]
    return "\n".join(out).rstrip() + "\n"


def _band_rows(bands: Sequence[BandError]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for b in bands:
        row = rows.setdefault((b.collective, b.algorithm), {
            "collective": b.collective or "all", "algorithm": b.algorithm or "all",
            **{name: "-" for name, _, _ in BANDS}})
        row[b.band] = _band_cell(b)
    return list(rows.values())


def _band_cell(b: BandError) -> str:
    return f"{_f(b.median_abs_pct)} / {_f(b.p95_abs_pct)} ({b.points})"


def summary_lines(r: Against) -> list[str]:
    zero_b = len(r.zero_b())
    zeros = ([f"{len(r.undefined)} with A = 0 us: error undefined, left out of the error "
              "figures"] if r.undefined else []) + \
        ([f"{zero_b} with B = 0 us: error 100 %"] if zero_b else [])
    lines = [f"{len(r.points) + len(r.undefined)} paired points ({r.only_a} only in A, "
             f"{r.only_b} only in B" + "".join(f"; {z}" for z in zeros) + ")",
             f"absolute error of B: median {_f(r.overall.median_abs_pct)} %, "
             f"p95 {_f(r.overall.p95_abs_pct)} %"]
    overall = [b for b in r.bands if not b.collective]
    if overall:
        lines.append("per size band, median / p95 % (points): " + "; ".join(
            f"{b.band} {_band_cell(b)}" for b in overall))
    if r.penalty is not None and r.same_fraction is not None:
        lines.append(f"same best algorithm at {r.same_fraction * 100:.1f} % of "
                     f"{len(r.selections)} configurations; selection penalty (the regret of "
                     "choosing by B: A's latency of B's choice / A's best - 1): median "
                     f"{_f(r.penalty.median_abs_pct)} "
                     f"%, p95 {_f(r.penalty.p95_abs_pct)} %, max "
                     f"{_f(max((s.penalty - 1) * 100 for s in r.selections))} %")
    else:
        lines.append("no configuration with two forced algorithms on both sides: no "
                     "selection measures")
    return lines


def _selection_rows(sel: Sequence[Selection]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, int, str], list[Selection]] = {}
    for s in sel:
        groups.setdefault((s.collective, s.nprocs, s.mapping), []).append(s)
    out = []
    for (coll, n, mapping), ss in sorted(groups.items()):
        pen = [(s.penalty - 1) * 100 for s in ss]
        other = [f"{format_size(s.size_bytes)}:{s.predicted_best}" for s in ss if not s.same]
        out.append({"context": block_title(coll, n, None, None, mapping or None, None, None),
                    "sizes": len(ss), "same best": sum(s.same for s in ss),
                    "penalty median %": _f(statistics.median(pen)),
                    "penalty max %": _f(max(pen)),
                    "sizes where B picks otherwise": ", ".join(other[:6])
                    + (f" (+{len(other) - 6})" if len(other) > 6 else "")})
    return out


def _f(v: float) -> str:
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}"


# --- the regret of a rules file's picks (tune --against) -------------------------------------

@dataclass(frozen=True)
class Regret:
    """A's regret of running what a rules file picks: `against`'s selection penalty with
    the file's pick in place of B's best (same cells, same definition)."""

    selections: tuple[Selection, ...]
    same_fraction: float | None
    penalty: ErrorSummary | None
    unmeasured: int  # cells whose pick A did not measure (no regret can be said)


def rules_regret(a: dict[Key, float], pick: dict[tuple[str, int, str, int], str]) -> Regret:
    """Per cell (collective, nprocs, mapping, size) of A with >= 2 forced algorithms and a
    pick A measured: A's latency of the pick / A's best - 1. The pick is ranked first on
    the B side, so accuracy.selections computes exactly `against`'s penalty. A pick of
    "default" (the file keeps the MPI's own decision) is A's default point, which then
    also competes for the best (so the regret is never negative)."""
    by_cell: dict[tuple[str, int, str, int], list[Key]] = {}
    for k, v in a.items():
        if v > 0 and (k.algorithm != DEFAULT or pick.get(_config(k)) == DEFAULT):
            by_cell.setdefault(_config(k), []).append(k)
    paired: list[Paired] = []
    unmeasured = 0
    for cell, keys in by_cell.items():
        chosen = pick.get(cell)
        if chosen is None or sum(k.algorithm != DEFAULT for k in keys) < 2:
            continue
        if chosen not in {k.algorithm for k in keys}:
            unmeasured += 1
            continue
        paired += [Paired(k, a[k], 1.0 if k.algorithm == chosen else 2.0) for k in keys]
    sel = accuracy.selections(paired)
    if not sel:
        return Regret((), None, None, unmeasured)
    same, penalty = accuracy.selection_summary(paired)
    return Regret(tuple(sel), same, penalty, unmeasured)


def regret_lines(r: Regret, a_name: str) -> list[str]:
    if r.penalty is None or r.same_fraction is None:
        return [f"against {a_name}: no cell with the rules' pick and another forced algorithm "
                f"measured ({r.unmeasured} picks not measured there)"]
    worst = max((s.penalty - 1) * 100 for s in r.selections)
    return [f"against {a_name}: the rules pick its best algorithm at "
            f"{r.same_fraction * 100:.1f} % of {len(r.selections)} cells; regret (its "
            "latency of the rules' pick / its best - 1): median "
            f"{_f(r.penalty.median_abs_pct)} %, p95 {_f(r.penalty.p95_abs_pct)} %, max "
            f"{_f(worst)} %" + (f"; {r.unmeasured} picks it did not measure"
                                if r.unmeasured else "")]
