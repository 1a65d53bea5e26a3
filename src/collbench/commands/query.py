"""`collbench query RESULTS SQL` and `collbench export RESULTS -o FILE`."""

from __future__ import annotations

import argparse
from pathlib import Path

import duckdb

from collbench.commands import options
from collbench.errors import UserError
from collbench.store import Store, publish, sql_path
from collbench.tables import render


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("query", help="SQL over the folder (tables: measurements, samples)")
    s.add_argument("results", type=Path)
    s.add_argument("sql")
    options.add_format(s)
    s.set_defaults(func=cmd_query)

    s = sub.add_parser("export", help="write measurements (or samples) to CSV or Parquet")
    s.add_argument("results", type=Path)
    s.add_argument("-o", "--out", "--output", type=Path, required=True, dest="out")
    s.add_argument("--table", choices=("measurements", "samples"), default="measurements")
    s.set_defaults(func=cmd_export)


def cmd_query(args: argparse.Namespace) -> int:
    con = Store(args.results).connect()
    try:
        cur = con.execute(args.sql)
    except duckdb.Error as e:
        raise UserError(f"query: {str(e).splitlines()[0]}") from None
    names = [d[0] for d in cur.description] if cur.description else []
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    print(render(rows, names, args.format))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    suffix = args.out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise UserError(f"{args.out}: extension {suffix!r} is not valid; valid: .csv, .parquet")
    con = Store(args.results).connect()
    kind = "parquet" if suffix == ".parquet" else "csv, HEADER"

    def write(tmp: Path) -> None:
        con.execute(f"COPY (SELECT * FROM {args.table}) TO '{sql_path(tmp)}' (FORMAT {kind})")

    publish(args.out, write)
    print(f"wrote {args.out}")
    return 0
