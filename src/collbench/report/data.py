"""What a report reads from a results folder, and nothing else.

Statistics come from analyse.compare (the same numbers as `collbench compare`); the only
other reads are small DuckDB aggregates: row counts per status and, when raw samples
exist, their quantiles per launch and point, computed inside DuckDB so that millions of
samples never reach Python.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from collbench import points
from collbench.analyse import Comparison, algorithm_label, compare
from collbench.analyse.summary import recommended
from collbench.errors import UserError, did_you_mean
from collbench.report import figures
from collbench.store import Store

Context = tuple[Any, ...]  # PointStat.context
Counts = dict[tuple[str, str], int]  # (collective, status) -> rows
Tails = dict[tuple[Context, str, int], figures.Tail]  # (context, label, size) -> tail


@dataclass(frozen=True)
class ReportData:
    results: Path
    campaign: dict[str, Any]
    provenance: dict[str, Any]
    counts: Counts
    tails: Tails
    samples: int
    launches: int
    comp: Comparison | None  # None when no point was measured successfully


def read(store: Store, baseline: str, stat: str, collective: str | None,
         confidence: float) -> ReportData:
    campaign = store.campaign()  # a clear error when this is no results folder
    con = points.connect(store)
    try:
        counts = _status_counts(con, store, collective)
        tails = _tails(con, store, collective)
        samples = _scalar(con, "SELECT count(*) FROM samples")  # Parquet metadata: cheap
        launches = _scalar(con, f"SELECT count(DISTINCT launch_id) FROM {points.VIEW}")
    finally:
        con.close()  # before figures are drawn in forked workers: no DuckDB threads then
    ok = any(n for (_, status), n in counts.items() if status == "ok")
    # the recommendation of compare --summary and tune (smoothed), not the per-size one
    comp = recommended(compare(store, baseline, stat, collective, None, confidence)) \
        if ok else None
    return ReportData(store.root, campaign, _provenance(store),
                      counts, tails, samples, launches, comp)


def last_launch(results: Path) -> str:
    """When the newest launch was stored (ISO, UTC), or '' when none was."""
    times = [p.stat().st_mtime for p in Store(results).launch_files()]
    if not times:
        return ""
    return datetime.fromtimestamp(max(times), UTC).isoformat(timespec="seconds")


def _provenance(store: Store) -> dict[str, Any]:
    try:
        return store.provenance()
    except UserError:  # a damaged provenance costs the report its provenance table only
        return {}


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = con.execute(sql).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _status_counts(con: duckdb.DuckDBPyConnection, store: Store,
                   collective: str | None) -> Counts:
    rows = con.execute(f"SELECT collective, status, count(*) FROM {points.VIEW} "
                       "GROUP BY ALL").fetchall()
    if not rows:
        raise UserError(f"{store.root}: no measurements stored yet; run `collbench run` "
                        "(or `--resume` an interrupted campaign) first")
    present = sorted({str(c) for c, _, _ in rows})
    if collective is not None and collective not in present:
        raise UserError(f"{store.root}: no measurements of collective {collective!r}; "
                        f"present: {', '.join(present)}{did_you_mean(collective, present)}")
    return {(str(c), str(s)): int(n) for c, s, n in rows if collective in (None, c)}


def _tails(con: duckdb.DuckDBPyConnection, store: Store, collective: str | None) -> Tails:
    """Quantiles of raw samples per point: per launch in DuckDB, median over launches here.

    One query per samples file (one file per launch): an exact quantile holds all its
    values, so memory stays bounded by the largest launch, not by the whole campaign."""
    files = store.sample_files()
    if not files:
        return {}
    contexts = {(str(lid), str(coll)): (str(coll), int(np_ or 0), nodes, ppn, mapping, binding,
                                        context)
                for lid, coll, np_, nodes, ppn, mapping, binding, context in con.execute(
                    "SELECT DISTINCT launch_id, collective, nprocs, nodes, ppn, mapping, "
                    f"binding, context FROM {points.VIEW}").fetchall()}
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
