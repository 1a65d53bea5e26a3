"""`collbench query RESULTS SQL` and `collbench export RESULTS -o FILE`."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.commands import options
from collbench.errors import UserError
from collbench.store import Store, sql_path
from collbench.storefiles import publish
from collbench.tables import render

if TYPE_CHECKING:
    import duckdb


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("query", help="SQL over the folder (tables: measurements, samples)")
    s.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    s.add_argument("sql", help="one SQL statement over the tables measurements and samples")
    options.add_format(s)
    options.add_table_output(s)
    s.set_defaults(func=cmd_query)

    s = sub.add_parser("export", help="write measurements (or samples) to CSV or Parquet")
    s.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    s.add_argument("-o", "--out", "--output", type=Path, required=True, dest="out",
                   help="file to write: .csv or .parquet (its folder must exist)")
    s.add_argument("--table", choices=("measurements", "samples"), default="measurements",
                   help="which table (default: %(default)s)")
    s.add_argument("--expand-metrics", action="store_true",
                   help="measurements: one more column per key of the metrics JSON (e.g. a "
                        "non-blocking row's overall_us, test_calls, overlap_pct), named "
                        "metric_<key>")
    s.set_defaults(func=cmd_export)


def cmd_query(args: argparse.Namespace) -> int:
    if not args.sql.strip():
        raise UserError('query: the SQL is empty; e.g. "SELECT collective, count(*) FROM '
                        'measurements GROUP BY 1"')
    import duckdb  # lazily: every command's start-up would pay for it

    def scan(con: duckdb.DuckDBPyConnection) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = con.execute(args.sql)
        # None (not a cursor) for a statement that is only a comment
        description = getattr(cur, "description", None)
        names = [d[0] for d in description] if description else []
        return names, cur.fetchall() if names else []  # DuckDB may fail here too (casts)

    try:  # read again if a run rewrites the folder meanwhile
        names, fetched = Store(args.results).reading(scan)
    except duckdb.Error as e:
        # DuckDB's first line says what and where; the rest repeats the SQL with a caret.
        raise UserError(f"query: {str(e).strip().splitlines()[0]}") from None
    if not names:
        raise UserError("query: the statement returns no table (only a SELECT, or another "
                        "statement returning rows, prints one)")
    rows = [dict(zip(names, r, strict=True)) for r in fetched]
    options.emit(args, render(rows, names, args.format))
    return 0


def metric_columns(con: duckdb.DuckDBPyConnection) -> str:
    """`, <expr> AS metric_<key>` for every key of the metrics column: DOUBLE where every
    value is a number, else text."""
    keys = sorted(str(k) for (k,) in con.execute(
        "SELECT DISTINCT unnest(json_keys(metrics)) FROM measurements "
        "WHERE metrics IS NOT NULL").fetchall())
    out = ""
    for key in keys:
        if not re.fullmatch(r"[A-Za-z0-9_]+", key):
            continue  # not a name collbench writes
        path = f"'$.{key}'"
        row = con.execute(f"SELECT bool_and(json_type(metrics, {path}) IN ('DOUBLE', "
                          f"'BIGINT', 'UBIGINT')) FROM measurements WHERE "
                          f"json_type(metrics, {path}) IS NOT NULL").fetchone()
        numeric = bool(row and row[0])
        value = f"json_extract_string(metrics, {path})"
        out += (f", TRY_CAST({value} AS DOUBLE) AS metric_{key}" if numeric
                else f", {value} AS metric_{key}")
    return out


def cmd_export(args: argparse.Namespace) -> int:
    suffix = args.out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise UserError(f"{args.out}: extension {suffix!r} is not valid; valid: .csv, .parquet")
    folder = args.out.parent
    if not folder.is_dir():  # before reading: a mistyped path makes no folders
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UserError(f"export -o {args.out}: the folder {folder} {what}; valid: an "
                        "existing folder")
    import duckdb

    if args.expand_metrics and args.table != "measurements":
        raise UserError("export: --expand-metrics goes with --table measurements")
    store = Store(args.results)
    store.campaign()  # a folder that is none: said before anything is written
    kind = "parquet" if suffix == ".parquet" else "csv, HEADER"

    def copy(tmp: Path, con: duckdb.DuckDBPyConnection) -> None:
        extra = metric_columns(con) if args.expand_metrics else ""
        # USE_TMP_FILE false: DuckDB's own temporary (tmp_<name>) would be one more
        # leftover of a kill; publish()'s temporary is swept and renamed.
        con.execute(f"COPY (SELECT *{extra} FROM {args.table}) TO '{sql_path(tmp)}' "
                    f"(FORMAT {kind}, USE_TMP_FILE false)")

    def write(tmp: Path) -> None:
        try:  # read again if a run rewrites the folder meanwhile
            store.reading(lambda con: copy(tmp, con))
        except duckdb.Error as e:
            raise UserError(f"{args.out}: cannot write: {io_cause(e)}") from None

    publish(args.out, write)
    print(f"wrote {args.out}")
    return 0


def io_cause(error: Exception) -> str:
    """The operating system's words for a failed DuckDB write (its message embeds a JSON
    object with the errno), else DuckDB's first line."""
    m = re.search(r'"errno"\s*:\s*"?(\d+)', str(error))
    if m:
        return os.strerror(int(m.group(1)))
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
