"""`collbench report`: results folder -> figures, tables and one HTML page.

Statistics come from analyse.compare (the same numbers as `collbench compare`); the only
other reads are small DuckDB aggregates: row counts per status and, when raw samples
exist, their quantiles per launch and point, computed inside DuckDB so that millions of
samples never reach Python.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

import duckdb
from matplotlib.figure import Figure

from collbench.analyse import (
    Best,
    Comparison,
    PointStat,
    RatioStat,
    WinRange,
    algorithm_label,
    compare,
)
from collbench.analyse.compare import METHOD, block_title, context_params
from collbench.analyse.render import (
    SHORT_COVERAGE,
    fmt_interval,
    fmt_num,
    fmt_p,
    text_or_markdown_table,
)
from collbench.errors import UserError, did_you_mean
from collbench.report import figures, html
from collbench.sizes import format_size
from collbench.store import Store, atomic_write
from collbench.tables import csv_table

BOX_LABELS: Final = 4  # baseline + the 3 fastest: more boxes per size are unreadable
SCALING_SIZES: Final = 3
OUR_SUFFIXES: Final = (".png", ".svg", ".csv", ".md")

Context = tuple[Any, ...]  # PointStat.context


@dataclass(frozen=True)
class Options:
    baseline: str = "default"
    stat: str = "avg"
    collective: str | None = None
    confidence: float = 0.95
    fmt: str = "png"  # png | svg | both


@dataclass(frozen=True)
class Written:
    index: Path
    figures: tuple[Path, ...]
    tables: tuple[Path, ...]


@dataclass
class _Out:
    """Where files go, and what has been written (for the summary line and tests)."""

    root: Path
    fmt: str
    jobs: list[figures.Job]
    tables: list[Path]
    slugs: set[str]

    def figure(self, draw: Callable[[], Figure], stem: str, caption: str) -> html.FigureRef:
        """Queue a figure (drawn later, in parallel); its reference for the page."""
        job = figures.Job(draw, self.root / "figures" / stem, self.fmt)
        self.jobs.append(job)
        # The page embeds the first file: PNG when written, smaller than SVG.
        return html.FigureRef(figures.paths(job.stem, job.fmt)[0], caption)

    def table(self, stem: str, markdown: str, csv: str) -> list[str]:
        names = []
        for ext, text in ((".md", markdown), (".csv", csv)):
            path = self.root / "tables" / f"{stem}{ext}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.rstrip("\n") + "\n")
            self.tables.append(path)
            names.append(f"tables/{stem}{ext}")
        return names

    def slug(self, text: str) -> str:
        """A file-name-safe, unique stem (data may contain anything)."""
        base = re.sub(r"[^A-Za-z0-9_.=+-]+", "-", text).strip("-.")[:80] or "x"
        slug, n = base, 2
        while slug in self.slugs:
            slug, n = f"{base}-{n}", n + 1
        self.slugs.add(slug)
        return slug


def build_report(results: Path, out: Path, opts: Options) -> Written:
    if opts.fmt not in figures.FORMATS:
        raise UserError(f"collbench report: --format {opts.fmt!r} is not valid; valid: "
                        f"{', '.join(figures.FORMATS)}")
    data = _read(Store(results), opts)
    try:
        _prepare_output(out)
        dest = _Out(out, opts.fmt, [], [], set())
        sections = _collectives(data.comp, data.counts, data.tails, dest)
        files = _summary_table(data.comp, dest) if data.comp else []
        written = figures.render_all(dest.jobs)
        index = out / "index.html"
        atomic_write(index, html.page(_page(data, sections, files)).encode())
        index.chmod(0o644)  # atomic_write's temporary file is private; a report is for sharing
    except OSError as e:
        raise UserError(f"{out}: cannot write the report: {e}") from None
    return Written(index, tuple(written), tuple(dest.tables))


@dataclass(frozen=True)
class _Data:
    results: Path
    campaign: dict[str, Any]
    provenance: dict[str, Any]
    counts: dict[tuple[str, str], int]  # (collective, status) -> rows
    tails: dict[tuple[Context, str, int], figures.Tail]
    samples: int
    launches: int
    comp: Comparison | None  # None when no point was measured successfully


def _read(store: Store, opts: Options) -> _Data:
    campaign = store.campaign()  # a clear error when this is no results folder
    con = store.connect()
    try:
        counts = _status_counts(con, store, opts.collective)
        tails = _tails(con, store, opts.collective)
        samples = _scalar(con, "SELECT count(*) FROM samples")  # Parquet metadata: cheap
        launches = _scalar(con, "SELECT count(DISTINCT launch_id) FROM measurements")
    finally:
        con.close()  # before figures are drawn in forked workers: no DuckDB threads then
    ok = any(n for (_, status), n in counts.items() if status == "ok")
    comp = (compare(store, opts.baseline, opts.stat, opts.collective, None, opts.confidence)
            if ok else None)
    return _Data(store.root, campaign, _read_json(store.root / "provenance.json"), counts,
                 tails, samples, launches, comp)


def _page(d: _Data, sections: Sequence[html.Collective], files: Sequence[str]) -> html.Page:
    prov = d.provenance
    return html.Page(
        title=f"collbench report: {d.campaign.get('name', d.results.name)}",
        summary=tuple(_summary(d)), collectives=tuple(sections),
        notices=tuple(_notices(d.comp, d.counts)),
        method=tuple(METHOD.items()) if d.comp else (),
        warnings=tuple(html.WarningItem(w.where, w.problem, w.advice)
                       for w in (d.comp.warnings if d.comp else ())),
        provenance=tuple(_provenance(d.campaign, prov, d.results)),
        environment=tuple((str(k), str(v)) for k, v in
                          sorted((prov.get("environment") or {}).items())),
        provenance_warnings=tuple(str(w) for w in prov.get("warnings") or []),
        files=tuple(files))


# --- reading ----------------------------------------------------------------------------
def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _status_counts(con: duckdb.DuckDBPyConnection, store: Store,
                   collective: str | None) -> dict[tuple[str, str], int]:
    rows = con.execute("SELECT collective, status, count(*) FROM measurements "
                       "GROUP BY ALL").fetchall()
    if not rows:
        raise UserError(f"{store.root}: no measurements stored yet; run `collbench run` "
                        "(or `--resume` an interrupted campaign) first")
    present = sorted({str(c) for c, _, _ in rows})
    if collective is not None and collective not in present:
        raise UserError(f"{store.root}: no measurements of collective {collective!r}; "
                        f"present: {', '.join(present)}{did_you_mean(collective, present)}")
    return {(str(c), str(s)): int(n) for c, s, n in rows if collective in (None, c)}


def _tails(con: duckdb.DuckDBPyConnection, store: Store,
           collective: str | None) -> dict[tuple[Context, str, int], figures.Tail]:
    """Quantiles of raw samples per point: per launch in DuckDB, median over launches here.

    One query per samples file (one file per launch): an exact quantile holds all its
    values, so memory stays bounded by the largest launch, not by the whole campaign."""
    files = sorted((store.root / "samples").glob("*.parquet"))
    if not files:
        return {}
    contexts = {(str(lid), str(coll)): (str(coll), int(np_ or 0), nodes, ppn, mapping, binding,
                                        context_params(params))
                for lid, coll, np_, nodes, ppn, mapping, binding, params in con.execute(
                    "SELECT DISTINCT launch_id, collective, nprocs, nodes, ppn, mapping, "
                    "binding, params FROM measurements").fetchall()}
    where, args = ("WHERE collective = ?", [collective]) if collective is not None else ("", [])
    pooled: dict[tuple[Context, str, int], list[tuple[int, float, float]]] = {}
    for f in files:
        rows = con.execute(
            "SELECT launch_id, collective, algorithm, segsize, fanout, size_bytes, count(*), "
            f"quantile_cont(sample_us, [0.5, 0.99]) FROM read_parquet(?) {where} GROUP BY ALL",
            [str(f), *args]).fetchall()
        for lid, coll, alg, seg, fan, size, n, (p50, p99) in rows:
            context = contexts.get((str(lid), str(coll)))
            if context is not None:  # samples of a launch forgotten since: ignore
                label = algorithm_label(str(alg), int(seg or 0), int(fan or 0))
                pooled.setdefault((context, label, int(size)), []).append((int(n), p50, p99))
    return {k: figures.Tail(k[1], k[2], sum(v[0] for v in vs),
                            statistics.median(v[1] for v in vs),
                            statistics.median(v[2] for v in vs))
            for k, vs in pooled.items()}


# --- output folder ------------------------------------------------------------------------
def _prepare_output(out: Path) -> None:
    """Reuse a previous report's folder (dropping its figures and tables), refuse others."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: exists and is not a folder; choose another -o")
    if out.is_dir() and any(out.iterdir()) and not (out / "index.html").exists():
        raise UserError(f"{out}: folder is not empty and holds no earlier report; choose "
                        "another -o folder")
    for sub in ("figures", "tables"):
        folder = out / sub
        if folder.is_dir():
            for f in folder.iterdir():
                if f.is_file() and f.suffix in OUR_SUFFIXES:
                    f.unlink()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"{out}: cannot create the report folder: {e.strerror}") from None


