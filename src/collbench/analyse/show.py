"""`collbench show`: the avg/min/max table of a results folder, as OSU prints it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from collbench.analyse.nonblocking import SHOW_FIGURES
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import render

GROUP = ("collective", "nprocs", "mapping", "binding", "params", "algorithm", "segsize",
         "fanout", "size_bytes")
TABLE_COLUMNS = ("algorithm", "size", "avg_us", "min_us", "max_us", "median_us",
                 "bandwidth_mbs", "iterations", "reps", "status")
# Non-blocking rows: their settings (from metrics) are part of the point, their figures
# (means over ok repetitions) extra columns. avg/min/max_us are the pure communication.
NB_SETTINGS = ("test_calls", "compute")
NB_COLUMNS = (*NB_SETTINGS, *SHOW_FIGURES)


def _nb_sql() -> str:
    settings = [f"json_extract_string(metrics, '$.{k}') AS {k}" for k in NB_SETTINGS]
    figures = [f"avg(TRY_CAST(json_extract_string(metrics, '$.{k}') AS DOUBLE)) "
               f"FILTER (status = 'ok') AS {k}" for k in SHOW_FIGURES]
    return ",\n               ".join([*settings, *figures])


def _filters(collective: str | None, algorithm: str | None,
             nprocs: int | None) -> tuple[str, list[Any]]:
    clauses, args = [], []
    for col, val in (("collective", collective), ("algorithm", algorithm), ("nprocs", nprocs)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", args


def aggregate(store: Store, collective: str | None = None, algorithm: str | None = None,
              nprocs: int | None = None) -> list[dict[str, Any]]:
    """One row per point, pooled over repetitions (mean of avg, min of min, max of max)."""
    where, args = _filters(collective, algorithm, nprocs)
    group = ", ".join(GROUP)
    sql = f"""
        SELECT {group},
               avg(avg_us) FILTER (status = 'ok') AS avg_us,
               min(min_us) FILTER (status = 'ok') AS min_us,
               max(max_us) FILTER (status = 'ok') AS max_us,
               median(median_us) FILTER (status = 'ok') AS median_us,
               avg(bandwidth_mbs) FILTER (status = 'ok') AS bandwidth_mbs,
               max(iterations) AS iterations,
               count(*) FILTER (status = 'ok') AS reps,
               string_agg(DISTINCT status, ',' ORDER BY status) AS status,
               {_nb_sql()}
        FROM measurements{where}
        GROUP BY {group}, test_calls, compute
        ORDER BY collective, nprocs, mapping, binding, params, algorithm, segsize, fanout,
                 TRY_CAST(test_calls AS BIGINT) NULLS FIRST, compute NULLS FIRST, size_bytes
    """
    con = store.connect()
    try:
        cur = con.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def _label(r: dict[str, Any]) -> str:
    name = str(r["algorithm"])
    extras = [f"seg={r['segsize']}" for _ in [0] if r["segsize"]]
    extras += [f"fanout={r['fanout']}" for _ in [0] if r["fanout"]]
    return name + (f"[{','.join(extras)}]" if extras else "")


def show(store: Store, fmt: str = "table", collective: str | None = None,
         algorithm: str | None = None, nprocs: int | None = None) -> str:
    rows = aggregate(store, collective, algorithm, nprocs)
    for r in rows:
        r["size"] = format_size(int(r["size_bytes"]))
        r["algorithm"] = _label(r)
    nb = [c for c in NB_COLUMNS if any(r.get(c) is not None for r in rows)]
    if fmt != "table":
        cols = [c for c in GROUP if c not in ("algorithm",)] + list(TABLE_COLUMNS) + nb
        cols = list(dict.fromkeys(cols))
        return render(rows, cols, fmt)
    if not rows:
        return "no measurements match"
    blocks: list[str] = []
    for key, block in _blocks(rows):
        cols = [c for c in TABLE_COLUMNS
                if c != "bandwidth_mbs" or any(r.get("bandwidth_mbs") for r in block)]
        extra = [c for c in NB_COLUMNS if any(r.get(c) is not None for r in block)]
        if extra:  # non-blocking: settings after the algorithm, figures after the times
            cols = [cols[0], *[c for c in extra if c in NB_SETTINGS], cols[1],
                    *[c for c in cols[2:] if c not in ("median_us",)],
                    *[c for c in extra if c not in NB_SETTINGS]]
        blocks.append(f"# {key}\n" + render(block, cols, "table"))
    return "\n\n".join(blocks)


def _blocks(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        key = (f"{r['collective']}  np={r['nprocs']}  map-by={r['mapping']}  "
               f"bind-to={r['binding']}")
        if r["params"] and '"swept": {}' not in r["params"]:
            key += f"  params={r['params']}"
        out.setdefault(key, []).append(r)
    return list(out.items())


def best(store: Store, fmt: str = "table", collective: str | None = None,
         stat: str = "avg_us") -> str:
    """Fastest algorithm per size, with its ratio to the default (ratio < 1: faster)."""
    rows = aggregate(store, collective)
    by_point: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        if r[stat] is None:
            continue
        key = (r["collective"], r["nprocs"], r["mapping"], r["binding"], r["params"],
               r["size_bytes"])
        by_point.setdefault(key, []).append(r)
    out = []
    for key, cands in by_point.items():
        winner = min(cands, key=lambda r: float(r[stat]))
        default = next((c for c in cands if c["algorithm"] == "default"), None)
        out.append({
            "collective": key[0], "nprocs": key[1], "mapping": key[2],
            "size": format_size(int(key[5])), "best": _label(winner),
            "best_us": winner[stat], "default_us": default[stat] if default else None,
            "ratio": (float(winner[stat]) / float(default[stat])
                      if default and default[stat] else None),
            "candidates": len(cands),
        })
    cols = ["collective", "nprocs", "mapping", "size", "best", "best_us", "default_us",
            "ratio", "candidates"]
    return render(out, cols, fmt) if out else "no measurements match"
