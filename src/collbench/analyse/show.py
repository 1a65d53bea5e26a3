"""`collbench show`: one line per point, its figures pooled over repetitions and named so.

Every column is `<statistic>_<figure>` (analyse/columns.py): `median_avg_us` is the median
over the ok repetitions of OSU's average latency, the same value `compare` puts beside its
baseline; `min_min_us`/`max_max_us` the fastest/slowest rank over all repetitions.
`show --best` is `compare` itself (same filters, same significance), shortened.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from collbench import points
from collbench.analyse import columns, stability
from collbench.analyse.compare import algorithm_label, block_title, compare
from collbench.analyse.dimensions import mpi_label
from collbench.analyse.nonblocking import NOT_MODELLED, NOT_MODELLED_NOTE, SHOW_FIGURES
from collbench.analyse.render import effect_of
from collbench.errors import UserError
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import render

# The point identity (collbench.points.IDENTITY) and the MPI's version, for the columns.
GROUP: Final = ("collective", "component", "nprocs", "nodes", "ppn", "mapping", "binding",
                "context", "mpi", "mpi_version", "algorithm", "segsize", "fanout", "size_bytes")
# (statistic, figure) of each pooled column of the table, in order.
POOLED: Final = (("median", "avg_us"), ("min", "min_us"), ("max", "max_us"),
                 ("median", "median_us"), ("median", "bandwidth_mbs"))
# Figures kept in metrics: completion time and the non-blocking ones (medians over ok
# repetitions); a column appears only where some row has the figure.
METRIC_FIGURES: Final = ("completion_us", *SHOW_FIGURES)
NB_SETTINGS: Final = ("test_calls", "compute")
TAIL: Final = ("iterations", "reps", "status")


def _name(stat: str, figure: str) -> str:
    return columns.point_column(stat, figure)


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
    """One row per point, pooled over its ok repetitions as POOLED names it."""
    where, args = _filters(collective, algorithm, nprocs)
    group = ", ".join(GROUP)
    pooled = [f"{stat}({fig}) FILTER (status = 'ok') AS {_name(stat, fig)}"
              for stat, fig in POOLED]
    pooled += [f"median(\"{k}\") FILTER (status = 'ok') AS {_name('median', k)}"
               for k in METRIC_FIGURES]
    settings = [f"json_extract_string(metrics, '$.{k}') AS {k}" for k in NB_SETTINGS]
    sql = f"""
        SELECT {group}, {', '.join(settings)}, {', '.join(pooled)},
               max(iterations) AS iterations,
               count(*) FILTER (status = 'ok') AS reps,
               bool_or(backend IN ({', '.join(repr(b) for b in sorted(stability.SIMULATED))}))
                   AS simulated,
               string_agg(DISTINCT status, ',' ORDER BY status) AS status
        FROM {points.VIEW}{where}
        GROUP BY {group}, test_calls, compute
        ORDER BY collective, nprocs, nodes, ppn, mapping, binding, context, mpi, mpi_version,
                 algorithm, component, segsize, fanout, TRY_CAST(test_calls AS BIGINT) NULLS FIRST,
                 compute NULLS FIRST, size_bytes
    """
    con = points.connect(store)
    try:
        cur = con.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def _label(r: dict[str, Any]) -> str:
    return algorithm_label(str(r["algorithm"]), int(r["segsize"] or 0), int(r["fanout"] or 0),
                           r["component"])


def show(store: Store, fmt: str = "table", collective: str | None = None,
         algorithm: str | None = None, nprocs: int | None = None) -> str:
    rows = aggregate(store, collective, algorithm, nprocs)
    hidden = [_name("median", k) for k in METRIC_FIGURES if k in NOT_MODELLED]
    simulated = [r for r in rows if r["simulated"] and any(r.get(c) is not None for c in hidden)]
    for r in rows:
        r["size"] = format_size(int(r["size_bytes"]))
        r["algorithm"] = _label(r)
    hidden = [c for c in hidden if any(r.get(c) is not None for r in simulated)]
    for r in simulated:  # a simulated overlap reads 100 % whatever the MPI would do
        r.update(dict.fromkeys(hidden))
    pooled = [_name(s, f) for s, f in POOLED]
    metric = [_name("median", k) for k in METRIC_FIGURES]
    present = [c for c in (*NB_SETTINGS, *metric) if any(r.get(c) is not None for r in rows)]
    if fmt != "table":
        cols = [c for c in GROUP if c != "algorithm"] + ["algorithm", "size", *pooled,
                                                          *present, *TAIL]
        return render(rows, list(dict.fromkeys(cols)), fmt)
    if not rows:
        return "no measurements match"
    blocks: list[str] = []
    for key, block in _blocks(rows):
        cols = [c for c in pooled if any(r.get(c) is not None for r in block)]
        extra = [c for c in present if any(r.get(c) is not None for r in block)]
        settings = [c for c in extra if c in NB_SETTINGS]
        figures = [c for c in extra if c not in NB_SETTINGS]
        blocks.append(f"# {key}\n" + render(
            block, ["algorithm", "component", *settings, "size", *cols, *figures, *TAIL],
            "table"))
    legend = "; ".join(f"{_name(s, f)}: {columns.STATISTICS[s]} of {f}"
                       for s, f in POOLED[:4])
    notes = [n for n in (oversubscribed(store, rows),
                         f"{', '.join(hidden)}: {NOT_MODELLED_NOTE}, left empty in "
                         f"{len(simulated)} simulated rows" if simulated else None) if n]
    return (f"# {legend} (docs/statistics.md)\n" + "".join(f"# NOTE: {n}\n" for n in notes)
            + "\n" + "\n\n".join(blocks))


def oversubscribed(store: Store, rows: Sequence[dict[str, Any]]) -> str | None:
    """What `compare`'s oversubscription warning says, for a table of pooled rows: more
    ranks per node than the cores provenance.json records (never for a simulation)."""
    try:
        cores = store.provenance().get("cores")
        backend = store.campaign().get("backend")
    except UserError:
        return None
    if not isinstance(cores, int) or cores < 1 or backend in stability.SIMULATED:
        return None
    per_node = [int(r["ppn"] or (r["nprocs"] // r["nodes"] if r["nodes"] else r["nprocs"]))
                for r in rows]
    worst = max(per_node, default=0)
    if worst <= cores:
        return None
    return (f"oversubscribed: up to {worst} ranks per node on the {cores} cores recorded in "
            f"provenance.json; their timings are noisy: compare algorithms with nprocs <= "
            f"{cores}")


def _blocks(rows: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    several = len({(r["mpi"], r["mpi_version"]) for r in rows}) > 1
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        # the non-blocking settings have columns of their own here
        ctx = {k: v for k, v in (points.context_of(r["context"]) or {}).items()
               if k != "nonblocking" and v}
        key = block_title(r["collective"], r["nprocs"], r["nodes"], r["ppn"], r["mapping"],
                          r["binding"], json.dumps(ctx, sort_keys=True) if ctx else None)
        if several:
            key += f" mpi={mpi_label(r)}"  # the key (openmpi-5.0.11), format 1 rows too
        out.setdefault(key, []).append(r)
    return list(out.items())


def best(store: Store, fmt: str = "table", collective: str | None = None,
         nprocs: int | None = None, stat: str = "avg", baseline: str = "default",
         confidence: float = 0.95) -> str:
    """The fastest variant per size and what `compare` recommends there, from compare()."""
    c = compare(store, baseline=baseline, stat=stat, collective=collective, nprocs=nprocs,
                confidence=confidence)
    ratios = {id(r.point): r for r in c.ratios}
    base_name = f"{c.baseline_text}_{c.value_name}"
    rows = []
    for b in c.best:
        pts = [p for p in c.points if p.size_key == b.key]
        ref = next((p for p in pts if p.label == c.baseline), None)
        r = ratios.get(id(b.winner))
        rows.append({
            "block": block_title(*b.key[:7]), "size": format_size(b.key[7]),
            "fastest": b.winner.label, c.value_name: b.winner.value,
            base_name: ref.value if ref else None,
            "effect": "baseline" if b.winner is ref else effect_of(c, r),
            "significant": r.significant if r else None, "recommended": b.recommended,
            "candidates": len(pts)})
    cols = ["block", "size", "fastest", c.value_name, base_name, "effect", "significant",
            "recommended", "candidates"]
    if fmt != "table":
        return render(rows, cols, fmt)
    note = f"# {c.notice}\n" if c.notice else ""
    note += "".join(f"# NOTE: {stability.line(w)}\n" for w in c.warnings
                    if w.kind == "oversubscribed")
    return (f"# {columns.describe('median', c.stat)}; fastest per size against "
            f"{c.baseline_text}; significant and recommended as `collbench compare`\n"
            f"{note}\n" + render(rows, cols, "table"))