# --- per collective and block -------------------------------------------------------------
def _collectives(comp: Comparison | None, counts: dict[tuple[str, str], int],
                 tails: dict[tuple[Context, str, int], figures.Tail],
                 dest: _Out) -> list[html.Collective]:
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


def _block(comp: Comparison, ctx: Context, points: list[PointStat],
           tails: dict[tuple[Context, str, int], figures.Tail], dest: _Out) -> html.Block:
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
                         f"{stem}_ratio", f"{title}: ratio of each algorithm's {stat} to "
                         f"{comp.baseline}'s at each size (blue: faster, red: slower, "
                         f"log colour scale centred on 1; grey: not measured); {hatch}."))
    if reps < 2:
        notes.append("One repetition: no boxplots across repetitions and no significance; "
                     "run more repetitions (run.repetitions) to see the spread.")
    elif len(labels) > 1 and ratios:
        shown = _box_labels(comp.baseline, labels, ratios)
        figs.append(dest.figure(partial(figures.boxplot, title, points, shown, comp.baseline,
                                         colors),
                         f"{stem}_repetitions",
                         f"{title}: spread of the {stat} over repetitions, each divided by "
                         f"{comp.baseline}'s median at that size (1 = baseline); "
                         f"{comp.baseline} and the {len(shown) - 1} algorithms with the "
                         "lowest geometric-mean ratio."))
    block_tails = [t for (c, _, size), t in tails.items() if c == ctx and size > 0]
    if block_tails:
        figs.append(dest.figure(partial(figures.tails, title, block_tails, colors),
                           f"{stem}_tails",
                         f"{title}: tail of the per-iteration times (raw samples): p99 / p50 "
                         "per launch, median over repetitions. Descriptive only: iterations "
                         "of one launch are not independent observations."))
    files = dest.table(stem, _markdown(comp, title, points, ratios, best, ranges, block_tails),
                       csv_table(_long_rows(comp, points, ratios, best, block_tails),
                                 _csv_columns(comp, bool(block_tails))))
    return html.Block(title, _recommendation(comp, ranges, ratios, best) if ranges else None,
                      _ratio_table(comp, labels, points, ratios, best) if len(labels) > 1
                      else None, tuple(figs), tuple(notes), tuple(files))


