"""Tidy CSV tables (one measured point per line) into rows: `collbench ingest FILE.csv
--column FIELD=COLUMN ...`.

The user names, for each collbench field, the table's column that holds it; what no column
holds comes from the ingest options (--collective, --nprocs, --mapping, ...). Units are the
field's: sizes in bytes, times in µs unless `--time-unit` says otherwise, bandwidth in MB/s
(10⁶ B/s). `--where COLUMN=VALUE` (equal) or `COLUMN~TEXT` (contains) keeps only matching
lines. Every value is checked and bounded; a bad one is one line naming the file, its line,
the column, the value and what is valid.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from collbench.catalog.algorithms import Catalog
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.errors import UserError, choice_error
from collbench.ingest.common import KNOWN_NAMES, shorten
from collbench.records import make_row

# collbench field -> (kind, unit words for messages). Names carry their unit.
FIELDS: Final = {
    "collective": ("name", "a collective or benchmark name"),
    "algorithm": ("name", "an algorithm name"),
    "algorithm_id": ("int", "the MPI's algorithm id"),
    "size_bytes": ("int", "bytes per rank, as OSU counts them"),
    "avg_us": ("time", "a time"),
    "min_us": ("time", "a time"),
    "max_us": ("time", "a time"),
    "median_us": ("time", "a time"),
    "bandwidth_mbs": ("float", "MB/s (10^6 B/s)"),
    "nprocs": ("int", "processes in the run"),
    "nodes": ("int", "nodes the run used"),
    "ppn": ("int", "processes per node"),
    "mapping": ("name", "the --map-by of the run"),
    "iterations": ("int", "timed iterations"),
    "warmup": ("int", "untimed iterations"),
    "mpi_version": ("name", "the MPI version of the run"),
}
FIGURES: Final = ("avg_us", "min_us", "max_us", "median_us", "bandwidth_mbs")
TIME_UNITS: Final = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
MAX_TIME_US: Final = 1e12  # the bound of every stored time (docs/models.md)
MAX_BANDWIDTH: Final = 1e7  # MB/s: 10 TB/s
MAX_SIZE: Final = 1 << 40
MAX_NPROCS: Final = 1 << 20
MAX_COUNT: Final = 2**31 - 1
MAX_ALGORITHM_ID: Final = 1000
MAX_LINES: Final = 1_000_000
_NAME: Final = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")
_INT: Final = re.compile(r"\s*\+?\d{1,15}\s*")
_FLOAT: Final = re.compile(r"\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?\s*")


@dataclass(frozen=True)
class TableOptions:
    """How to read a tidy table: field -> column, line filters, the unit of times."""

    columns: tuple[tuple[str, str], ...]
    where: tuple[tuple[str, str, str], ...] = ()  # (column, "=" or "~", value)
    time_unit: str = "us"
    nodes_given: bool = False  # --nodes on the command line (else derived from --ppn)

    def normalized(self) -> dict[str, Any]:
        return {"columns": dict(sorted(self.columns)),
                "where": [list(w) for w in self.where], "time_unit": self.time_unit}


def parse_column_option(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`--column FIELD=COLUMN` (repeatable) -> pairs; one line on a bad one."""
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, eq, column = item.partition("=")
        key, column = key.strip(), column.strip()
        if not eq or not column:
            raise UserError(f"--column: {item!r} is not valid; expected FIELD=COLUMN, e.g. "
                            "size_bytes=size")
        if key not in FIELDS:
            raise choice_error("--column", "field", key, FIELDS)
        if any(k == key for k, _ in pairs):
            raise UserError(f"--column {key}: given more than once")
        pairs.append((key, column))
    return tuple(pairs)


def parse_where_option(items: Sequence[str]) -> tuple[tuple[str, str, str], ...]:
    """`--where COLUMN=VALUE` (equal) or `COLUMN~TEXT` (contains), repeatable."""
    out = []
    for item in items:
        m = re.fullmatch(r"([^=~]+)([=~])(.*)", item, re.DOTALL)
        if not m or not m.group(1).strip():
            raise UserError(f"--where: {item!r} is not valid; expected COLUMN=VALUE or "
                            "COLUMN~TEXT, e.g. collective=bcast")
        out.append((m.group(1).strip(), m.group(2), m.group(3)))
    return tuple(out)


