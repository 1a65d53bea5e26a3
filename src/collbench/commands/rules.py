"""`collbench rules check FILE` and `collbench rules verify FILE -n N`: what Open MPI
would make of a rules file, and proof that it runs what the file says."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from collbench.commands import options
from collbench.commands.tune import nprocs_list
from collbench.errors import UserError


def _mca(value: str) -> tuple[str, str]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"{value!r} is not valid; valid: NAME=VALUE")
    k, v = value.split("=", 1)
    return k, v


def add_parser(sub: options.Subparsers) -> None:
    r = sub.add_parser("rules", help="check or verify an Open MPI rules file")
    ra = r.add_subparsers(dest="rules_action", required=True)
    c = ra.add_parser("check", help="what Open MPI would reject, ignore or misread",
                      description="Read the file as Open MPI 5.0 does and list every problem "
                                  "with its line; exit 1 if Open MPI would reject the file or "
                                  "ignore or misread part of it.")
    c.add_argument("rules", type=Path)
    options.add_mpi(c)
    options.add_table_output(c)
    c.set_defaults(func=cmd_check)

    vf = ra.add_parser("verify", help="prove Open MPI runs what the file says",
                       description="Run the kernel with the file active at each threshold "
                                   "and just below it, and show the algorithm Open MPI ran "
                                   "(LD_PRELOAD trace; timing where that cannot work); exit "
                                   "1 on any mismatch.")
    vf.add_argument("rules", type=Path)
    vf.add_argument("-n", "--nprocs", type=nprocs_list, required=True,
                    help="process count(s), e.g. 4 or 2,4")
    vf.add_argument("--method", choices=("auto", "trace", "timing"), default="auto")
    vf.add_argument("--repetitions", type=options.count(1, 100_000), default=5,
                    help="timing method only")
    vf.add_argument("--mca", type=_mca, action="append", default=[], metavar="NAME=VALUE",
                    help="extra MCA setting for the runs (repeatable)")
    vf.add_argument("--keep", type=Path, help="keep traces and logs in this folder")
    vf.add_argument("--timeout", type=options.seconds, default=300, help="seconds per launch")
    options.add_mpi(vf)
    vf.set_defaults(func=cmd_verify)



def cmd_check(args: argparse.Namespace) -> int:
    from collbench.catalog.algorithms import Catalog
    from collbench.catalog.load import load_catalog
    from collbench.catalog.openmpi import fallback
    from collbench.tune.check import check, render_report

    try:
        catalog = load_catalog(options.mpi(args))
    except UserError:
        catalog = Catalog("openmpi", "5.0", "built-in table for Open MPI 5.0", fallback())
    if catalog.implementation != "openmpi":
        catalog = Catalog(catalog.implementation, catalog.version, "Open MPI 5.0 table",
                          fallback())
    report = check(args.rules, catalog)
    options.emit(args, render_report(report).rstrip("\n"))
    return 0 if report.ok else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from collbench.catalog.load import load_catalog
    from collbench.tune.check import check, render_report
    from collbench.tune.verify import render, verify

    mpi = options.mpi(args)
    catalog = load_catalog(mpi)
    report = check(args.rules, catalog)
    if report.reading.rules is None:
        sys.stdout.write(render_report(report))
        return 1
    if not report.ok:
        sys.stderr.write(render_report(report))
    result = verify(report.reading.rules, args.rules, args.nprocs, mpi, catalog,
                    method=args.method, repetitions=args.repetitions, timeout=args.timeout,
                    extra_mca=args.mca, keep=args.keep,
                    log=lambda s: print(f"collbench: {s}", file=sys.stderr))
    sys.stdout.write(render(result))
    return 1 if result.mismatches else 0