def _stem(ctx: Context) -> str:
    coll, nprocs, nodes, ppn, mapping, binding, params = ctx
    parts = [str(coll), f"np{nprocs}"]
    parts += [f"n{nodes}x{ppn}"] if nodes and nodes > 1 else []
    parts += [f"map-{mapping}"] if mapping else []
    parts += [f"bind-{binding}"] if binding else []
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
             dest: _Out) -> html.FigureRef | None:
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
                f"{name}: {stat} latency of the baseline ({comp.baseline}, measured at every "
                "process count, unlike the per-size winners) against the number of "
                "processes, one line per placement, at the smallest, a middle and the "
                "largest size measured at several process counts.")


def _placement(p: PointStat) -> str:
    parts = [f"ppn={p.ppn}"] if p.nodes and p.nodes > 1 else []
    parts += [f"map-by={p.mapping}"] if p.mapping else []
    parts += [f"bind-to={p.binding}"] if p.binding else []
    parts += [f"params={p.params}"] if p.params else []
    return " ".join(parts) or "default placement"


# --- tables -----------------------------------------------------------------------------
def _marker(r: RatioStat | None) -> str:
    """'*' significant, '' not, '?' untested."""
    if r is None:
        return ""
    return "?" if r.significant is None else "*" if r.significant else ""