def check_table_options(t: TableOptions) -> None:
    if t.time_unit not in TIME_UNITS:
        raise choice_error("--time-unit", "unit", t.time_unit, TIME_UNITS)
    mapped = {k for k, _ in t.columns}
    if "size_bytes" not in mapped:
        raise UserError("--column: size_bytes is not mapped; valid: name the column that "
                        "holds the message size, e.g. --column size_bytes=size")
    if not mapped & set(FIGURES):
        raise UserError(f"--column: no figure is mapped; valid: at least one of "
                        f"{', '.join(FIGURES)}, e.g. --column avg_us=avg")


@dataclass(frozen=True)
class Context:
    """What the rows of one table share (the launch, the ingest options)."""

    name: str  # the file, for messages
    campaign: str
    launch_id: str
    collective: str | None
    algorithm: str | None
    nprocs: int | None
    nodes: int
    ppn: int | None
    mapping: str | None
    binding: str | None
    mpi: str
    mpi_version: str
    repetition: int
    mca: dict[str, str]
    catalog: Catalog | None


def read_table(data: bytes, t: TableOptions, ctx: Context) -> list[dict[str, Any]]:
    """Tidy rows (records.make_row) of a CSV table; UserError on anything not valid."""
    text = data.decode("utf-8", errors="replace").lstrip("\ufeff").replace("\x00", "")
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
    except csv.Error as e:
        raise UserError(f"{ctx.name}:1: not a CSV header: {e}") from None
    if not header or not any(h.strip() for h in header):
        raise UserError(f"{ctx.name}: no CSV header line; valid: a table whose first line "
                        "names its columns")
    names = [h.strip() for h in header]
    index: dict[str, int] = {}
    for i, h in enumerate(names):
        index.setdefault(h, i)
    valid = ", ".join(shorten(n, 40) for n in names[:40])
    for what, column in [*((f"--column {k}", c) for k, c in t.columns),
                         *((f"--where {c}", c) for c, _, _ in t.where)]:
        if column not in index:
            raise UserError(f"{ctx.name}: {what}: column {shorten(column, 40)!r} is not in the "
                            f"header; valid: {valid}")
    columns = {k: index[c] for k, c in t.columns}
    _check_required(t, ctx)
    out: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], int] = {}
    line = 1
    try:
        for cells in reader:
            line = reader.line_num
            if line > MAX_LINES:
                raise UserError(f"{ctx.name}: more than {MAX_LINES:,} lines; valid: a table "
                                "of at most that many lines (split it)")
            if not cells or not any(c.strip() for c in cells):
                continue
            if not _kept(cells, t.where, index):
                continue
            if len(cells) < len(names):
                raise UserError(f"{ctx.name}:{line}: {len(cells)} cells, the header names "
                                f"{len(names)} columns")
            row = _row(cells, columns, t, ctx, f"{ctx.name}:{line}")
            ident = tuple(row[k] for k in ("collective", "algorithm", "nprocs", "nodes", "ppn",
                                           "mapping", "size_bytes", "mpi_version",
                                           "iterations"))
            row["repetition"] = ctx.repetition + seen.get(ident, 0)
            seen[ident] = seen.get(ident, 0) + 1
            out.append(row)
    except csv.Error as e:
        raise UserError(f"{ctx.name}:{line}: not valid CSV: {e}") from None
    if not out:
        raise UserError(f"{ctx.name}: no line kept" + (" by --where" if t.where else "")
                        + "; valid: a table with at least one data line")
    return out


def _check_required(t: TableOptions, ctx: Context) -> None:
    mapped = {k for k, _ in t.columns}
    if "collective" not in mapped and ctx.collective is None:
        raise UserError(f"{ctx.name}: no collective: valid: --column collective=COLUMN or "
                        "--collective NAME")
    if "nprocs" not in mapped and ctx.nprocs is None:
        raise UserError(f"{ctx.name}: no process count: valid: --column nprocs=COLUMN or "
                        "--nprocs N")


