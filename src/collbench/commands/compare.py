"""The `collbench compare` subcommand (the main parser registers it with add_parser)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from collbench.analyse.compare import STATS, compare
from collbench.analyse.render import FORMATS, render, render_summary
from collbench.store import Store


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "compare", help="each algorithm against a baseline: ratios, CIs, significance, best",
        description="Compare every algorithm with a baseline per size: the median over "
                    "repetitions of one statistic, ratios with confidence intervals, exact "
                    "Mann-Whitney tests (Holm-corrected per size), the best algorithm per "
                    "size, the size ranges each wins, and stability warnings.")
    s.add_argument("results", type=Path, help="results folder")
    s.add_argument("--baseline", default="default",
                   help="algorithm label to compare against (default: %(default)s)")
    s.add_argument("--collective")
    s.add_argument("--nprocs", type=int)
    s.add_argument("--stat", choices=tuple(STATS), default="avg",
                   help="column compared: avg_us (OSU's), median_us, min_us or max_us "
                        "(default: %(default)s)")
    s.add_argument("--confidence", type=float, default=0.95,
                   help="confidence level of intervals and tests (default: %(default)s)")
    s.add_argument("--format", choices=FORMATS, default="table")
    s.add_argument("--summary", action="store_true",
                   help="only the recommended algorithm per size range of each block")
    s.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    result = compare(Store(args.results), baseline=args.baseline, stat=args.stat,
                     collective=args.collective, nprocs=args.nprocs,
                     confidence=args.confidence)
    if args.summary:
        sys.stdout.write(render_summary(result))
        return 0
    sys.stdout.write(render(result, args.format))
    if args.format == "csv":  # keep the CSV parseable: notices and warnings go to stderr
        if result.notice:
            print(f"collbench: {result.notice}", file=sys.stderr)
        for w in result.warnings:
            print(f"collbench: warning: {w.where}: {w.problem}; {w.advice}", file=sys.stderr)
    return 0