def _lookup(ratios: Iterable[RatioStat]) -> dict[tuple[str, int], RatioStat]:
    return {(r.point.label, r.point.size_bytes): r for r in ratios}


def _ratio_table(comp: Comparison, labels: Sequence[str], points: Sequence[PointStat],
                 ratios: Sequence[RatioStat], best: Sequence[Best]) -> html.Table:
    """Sizes down, algorithms across: the baseline's value, then each ratio to it."""
    by = _lookup(ratios)
    values = {(p.label, p.size_bytes): p for p in points}
    others = [lab for lab in labels if lab != comp.baseline]
    stat = comp.stat.removesuffix("_us")
    rows = []
    for b in sorted(best, key=lambda b: b.key[7]):
        size = b.key[7]
        base = values.get((comp.baseline, size))
        row: list[html.Cell | str] = [
            format_size(size), html.Cell(fmt_num(base.value) if base else "-", "num")]
        for lab in others:
            r = by.get((lab, size))
            css = ["num"]
            if r is not None and r.significant:
                css.append("faster" if r.ratio < 1 else "slower")
            if b.winner.label == lab:
                css.append("fastest")
            row.append(html.Cell(f"{fmt_num(r.ratio)}{_marker(r)}" if r else "-", " ".join(css)))
        row += [b.winner.label, b.recommended]
        rows.append(tuple(row))
    untested = comp.repetitions < 2
    caption = (f"Ratio = {stat} / {comp.baseline}'s (< 1: faster). "
               + ("Single repetition: no significance (?)." if untested else
                  "* significant (Holm-corrected exact Mann-Whitney and CI excluding 1; "
                  "blue faster, red slower), ? untested; bold: fastest."))
    return html.Table(("size", f"{comp.baseline} {stat} (µs)", *others, "fastest",
                       "recommended"), tuple(rows), caption)


def _recommendation(comp: Comparison, ranges: Sequence[WinRange],
                    ratios: Sequence[RatioStat], best: Sequence[Best]) -> html.Table:
    by = _lookup(ratios)
    rows = []
    for w in ranges:
        span = [b for b in best if w.size_from <= b.key[7] <= w.size_to]
        sizes = format_size(w.size_from) + (
            f"–{format_size(w.size_to)}" if w.size_to != w.size_from else "")
        found = [r for b in span if (r := by.get((w.algorithm, b.key[7]))) is not None]
        vals = [r.ratio for r in found]
        ratio = ("1" if w.algorithm == comp.baseline else
                 f"{fmt_num(min(vals))}–{fmt_num(max(vals))}" if len(set(vals)) > 1 else
                 fmt_num(vals[0]) if vals else "-")
        rows.append((sizes, w.algorithm, ratio, _evidence(comp, w, span, found)))
    return html.Table(("sizes", "recommended", f"ratio to {comp.baseline}", "evidence"),
                      tuple(rows))


def _evidence(comp: Comparison, w: WinRange, span: Sequence[Best],
              found: Sequence[RatioStat]) -> str:
    if w.fallback:
        return f"no algorithm significantly faster than {comp.baseline}"
    if w.algorithm == comp.baseline:
        return f"{comp.baseline} is the fastest"
    sig = sum(1 for r in found if r.significant)
    if any(r.significant is None for r in found):
        return "untested (fewer than 2 repetitions): fastest measured, not significant"
    notes = sorted({b.note for b in span if b.note})
    return (f"significantly faster at {sig} of {len(span)} sizes"
            + (f"; {'; '.join(notes)}" if notes else ""))


def _csv_columns(comp: Comparison, with_tails: bool) -> list[str]:
    return ["size_bytes", "algorithm", "n", comp.stat, "ci_low", "ci_high", "ci_coverage",
            "min_us", "max_us", "ratio", "ratio_ci_low", "ratio_ci_high", "p_value",
            "significant", "fastest", "recommended",
            *(["samples", "p50_us", "p99_us"] if with_tails else [])]