def _kept(cells: list[str], where: tuple[tuple[str, str, str], ...],
          index: dict[str, int]) -> bool:
    for column, op, value in where:
        i = index[column]
        cell = cells[i].strip() if i < len(cells) else ""
        if (op == "=" and cell != value.strip()) or (op == "~" and value not in cell):
            return False
    return True


def _cell(cells: list[str], columns: dict[str, int], key: str) -> str | None:
    i = columns.get(key)
    if i is None:
        return None
    value = cells[i].strip()
    return value or None


def _bad(where: str, column: str, value: str, valid: str) -> UserError:
    return UserError(f"{where}: {column}: {shorten(value)!r} is not valid; valid: {valid}")


def _int(where: str, column: str, value: str, low: int, high: int, words: str) -> int:
    if not _INT.fullmatch(value) or not low <= int(value) <= high:
        raise _bad(where, column, value, f"{words}, a whole number from {low} to {high:,}")
    return int(value)


def _float(where: str, column: str, value: str, high: float, scale: float,
           words: str) -> float:
    number = float(value) * scale if _FLOAT.fullmatch(value) else math.nan
    if not (math.isfinite(number) and 0 <= number <= high):
        raise _bad(where, column, value, f"{words} from 0 to {high:g}")
    return number


def _row(cells: list[str], columns: dict[str, int], t: TableOptions, ctx: Context,
         where: str) -> dict[str, Any]:
    names = dict(t.columns)

    def col(key: str) -> str:
        return f"{names[key]} ({key})"

    values: dict[str, Any] = {}
    for key in ("algorithm_id", "size_bytes", "nprocs", "nodes", "ppn", "iterations",
                "warmup"):
        cell = _cell(cells, columns, key)
        if cell is None:
            continue
        low = 0 if key in ("algorithm_id", "size_bytes", "warmup") else 1
        high = {"algorithm_id": MAX_ALGORITHM_ID, "size_bytes": MAX_SIZE,
                "nprocs": MAX_NPROCS, "nodes": MAX_NPROCS, "ppn": MAX_NPROCS}.get(
                    key, MAX_COUNT)
        values[key] = _int(where, col(key), cell, low, high, FIELDS[key][1])
    scale = TIME_UNITS[t.time_unit]
    for key in FIGURES:
        cell = _cell(cells, columns, key)
        if cell is None:
            continue
        if key == "bandwidth_mbs":
            values[key] = _float(where, col(key), cell, MAX_BANDWIDTH, 1.0, "MB/s")
        else:
            values[key] = _float(where, col(key), cell, MAX_TIME_US, scale,
                                 f"a time in {t.time_unit} (bounded to µs)")
    if "size_bytes" not in values:
        raise _bad(where, col("size_bytes"), "", "a size in bytes (the cell is empty)")
    if not any(k in values for k in FIGURES):
        figs = [k for k in FIGURES if k in columns]
        raise _bad(where, ", ".join(col(k) for k in figs), "",
                   "at least one figure (every mapped figure cell is empty)")
    collective = _cell(cells, columns, "collective") or ctx.collective
    if collective not in KNOWN_NAMES:
        raise choice_error(f"{where}: {col('collective')}" if "collective" in columns
                           else f"{where}: --collective", "collective", collective or "",
                           KNOWN_NAMES)
    nprocs = values.get("nprocs", ctx.nprocs)
    assert nprocs is not None  # _check_required
    nodes, ppn = _placement(values, nprocs, t, ctx, where, col)
    mapping = _cell(cells, columns, "mapping") or ctx.mapping
    _check_mapping(mapping, where, col("mapping") if "mapping" in columns else "--mapping")
    version = _cell(cells, columns, "mpi_version") or ctx.mpi_version
    if not _NAME.fullmatch(version):
        raise _bad(where, col("mpi_version"), version, "a version such as 4.1.6")
    algorithm, algorithm_id, selection = _algorithm(
        collective, _cell(cells, columns, "algorithm") or ctx.algorithm,
        values.get("algorithm_id"), ctx, where, col)
    params = {"mca": {k: v for k, v in sorted(ctx.mca.items())
                      if not is_forcing_mca(k) and not is_forcing_env(k)}}
    return make_row(
        campaign=ctx.campaign, launch_id=ctx.launch_id, repetition=ctx.repetition,
        backend="ingest", source="csv", mpi=ctx.mpi, mpi_version=version,
        collective=collective, algorithm=algorithm, algorithm_id=algorithm_id, segsize=0,
        fanout=0, selection=selection, params=json.dumps(params, sort_keys=True),
        nprocs=nprocs, nodes=nodes, ppn=ppn, mapping=mapping, binding=ctx.binding,
        size_bytes=values["size_bytes"], iterations=values.get("iterations"),
        warmup=values.get("warmup"), avg_us=values.get("avg_us"),
        min_us=values.get("min_us"), max_us=values.get("max_us"),
        median_us=values.get("median_us"), bandwidth_mbs=values.get("bandwidth_mbs"),
        metrics=None, validated=None, status="ok", error=None)


