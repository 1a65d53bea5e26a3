"""The one way to read a results folder: what a point is, its values decoded once, the
pooling over repetitions, and the statistic table.

A *point* is one thing measured, repeated over launches. Its identity (IDENTITY) is the
collective, the coll component that served it (records format 3; unknown before), the
algorithm with its segment size and fanout, the placement (nprocs, nodes,
ppn, mapping, binding), the message size, the MPI, and the `context`: every MCA setting,
environment variable and workload parameter of the launch, without the keys that only force
the algorithm (the algorithm columns say what was forced), with a non-blocking point's
settings (test_calls, compute). Two rows with the same identity are repetitions of one
point; anything else is another point.

    con = connect(store)        DuckDB with a `point_rows` view: the measurements, with
                                `mpi` as the MPI's key, `context`, and every numeric
                                metrics figure (`<name>_us`, `<name>_pct`) as a column
    rows = read(store, ...)     those rows as dicts (the readers in Python)
    narrow(rows, keep, ...)     a reader that keeps a subset of the identity is refused in
                                one line where two rows of one kept point differ elsewhere
    pool(rows, figure, keep)    points with their ok values in repetition order

The metrics JSON is decoded in DuckDB; the params JSON once per distinct value (a campaign
holds a handful), by `params_of`, which every reader that needs a launch parameter uses.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from collbench.catalog.forcing import DEFAULT_TRANSPORT, is_forcing_env, is_forcing_mca
from collbench.errors import UserError, choice_error
from collbench.records import COLUMNS, UNKNOWN_COMPONENT
from collbench.store import Store

if TYPE_CHECKING:
    import duckdb

IDENTITY: Final = ("collective", "component", "algorithm", "segsize", "fanout", "nprocs",
                   "nodes", "ppn", "mapping", "binding", "size_bytes", "mpi", "context")

# --- the statistic table ------------------------------------------------------------------
# `--stat NAME` -> the figure it compares, for every command (any numeric `<name>_us` figure
# the rows' metrics hold works too: figure_of). The first four are row columns.
STATS: Final[dict[str, str]] = {
    "avg": "avg_us", "median": "median_us", "min": "min_us", "max": "max_us",
    "completion": "completion_us",
    "overall": "overall_us", "pure": "pure_us", "overlap_pct": "overlap_pct",
}
# Statistics whose figure is a stored row column (readers that query columns take these).
COLUMN_STATS: Final = {k: v for k, v in STATS.items() if v in COLUMNS}
# Non-blocking figures (only ibcast, iallgather, ... rows have them).
NONBLOCKING_STATS: Final = {k: STATS[k] for k in ("overall", "pure", "overlap_pct")}
# Timing statistics (tune, the report's default choices): all but the non-blocking ones.
TIMING_STATS: Final = {k: v for k, v in STATS.items() if k not in NONBLOCKING_STATS}
# Statistics where more is better and the effect is a difference (percentage points), not
# a ratio: an overlap of 0 % is common and a ratio to it means nothing.
DIFFERENCE_STATS: Final = frozenset({"overlap_pct"})
# The settings that make two non-blocking points different experiments.
SETTING_KEYS: Final = ("test_calls", "compute")

# Figures kept in metrics that readers name: columns of `point_rows` even where no row has
# them (NULL), so that a query naming one never fails on a folder without it.
METRIC_FIGURES: Final = ("completion_us", "synced_avg_us", "sync_error_us", "overall_us",
                         "compute_us", "init_us", "test_us", "wait_us", "pure_us",
                         "overlap_pct", "max_hidden_pct")
_FIGURE_KEY: Final = re.compile(r"[A-Za-z][A-Za-z0-9_]*_(us|pct)")
VIEW: Final = "point_rows"


def figure_of(stat: str, rows: Sequence[Mapping[str, Any]] = (),
              where: str = "collbench compare") -> str:
    """The figure `--stat NAME` names: a STATS one, or a numeric `NAME_us` figure some of
    the rows (from `read`) hold, so a figure the kernel adds works without a change here."""
    found = {k.removesuffix("_us"): k for k in (rows[0] if rows else ())
             if k.endswith("_us") and k not in COLUMNS
             and any(r.get(k) is not None for r in rows)}
    known = {**found, **STATS}
    if stat not in known:
        raise choice_error(where, "--stat", stat, known)
    return known[stat]


# --- decoding -----------------------------------------------------------------------------

@lru_cache(maxsize=4096)
def _decoded(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def params_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The launch parameters of a row as a dict ({} when absent or not an object); decoded
    once per distinct value."""
    raw = row.get("params")
    data = _decoded(raw) if isinstance(raw, str) and raw else None
    return dict(data) if isinstance(data, dict) else {}