def _long_rows(comp: Comparison, points: Sequence[PointStat], ratios: Sequence[RatioStat],
               best: Sequence[Best], tails: Sequence[figures.Tail]) -> list[dict[str, Any]]:
    """One row per (size, algorithm), OSU's avg/min/max plus the comparison."""
    by = {id(r.point): r for r in ratios}
    winners = {b.key[7]: b for b in best}
    tail = {(t.label, t.size_bytes): t for t in tails}
    rows = []
    for p in sorted(points, key=lambda p: (p.size_bytes, p.label != comp.baseline, p.label)):
        r, b, t = by.get(id(p)), winners.get(p.size_bytes), tail.get((p.label, p.size_bytes))
        rows.append({
            "size_bytes": p.size_bytes, "size": format_size(p.size_bytes), "algorithm": p.label,
            "n": p.n, comp.stat: p.value, "ci_low": p.ci_low, "ci_high": p.ci_high,
            "ci_coverage": p.ci_coverage, "min_us": p.min_us, "max_us": p.max_us,
            "ratio": 1.0 if p.label == comp.baseline else (r.ratio if r else None),
            "ratio_ci_low": r.ci_low if r else None, "ratio_ci_high": r.ci_high if r else None,
            "ratio_ci_coverage": r.ci_coverage if r else None,
            "p_value": r.p_value if r else None, "significant": r.significant if r else None,
            "fastest": b is not None and b.winner is p,
            "recommended": b is not None and b.recommended == p.label,
            "samples": t.count if t else None, "p50_us": t.p50 if t else None,
            "p99_us": t.p99 if t else None})
    return rows


def _markdown(comp: Comparison, title: str, points: Sequence[PointStat],
              ratios: Sequence[RatioStat], best: Sequence[Best], ranges: Sequence[WinRange],
              tails: Sequence[figures.Tail]) -> str:
    stat = comp.stat
    cols = ["size", "algorithm", "n", stat, "CI", "min_us", "max_us", "ratio", "ratio CI",
            "p", "sig", "best"] + (["p99_us"] if tails else [])
    rows = []
    for d in _long_rows(comp, points, ratios, best, tails):
        tag = [t for t, on in (("fastest", d["fastest"]), ("recommended", d["recommended"]))
               if on]
        base = d["algorithm"] == comp.baseline
        rows.append({
            "size": d["size"], "algorithm": d["algorithm"], "n": d["n"], stat: fmt_num(d[stat]),
            "CI": fmt_interval(d["ci_low"], d["ci_high"], d["ci_coverage"], comp.confidence),
            "min_us": fmt_num(d["min_us"]), "max_us": fmt_num(d["max_us"]),
            "ratio": "1" if base else fmt_num(d["ratio"]),
            "ratio CI": fmt_interval(d["ratio_ci_low"], d["ratio_ci_high"],
                                  d["ratio_ci_coverage"], comp.confidence),
            "p": fmt_p(d["p_value"]), "sig": "baseline" if base else
            {True: "*", False: "n.s.", None: "?"}[d["significant"]],
            "best": ", ".join(tag) or "", "p99_us": fmt_num(d["p99_us"])})
    winners = "; ".join(
        f"{format_size(w.size_from)}"
        + (f"–{format_size(w.size_to)}" if w.size_to != w.size_from else "")
        + f" {w.algorithm}" + (" (no significant difference)" if w.fallback else "")
        for w in ranges)
    pct = f"{comp.confidence:.0%}"
    return "\n".join([
        f"## {title}", "",
        f"{stat}: median over repetitions (up to {comp.repetitions}); CI of the median "
        f"({pct}); min_us/max_us: fastest/slowest rank over all repetitions; ratio = "
        f"{stat} / {comp.baseline}'s with Hodges-Lehmann CI; p: exact Mann-Whitney, Holm "
        f"per size; sig: * significant, n.s. not, ? untested; {SHORT_COVERAGE} interval "
        f"below {pct} coverage (too few repetitions).", "",
        text_or_markdown_table(rows, cols, True), "", f"Recommended: {winners}" if winners else ""])


