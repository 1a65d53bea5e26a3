"""`collbench show RESULTS`: avg/min/max per collective, algorithm and size."""

from __future__ import annotations

import argparse
from pathlib import Path

from collbench.analyse.show import best, show
from collbench.commands import options
from collbench.store import Store


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("show", help="avg/min/max per collective, algorithm and size")
    s.add_argument("results", type=Path)
    s.add_argument("--collective")
    s.add_argument("--algorithm")
    s.add_argument("--nprocs", type=options.count(1, options.MAX_NPROCS))
    s.add_argument("--best", action="store_true",
                   help="fastest algorithm per size and its ratio to the default")
    options.add_format(s)
    s.set_defaults(func=cmd_show)


def cmd_show(args: argparse.Namespace) -> int:
    store = Store(args.results)
    if args.best:
        print(best(store, args.format, args.collective))
    else:
        print(show(store, args.format, args.collective, args.algorithm, args.nprocs))
    return 0
