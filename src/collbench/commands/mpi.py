"""`collbench mpi`: which MPI is in use."""

from __future__ import annotations

import argparse
import json

from collbench.commands import options


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("mpi", help="which MPI is in use")
    options.add_mpi(s)
    options.add_format(s, ("table", "json"))
    s.set_defaults(func=cmd_mpi)


def cmd_mpi(args: argparse.Namespace) -> int:
    info = options.mpi(args).as_dict()
    if args.format == "json":
        print(json.dumps(info, indent=1))
    else:
        for k, v in info.items():
            print(f"{k:15s} {v}")
    return 0