def _summary_table(comp: Comparison, dest: _Out) -> list[str]:
    """Every win range of the campaign in one table (the tuning decision at a glance)."""
    rows = [{"collective": w.collective, "nprocs": w.nprocs, "nodes": w.nodes, "ppn": w.ppn,
             "mapping": w.mapping, "binding": w.binding, "params": w.params,
             "size_from": w.size_from, "size_to": w.size_to, "recommended": w.algorithm,
             "baseline_kept": w.fallback} for w in comp.ranges]
    cols = list(rows[0]) if rows else ["collective"]
    md_rows = [{k: "-" if v is None else format_size(v) if k.startswith("size_")
                and isinstance(v, int) else v for k, v in r.items()} for r in rows]
    md = (f"# Recommended algorithm per size range (baseline {comp.baseline}, "
          f"{comp.stat})\n\n" + text_or_markdown_table(md_rows, cols, True))
    return dest.table("recommendations", md, csv_table(rows, cols))


# --- summary and provenance ---------------------------------------------------------------
def _notices(comp: Comparison | None, counts: dict[tuple[str, str], int]) -> list[str]:
    if comp is None:
        bad = ", ".join(f"{s} {n}" for s, n in sorted(_by_status(counts).items()))
        return [f"No point was measured successfully (points by status: {bad}): there is "
                "nothing to compare. See `collbench show` for the errors, then rerun with "
                "`collbench run --resume --retry-failed`."]
    return [comp.notice] if comp.notice else []


def _by_status(counts: dict[tuple[str, str], int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for (_, status), n in counts.items():
        out[status] = out.get(status, 0) + n
    return out


def _summary(d: _Data) -> list[tuple[str, str]]:
    mpi = d.provenance.get("mpi") or {}
    rows = [("campaign", str(d.campaign.get("name", "-"))),
            ("description", str(d.campaign.get("description") or "")),
            ("MPI", f"{mpi.get('implementation', '-')} {mpi.get('version', '')}".strip()),
            ("host", str(d.provenance.get("host", "-"))),
            ("started", str(d.provenance.get("created", "-"))),
            ("last launch stored", _last_launch(d.results)),
            ("launches", str(d.launches)),
            ("rows by status", ", ".join(f"{s} {n}" for s, n in
                                         sorted(_by_status(d.counts).items())))]
    if d.comp is not None:
        c = d.comp
        rows += [("points compared", str(len(c.points))),
                 ("repetitions", f"up to {c.repetitions} per point"),
                 ("statistic compared", f"{c.stat}: median over repetitions"),
                 ("baseline", c.baseline),
                 ("confidence", f"{c.confidence:.0%} (intervals; significance at p < "
                                f"{1 - c.confidence:.3g}, Holm per size)")]
    rows.append(("raw samples", f"{d.samples:,}" if d.samples else "none stored"))
    return [(k, v) for k, v in rows if v]


def _last_launch(results: Path) -> str:
    times = [p.stat().st_mtime for p in (results / "launches").glob("*.jsonl")]
    if not times:
        return ""
    return datetime.fromtimestamp(max(times), UTC).isoformat(timespec="seconds")


def _provenance(campaign: dict[str, Any], prov: dict[str, Any],
                results: Path) -> list[tuple[str, str]]:
    mpi = prov.get("mpi") or {}
    kernel = prov.get("kernel") or {}
    rows = [("results folder", str(results)), ("host", prov.get("host")),
            ("CPU", prov.get("cpu_model")), ("cores", prov.get("cores")),
            ("sockets", prov.get("sockets")), ("OS", prov.get("os")),
            ("Python", prov.get("python")),
            ("collbench", prov.get("collbench_version") or campaign.get("collbench_version")),
            ("campaign seed", campaign.get("seed")), ("backend", campaign.get("backend")),
            ("spec", campaign.get("spec_source"))]
    first = ("implementation", "version")  # then the paths, alphabetically
    rows += [(f"MPI {k}", v) for k, v in
             sorted(mpi.items(), key=lambda kv: (kv[0] not in first, first.index(kv[0])
                                                 if kv[0] in first else 0, kv[0]))]
    rows += [(f"kernel {k}", v) for k, v in sorted(kernel.items())]
    if (results / "ompi_info.txt").exists():
        rows.append(("MPI parameter dump", "ompi_info.txt in the results folder"))
    return [(k, _text(v)) for k, v in rows if v not in (None, "", {}, [])]


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str)