def context_of(text: str | None) -> dict[str, Any] | None:
    """A params or context JSON string as a dict: {} when empty, None when it is not a JSON
    object (the caller keeps the text); decoded once per distinct value."""
    if not text:
        return {}
    data = _decoded(text)
    return dict(data) if isinstance(data, dict) else None


def metrics_of(raw: str | None) -> dict[str, Any]:
    """A row's metrics JSON as a dict, for the few readers that need non-numeric entries
    (a program's grid, a model's name); numeric figures are columns of `point_rows`."""
    if not isinstance(raw, str) or not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def context(params: str | None, setting: Mapping[str, Any] | None = None) -> str | None:
    """The context a row's params set: without forcing keys, with a non-blocking point's
    settings under "nonblocking"; canonical JSON, None when empty."""
    if setting:
        base = context(params)
        data = _decoded(base) if base and base.startswith("{") else {}
        data = dict(data) if isinstance(data, dict) else {}
        if base and not data:
            data = {"params": base}
        return json.dumps(dict(data, nonblocking=dict(setting)), sort_keys=True)
    if not params:
        return None
    data = _decoded(params)
    if not isinstance(data, dict):
        return params
    mca = {k: v for k, v in (data.get("mca") or {}).items() if not is_forcing_mca(k)}
    env = {k: v for k, v in (data.get("env") or {}).items() if not is_forcing_env(k)}
    rest = {k: v for k, v in data.items() if k not in ("mca", "env") and v}
    kept = dict(rest, **({"mca": mca} if mca else {}), **({"env": env} if env else {}))
    return json.dumps(kept, sort_keys=True) if kept else None


def transport(context_json: str | None) -> str:
    """A context's MCA and environment settings as a label ("btl=self,sm"); "default" when
    there are none (a ping-pong's transport setting)."""
    if not context_json:
        return DEFAULT_TRANSPORT
    data = _decoded(context_json)
    if not isinstance(data, dict):
        return context_json
    parts = []
    for key in ("mca", "env"):
        table = data.get(key) or {}
        if isinstance(table, dict):
            parts += [f"{k}={v}" for k, v in sorted(table.items())]
    return " ".join(parts) or DEFAULT_TRANSPORT


# --- the view -----------------------------------------------------------------------------

# Readers take no lock: a run rewriting the folder (`--retry-failed` removes the rows of
# failed launches, then stores them again) can remove a rows file between the folder being
# listed and the file being read (by the damage check, then by DuckDB). The folder is then
# listed and read again, a few times.
REREADS: Final = 8  # a read races a rewrite about 1 in 10 times, more on a loaded machine
GONE: Final = ("No such file", "No files found")  # what DuckDB says of a file gone


def connect(store: Store) -> duckdb.DuckDBPyConnection:
    """The folder's DuckDB connection (Store.connect) with the `point_rows` view."""
    return _reading(store, _create_view)