def _placement(values: dict[str, Any], nprocs: int, t: TableOptions, ctx: Context,
               where: str, col: Any) -> tuple[int, int]:
    """(nodes, ppn): columns, else options; with --ppn and no --nodes, the nodes a run
    filling ppn ranks per node uses (ceil(nprocs / ppn))."""
    ppn = values.get("ppn", ctx.ppn)
    if "nodes" in values:
        nodes = values["nodes"]
    elif ppn is not None and not t.nodes_given:
        nodes = -(-nprocs // ppn)
    else:
        nodes = ctx.nodes
    if nodes > nprocs:
        raise _bad(where, col("nodes") if "nodes" in values else "--nodes", str(nodes),
                   f"at most nprocs ({nprocs}) nodes")
    if ppn is None:
        ppn = -(-nprocs // nodes)
    elif ppn * nodes < nprocs:
        raise _bad(where, col("ppn") if "ppn" in values else "--ppn", str(ppn),
                   f"ppn x nodes ({nodes}) >= nprocs ({nprocs})")
    return nodes, min(ppn, nprocs)


def _check_mapping(mapping: str | None, where: str, column: str) -> None:
    from collbench.spec.fields import MAP_BY  # the spec's choices: one vocabulary

    if mapping is not None and mapping not in MAP_BY:
        raise choice_error(f"{where}: {column}", "mapping", mapping, MAP_BY)


def _algorithm(collective: str, name: str | None, ident: int | None, ctx: Context,
               where: str, col: Any) -> tuple[str, int | None, str]:
    """(name, id, selection): the table's name and/or id, checked with the MPI's table."""
    if (name is None or name == "default") and not ident:
        return "default", 0 if ctx.catalog is None or ctx.catalog.implementation == "openmpi" \
            else None, "none"
    if ctx.catalog is None:
        if name is None:
            raise _bad(where, col("algorithm_id"), str(ident),
                       f"an id collbench can name: it has no algorithm table for {ctx.mpi} "
                       f"{ctx.mpi_version}; map --column algorithm=COLUMN too")
        if not _NAME.fullmatch(name):
            raise _bad(where, col("algorithm"), name, "an algorithm name (letters, digits, "
                       "'_', '.', ':', '+', '-')")
        return name, ident, "launch"
    ref: str | int = name if name is not None else int(ident or 0)
    label = col("algorithm") if name is not None else col("algorithm_id")
    alg = ctx.catalog.resolve(collective, ref, f"{where}: {label}")
    if ident is not None and alg.id is not None and alg.id != ident:
        raise _bad(where, col("algorithm_id"), str(ident),
                   f"{alg.id}, the id of {alg.name} in {ctx.catalog.implementation} "
                   f"{ctx.catalog.version}")
    return alg.name, alg.id, "launch"
