"""`collbench ingest`: OSU / IMB text output, or tidy CSV tables, into a results folder."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collbench.catalog.mpi import MpiInstall, find_mpi
from collbench.commands import options
from collbench.errors import UserError
from collbench.ingest import FORMATS, IngestOptions, ingest_files
from collbench.ingest.table import (
    TIME_UNITS,
    TableOptions,
    parse_column_option,
    parse_where_option,
)

EXAMPLES = """\
examples:
  collbench ingest osu_bcast.out --collective bcast --algorithm pipeline --nprocs 48 \\
      --nodes 2 -o results/orfeo
  collbench ingest osu_bcast.out --nprocs 4 --mca coll_tuned_bcast_algorithm 6 \\
      --mpi openmpi --mpi-version 5.0.11 -o results/forced
  collbench ingest IMB-MPI1.out -o results/imb --nprocs 4
  collbench ingest collectives.csv --column collective=collective \\
      --column algorithm=algorithm --column nprocs=nprocs --column mapping=map_by \\
      --column size_bytes=size_bytes --column avg_us=avg_us --ppn 128 -o results/epyc
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ingest", help="import OSU Micro-Benchmarks / Intel MPI Benchmarks text output",
        description="Store OSU (5.x-7.x) or IMB (IMB-MPI1, IMB-NBC) text output, or tidy CSV "
        "tables (--column), as tidy rows in a results folder; each file becomes one launch. "
        "What the file does not say comes from the options. See docs/ingest.md.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", type=Path, metavar="FILE",
                   help="OSU/IMB output or CSV tables to read (docs/ingest.md)")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="results folder (created if new; may already hold results)")
    p.add_argument("--format", default="auto", help=f"one of {', '.join(FORMATS)}")
    p.add_argument("--collective", help="OSU: when the title does not say; IMB: keep only "
                   "this benchmark")
    p.add_argument("--algorithm", help="what ran: a name or id of the --mpi-version's table "
                   "(default: the algorithm the '### cmd:' line or --mca forced, else "
                   "'default')")
    p.add_argument("--nprocs", help="processes in the job (required for OSU)")
    p.add_argument("--nodes", help="default 1 (CSV tables with --ppn: nprocs / ppn, "
                   "rounded up)")
    p.add_argument("--ppn", help="processes per node (default nprocs / nodes)")
    p.add_argument("--mapping", help="--map-by value of the run")
    p.add_argument("--binding", help="--bind-to value of the run")
    p.add_argument("--mca", action=_McaAction, nargs="+", default=[], metavar="KEY VALUE",
                   help="MCA setting of the run, as mpirun takes it (KEY VALUE, or KEY=VALUE; "
                        "repeatable); the '### cmd:' line's are read too")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="OSU: an option the file's '### cmd:' line does not record: "
                        "test_calls (-t), iterations (-i), warmup (-x); repeatable")
    p.add_argument("--mpi", help="MPI of the run: openmpi, mpich or free text (default: the "
                   "installed MPI's)")
    p.add_argument("--mpi-version", help="its version, whose table names forced ids "
                   "(default: the installed MPI's)")
    p.add_argument("--repetition", default="0", help="repetition number (default 0)")
    p.add_argument("--campaign", help="campaign name (default: the -o folder's name)")
    p.add_argument("--column", action="append", default=[], metavar="FIELD=COLUMN",
                   help="CSV tables: the table's column that holds a collbench field "
                        "(size_bytes, avg_us, collective, algorithm, nprocs, mapping, ...); "
                        "repeatable; implies --format csv")
    p.add_argument("--where", action="append", default=[], metavar="COLUMN=VALUE",
                   help="CSV tables: keep only lines whose COLUMN equals VALUE (COLUMN~TEXT: "
                        "contains TEXT); repeatable, all must hold")
    p.add_argument("--time-unit", default="us",
                   help=f"CSV tables: unit of the time columns, one of {', '.join(TIME_UNITS)}"
                        " (default us)")
    p.set_defaults(func=cmd_ingest)


def _int(flag: str, value: str | None, high: int = options.MAX_NPROCS) -> int | None:
    if value is None:
        return None
    try:
        return options.count(0, high)(value)
    except argparse.ArgumentTypeError as e:
        raise UserError(f"{flag}: {e}") from None


class _McaAction(argparse.Action):
    """`--mca KEY VALUE` as mpirun spells it, or `--mca KEY=VALUE`; words after the pair
    are files (argparse cannot take "one or two" words)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option: str | None = None) -> None:
        words = [str(v) for v in (values or [])]
        take = 1 if "=" in words[0] else 2
        pair, rest = words[:take], words[take:]
        getattr(namespace, self.dest).append(pair)
        namespace.more_files = [*getattr(namespace, "more_files", []), *map(Path, rest)]


def _mca(items: list[list[str]]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in items:
        key, value = item if len(item) == 2 else (item[0].partition("=")[0],
                                                 item[0].partition("=")[2])
        if not key.strip() or not value.strip():
            raise UserError(f"--mca: {' '.join(item)!r} is not valid; expected KEY VALUE (or "
                            "KEY=VALUE), e.g. coll_tuned_bcast_algorithm 6")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def _params(items: list[str]) -> tuple[tuple[str, int], ...]:
    pairs = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"\s*\d{1,10}\s*", value):
            raise UserError(f"--param: {item!r} is not valid; expected KEY=NUMBER, e.g. "
                            "test_calls=25")
        pairs.append((key.strip(), int(value)))
    return tuple(pairs)


def _installed() -> MpiInstall | None:
    """The MPI here (its table names the ids of runs of its version), if there is one."""
    try:
        return find_mpi()
    except UserError:
        return None


def options_from_args(args: argparse.Namespace,
                      installed: MpiInstall | None = None) -> IngestOptions:
    nodes = _int("--nodes", getattr(args, "nodes", None))
    repetition = _int("--repetition", args.repetition)
    return IngestOptions(
        collective=args.collective, algorithm=args.algorithm,
        nprocs=_int("--nprocs", args.nprocs), nodes=1 if nodes is None else nodes,
        ppn=_int("--ppn", args.ppn), mapping=args.mapping, binding=args.binding,
        mca=_mca(args.mca),
        mpi=args.mpi or (installed.implementation if installed else "unknown"),
        mpi_version=args.mpi_version or (installed.version if installed else "unknown"),
        repetition=0 if repetition is None else repetition, campaign=args.campaign,
        format=args.format, params=_params(args.param))


def table_from_args(args: argparse.Namespace) -> TableOptions | None:
    """The CSV reading options, or None for OSU/IMB text output."""
    if not args.column:
        if args.where or args.time_unit != "us":
            raise UserError("--where/--time-unit: only for CSV tables; valid: add --column "
                            "FIELD=COLUMN for each field the table holds")
        return None
    if args.format not in ("auto", "csv"):
        raise UserError(f"--column: a CSV table cannot be --format {args.format}; valid: "
                        "--format csv (or leave --format out)")
    return TableOptions(parse_column_option(args.column), parse_where_option(args.where),
                        args.time_unit, args.nodes is not None)


def cmd_ingest(args: argparse.Namespace) -> int:
    files = [*args.files, *getattr(args, "more_files", [])]
    if not files:
        raise UserError("collbench ingest: no FILE given (see --help)")
    installed = _installed()
    options = options_from_args(args, installed)
    written = ingest_files(files, args.output, options, log=print, installed=installed,
                           table=table_from_args(args))
    skipped = len(files) - len(written)
    print(f"{args.output}: {len(written)} launch{'es' if len(written) != 1 else ''} stored"
          + (f", {skipped} already there" if skipped else ""))
    return 0