def _reading(store: Store, scan: Callable[[duckdb.DuckDBPyConnection], object]
             ) -> duckdb.DuckDBPyConnection:
    """store.connect() after `scan` read the rows files through it; one line when the
    folder cannot be read."""
    import duckdb

    for attempt in range(REREADS + 1):
        last, con = attempt == REREADS, None
        try:
            con = store.connect()
            scan(con)
        except UserError:  # the damage check
            _close(con)
            if last or store.damaged():  # damaged still: not a file gone meanwhile
                raise
            continue
        except duckdb.IOException as e:
            _close(con)
            said = str(e).strip().splitlines()[0]
            if last or not any(gone in said for gone in GONE):
                raise UserError(f"{store.root}: cannot be read ({said}); valid: a results "
                                "folder no run is rewriting, readable") from None
            continue
        except BaseException:
            _close(con)
            raise
        return con
    raise AssertionError("unreachable")


def _close(con: duckdb.DuckDBPyConnection | None) -> None:
    if con is not None:
        con.close()


def _create_view(con: duckdb.DuckDBPyConnection) -> None:
    # one scan of the rows files (measurements reads them anew at every query)
    con.execute(
        "CREATE TEMP TABLE decoded AS SELECT *, CASE WHEN json_valid(metrics) AND "
        "json_type(metrics) = 'OBJECT' THEN metrics::JSON END AS mj FROM measurements")
    keys = {str(k) for (k,) in con.execute(
        "SELECT DISTINCT unnest(json_keys(mj)) FROM decoded WHERE mj IS NOT NULL").fetchall()}
    figures = sorted({k for k in keys if _FIGURE_KEY.fullmatch(k) and k not in COLUMNS}
                     | {f for f in STATS.values() if f not in COLUMNS} | set(METRIC_FIGURES))
    settings = [f"json_extract(mj, '$.{k}')::VARCHAR" for k in SETTING_KEYS]
    distinct = con.execute(f"SELECT DISTINCT params, {', '.join(settings)} FROM decoded"
                           ).fetchall()
    con.execute("CREATE TEMP TABLE contexts (params VARCHAR, test_calls VARCHAR, "
                "compute VARCHAR, context VARCHAR)")
    if distinct:
        con.executemany("INSERT INTO contexts VALUES (?, ?, ?, ?)",
                        [(p, tc, cp, context(p, _setting(tc, cp))) for p, tc, cp in distinct])
    numeric = ", ".join(
        f"CASE WHEN json_type(mj, '$.{k}') IN ('BIGINT', 'UBIGINT', 'DOUBLE') "
        f"THEN (mj->>'$.{k}')::DOUBLE END AS \"{k}\"" for k in figures)
    on = " AND ".join(f"{a} IS NOT DISTINCT FROM c.{b}" for a, b in
                      (("d.params", "params"), (settings[0].replace("mj", "d.mj"), "test_calls"),
                       (settings[1].replace("mj", "d.mj"), "compute")))
    # mpi: the MPI's key (openmpi-4.1.8); format-1 kernel rows kept name and version apart
    mpi = ("CASE WHEN d.mpi_version IS NOT NULL AND d.mpi_version <> '' AND d.mpi IS NOT NULL "
           "AND NOT ends_with(d.mpi, d.mpi_version) THEN d.mpi || '-' || d.mpi_version "
           "ELSE d.mpi END AS mpi")
    # component: format 1-2 rows and ingested files did not record one
    component = f"coalesce(d.component, '{UNKNOWN_COMPONENT}') AS component"
    con.execute(
        f"CREATE TEMP VIEW {VIEW} AS SELECT d.* EXCLUDE (mj, mpi, component), {mpi}, "
        f"{component}, c.context"
        f"{', ' + numeric if numeric else ''} "
        f"FROM decoded d LEFT JOIN contexts c ON {on}")


def _setting(test_calls: str | None, compute: str | None) -> dict[str, Any]:
    out = {}
    for key, raw in (("test_calls", test_calls), ("compute", compute)):
        value = _decoded(raw) if raw is not None else None
        if value is not None:
            out[key] = value
    return out


