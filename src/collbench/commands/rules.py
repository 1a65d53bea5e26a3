"""`collbench rules check FILE` and `collbench rules verify FILE -n N`: what Open MPI
would make of a rules file, and proof that it runs what the file says."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from collbench.commands import options
from collbench.commands.tune import add_placement, nprocs_list, placement
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
    c.add_argument("rules", type=Path, help="rules file (coll/tuned's, or coll/han's with --han)")
    c.add_argument("--han", action="store_true",
                   help="the file is a coll/han dynamic rules file (Open MPI 5.0's "
                        "coll_han_dynamic_rules_filename, as `tune` writes beside the tuned "
                        "one): read it as coll/han does and list its rules")
    c.add_argument("--impi", action="store_true",
                   help="the file is an Intel MPI JSON tuning file (I_MPI_TUNING): read it "
                        "as Intel MPI does and check the preset ids against --mpi's")
    options.add_mpi(c)
    options.add_table_output(c)
    c.set_defaults(func=cmd_check)

    vf = ra.add_parser("verify", help="prove Open MPI runs what the file says",
                       description="Run the kernel with the file active at each threshold "
                                   "and just below it, and show the algorithm Open MPI ran "
                                   "(LD_PRELOAD trace; timing where that cannot work); exit "
                                   "1 on any mismatch.")
    vf.add_argument("rules", type=Path, help="coll/tuned rules file")
    vf.add_argument("-n", "--nprocs", type=nprocs_list, required=True,
                    help="process count(s), e.g. 4 or 2,4")
    vf.add_argument("--method", choices=("auto", "trace", "timing"), default="auto",
                    help="trace: the algtrace library records what ran; timing: compare "
                         "timings (other MPIs); auto: trace where it works")
    vf.add_argument("--repetitions", type=options.count(1, 100_000), default=5,
                    help="timing method only")
    vf.add_argument("--mca", type=_mca, action="append", default=[], metavar="NAME=VALUE",
                    help="extra MCA setting for the runs (repeatable)")
    vf.add_argument("--keep", type=Path, help="keep traces and logs in this folder")
    vf.add_argument("--timeout", type=options.seconds, default=300, help="seconds per launch")
    vf.add_argument("--han", type=Path, metavar="FILE",
                    help="coll/han's rules file written beside RULES (RULES.han): prove both, "
                         "the component han hands each point to and tuned's rule at the top "
                         "level (Open MPI 5.0 on several nodes: use --hostfile)")
    vf.add_argument("--impi", action="store_true",
                    help="the file is an Intel MPI JSON tuning file (I_MPI_TUNING): trace "
                         "the algorithm functions Intel MPI calls with the file, with the "
                         "preset it names forced and without it (one node; --mpi impi==V)")
    add_placement(vf)
    options.add_mpi(vf)
    vf.set_defaults(func=cmd_verify)



def cmd_check(args: argparse.Namespace) -> int:
    if args.impi:
        from collbench.commands.impi_tuning import cmd_check as impi_check

        return impi_check(args)
    if args.han:
        from collbench.tune import han

        text = han.load(args.rules)  # an unreadable file: one line, exit 2
        try:
            rules = han.parse(text, str(args.rules))
        except UserError as e:  # what coll/han would reject: a finding, exit 1 (as tuned's)
            options.emit(args, f"rejected: {e}")
            return 1
        options.emit(args, "\n".join([f"{args.rules}: coll/han reads it", *han.describe(rules)]))
        return 0
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
    if args.impi:
        from collbench.commands.impi_tuning import cmd_verify as impi_verify

        return impi_verify(args)
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
    han_rules = None
    if args.han is not None:
        from collbench.tune import han

        han_rules = (han.read(args.han), args.han)  # one line where coll/han would reject it
    result = verify(report.reading.rules, args.rules, args.nprocs, mpi, catalog,
                    method=args.method, repetitions=args.repetitions, timeout=args.timeout,
                    extra_mca=args.mca, keep=args.keep,
                    log=lambda s: print(f"collbench: {s}", file=sys.stderr),
                    hosts=placement(args), han=han_rules)
    sys.stdout.write(render(result))
    return 1 if result.mismatches else 0
