"""`collbench regress OLD NEW`: the significant slowdowns beyond a threshold, exit 1 when
there is one (a CI gate: docs/ci.md)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from collbench.commands import options
from collbench.errors import UserError

FORMATS = ("table", "csv", "json", "markdown")


def threshold(text: str) -> float:
    """'5%' or '0.05' -> 0.05 (argparse type: one line for anything else)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid; valid: a fraction such as 0.05, or a percentage "
            "such as 5%") from None
    if not 0 <= value < 100:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r} is not valid; valid: from 0 to 100 "
                                         "(10000 %)")
    return value


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser(
        "regress", help="CI gate: points of NEW significantly slower than OLD beyond a "
                        "threshold (exit 1 when any)",
        description="Match the points of two results folders (measured or ingested; the "
                    "MPI, MCA settings and machine may differ) and list the regressions: "
                    "NEW/OLD >= 1 + threshold and, with 2 or more repetitions on each side, "
                    "significant (exact Mann-Whitney per point and the ratio's interval "
                    "above 1). Points with fewer repetitions are judged by the "
                    "threshold alone and named untested. Exit status: 1 when there is a "
                    "regression, 0 when there is none, 2 for bad input (docs/ci.md).")
    s.add_argument("old", type=Path, help="the reference results folder")
    s.add_argument("new", type=Path, help="the results folder checked against it")
    s.add_argument("--threshold", type=threshold, default=0.05, metavar="PCT",
                   help="smallest slowdown that counts: 5%% or 0.05 (default: 5%%)")
    add_test_options(s, "figure compared, pooled as its median over repetitions (as "
                        "`compare --stat`; default: %(default)s)")
    s.add_argument("--collective", help="only this collective")
    add_listing_options(s, "every matched point with its verdict, not only the regressions")
    s.set_defaults(func=cmd_regress)


def add_test_options(s: argparse.ArgumentParser, stat_help: str) -> None:
    """--stat and --confidence, as regress and diff-mpi test B against A."""
    s.add_argument("--stat", default="avg", metavar="NAME", help=stat_help)
    s.add_argument("--confidence", type=options.fraction, default=0.95,
                   help="confidence level of the tests (default: %(default)s)")


def add_listing_options(s: argparse.ArgumentParser, all_help: str) -> None:
    """--all, --format and the output file of regress's and diff-mpi's point lists."""
    s.add_argument("--all", dest="everything", action="store_true", help=all_help)
    options.add_format(s, FORMATS)
    options.add_table_output(s)


def cmd_regress(args: argparse.Namespace) -> int:
    from collbench.analyse.regress import COLUMNS, regress, rows, summary
    from collbench.analyse.render import text_or_markdown_table
    from collbench.store import open_results
    from collbench.tables import csv_table

    old, new = open_results(args.old), open_results(args.new)
    if old.root.resolve() == new.root.resolve():
        raise UserError(f"collbench regress: OLD and NEW are the same folder ({old.root}); "
                        "valid: two results folders")
    r = regress(old, new, args.stat, args.threshold, args.confidence, args.collective)
    table = rows(r, args.everything)
    if args.format == "json":
        text = json.dumps(r.to_json(), indent=1)
    elif args.format == "csv":  # no heading line in a CSV: each row names the statistic
        text = csv_table([{**t, "statistic": f"median_{r.figure}"} for t in table],
                         (*COLUMNS, "statistic"))
    else:
        head = ("" if args.format == "markdown" else "# ") + summary(r)
        body = (text_or_markdown_table(table, COLUMNS, args.format == "markdown")
                if table else "no regressions")
        text = f"{head}\n\n{body}"
    options.emit(args, text)
    return 1 if r.regressions else 0