def read(store: Store, *, collective: str | None = None, nprocs: int | None = None,
         collectives: Iterable[str] = (), ok: bool = False) -> list[dict[str, Any]]:
    """The rows of the folder (every status, or only ok ones) as dicts: the stored columns
    (`mpi` as the MPI's key), `context`, and the numeric metrics figures."""
    clauses, args = [], []
    for col, val in (("collective", collective), ("nprocs", nprocs)):
        if val is not None:
            clauses.append(f"{col} = ?")
            args.append(val)
    wanted = list(collectives)
    if wanted:
        clauses.append(f"collective IN ({', '.join('?' * len(wanted))})")
        args += wanted
    if ok:
        clauses.append("status = 'ok'")
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    con = connect(store)
    try:
        cur = con.execute(f"SELECT * FROM {VIEW}{where}", args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def present(store: Store) -> list[tuple[str, int]]:
    """(collective, nprocs) of every row of the folder, sorted: what a filter can name."""
    found: list[tuple[str, int]] = []

    def scan(con: duckdb.DuckDBPyConnection) -> None:
        found[:] = sorted((str(c), int(n or 0)) for c, n in con.execute(
            "SELECT DISTINCT collective, nprocs FROM measurements").fetchall())

    _reading(store, scan).close()
    return found


def identity(row: Mapping[str, Any], keep: Sequence[str] = IDENTITY) -> tuple[Any, ...]:
    """The values of `keep` (identity fields) of a row; segsize and fanout 0 when unset."""
    return tuple(int(row.get(f) or 0) if f in _INTS else row.get(f) for f in keep)


_INTS: Final = frozenset({"segsize", "fanout", "size_bytes", "nprocs"})


def _field(row: Mapping[str, Any], name: str) -> Any:
    return identity(row, (name,))[0]


def narrow(rows: Sequence[Mapping[str, Any]], keep: Sequence[str], where: str,
           reader: str) -> None:
    """Refuse (one line) where two rows with the same values of `keep` differ in an
    identity field `keep` drops: the reader would merge two points into one."""
    dropped = [f for f in IDENTITY if f not in keep]
    if not dropped:
        return
    seen: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for r in rows:
        key, other = identity(r, keep), identity(r, dropped)
        first = seen.setdefault(key, other)
        if first != other:
            i = next(i for i, (a, b) in enumerate(zip(first, other, strict=True)) if a != b)
            name = dropped[i]
            values = sorted({str(_field(x, name)) for x in rows}, key=str)
            shown = ", ".join(values[:3]) + (f" and {len(values) - 3} more"
                                             if len(values) > 3 else "")
            raise UserError(
                f"{where}: {reader} reads one {_WHAT.get(name, name)} per point and this "
                f"folder holds {len(values)} ({shown}); valid: a folder with one, or "
                "`collbench compare`, which keeps them apart")


_WHAT: Final = {"context": "MCA/environment/workload setting", "mpi": "MPI",
                "component": "coll component"}


@dataclass(frozen=True)
class Point:
    """One point: its identity (the `keep` fields), every row of it (any status) and the
    figure's values of its ok rows, in repetition order."""

    key: tuple[Any, ...]
    rows: tuple[dict[str, Any], ...]
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)


def _order(row: Mapping[str, Any]) -> tuple[Any, ...]:
    rep = row.get("repetition")
    return (rep is None, rep or 0, row.get("launch_id") or "")


def pool(rows: Iterable[dict[str, Any]], figure: str, keep: Sequence[str] = IDENTITY,
         positive: bool = False) -> list[Point]:
    """The rows grouped into points (first-seen order), each with the figure's values of
    its ok rows (only values > 0 with `positive`), in repetition order."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(identity(r, keep), []).append(r)
    out = []
    for key, members in groups.items():
        members.sort(key=_order)
        values = tuple(float(r[figure]) for r in members
                       if r.get("status") == "ok" and r.get(figure) is not None
                       and (not positive or float(r[figure]) > 0))
        out.append(Point(key, tuple(members), values))
    return out
