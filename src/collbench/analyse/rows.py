"""Reading a results folder for the analyses: the rows compare needs, the figure a
`--stat` names, and the context a row's params set (without algorithm-forcing keys)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from collbench.analyse import columns, nonblocking
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.errors import UserError, choice_error, did_you_mean
from collbench.store import Store

STATS: Final = {"avg": "avg_us", "median": "median_us", "min": "min_us", "max": "max_us"}
# `compare --stat` also takes the registered figures kept in metrics (completion, the
# non-blocking ones) and any numeric `<name>_us` key the rows' metrics hold.
COMPARE_STATS: Final = {**columns.STATS, **nonblocking.METRIC_STATS}
ROW_COLUMNS: Final = ("collective", "nprocs", "nodes", "ppn", "mapping", "binding", "params",
                      "algorithm", "segsize", "fanout", "size_bytes", "repetition",
                      "launch_id", "iterations", "status", "avg_us", "min_us", "max_us",
                      "median_us", "error", "metrics", "mpi", "mpi_version", "backend",
                      "source", "selection")
# Launch parameters that only force the algorithm (the algorithm columns already say which)
# are dropped from `params` (context_params), so that forced launches and the default
# share one context.


def stat_column(stat: str, rows: Sequence[dict[str, Any]] = ()) -> str:
    """The figure `--stat NAME` compares: a registered one, or a numeric `NAME_us` metrics
    key of the rows (so a figure the kernel adds works without a change here)."""
    found = {k.removesuffix("_us"): k for r in rows
             for k, v in nonblocking.parse_metrics(r.get("metrics")).items()
             if k.endswith("_us") and nonblocking.figure({k: v}, k) is not None}
    known = {**found, **COMPARE_STATS}
    if stat not in known:
        raise choice_error("collbench compare", "--stat", stat, known)
    return known[stat]


def fetch(store: Store, collective: str | None, nprocs: int | None) -> list[dict[str, Any]]:
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
    cur = con.execute(f"SELECT {', '.join(ROW_COLUMNS)} FROM measurements{where}", args)
    rows = [dict(zip(ROW_COLUMNS, r, strict=True)) for r in cur.fetchall()]
    for r in rows:  # figures kept in metrics (non-blocking, completion) as columns
        metrics = nonblocking.parse_metrics(r["metrics"])
        r.update({col: nonblocking.figure(metrics, col) for col in metrics
                  if col not in r and col.endswith(("_us", "_pct"))})
        r.update({col: nonblocking.figure(metrics, col)
                  for col in (*COMPARE_STATS.values(), "overall_us") if col not in r})
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
