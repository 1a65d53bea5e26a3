"""`collbench show RESULTS`: each point's figures pooled over repetitions, named so."""

from __future__ import annotations

import argparse
from pathlib import Path

from collbench import points
from collbench.analyse.show import best, show
from collbench.commands import options
from collbench.errors import UserError, did_you_mean
from collbench.points import STATS as COMPARE_STATS
from collbench.store import Store


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("show", help="median_avg_us/min_min_us/max_max_us per collective, "
                                    "algorithm and size (pooled over repetitions)")
    s.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    s.add_argument("-c", "--collective", help="only this collective")
    s.add_argument("--algorithm", help="only this algorithm")
    s.add_argument("-n", "--nprocs", type=options.count(1, options.MAX_NPROCS),
                   help="only this process count")
    s.add_argument("--best", action="store_true",
                   help="fastest algorithm per size, its effect against the baseline and "
                        "what `collbench compare` recommends (same significance)")
    s.add_argument("--stat", metavar="NAME",
                   help=f"with --best: the figure compared ({', '.join(COMPARE_STATS)}, as "
                        "compare --stat; default: avg)")
    s.add_argument("--baseline", default="default", metavar="[COLUMN=]VALUE",
                   help="with --best: the baseline, as compare --baseline "
                        "(default: %(default)s)")
    options.add_format(s)
    options.add_table_output(s)
    s.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    store = Store(args.results)
    if args.collective is not None:
        _known_collective(store, args.collective)
    if args.stat is not None and not args.best:  # it would be ignored: say so
        raise UserError(f"show: --stat {args.stat} goes with --best (the table shows every "
                        "pooled figure); valid: add --best, or leave --stat out")
    if args.best:
        if args.algorithm is not None:
            raise UserError("show: --algorithm does not go with --best (which compares every "
                            "algorithm); valid: --collective, --nprocs, --stat, --baseline")
        options.emit(args, best(store, args.format, args.collective, args.nprocs,
                                args.stat or "avg", args.baseline))
    else:
        options.emit(args, show(store, args.format, args.collective, args.algorithm,
                                args.nprocs))
    return 0


def _known_collective(store: Store, collective: str) -> None:
    """An unknown collective is an error with a did-you-mean, as in `compare` and `report`."""
    present = sorted({c for c, _ in points.present(store)})
    if present and collective not in present:
        raise UserError(f"{store.root}: no measurements of collective {collective!r}; "
                        f"present: {', '.join(present)}{did_you_mean(collective, present)}")
