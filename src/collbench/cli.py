"""Command line: assemble the parsers of collbench.commands, call, print.

Errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import sys

from collbench.commands import (
    algorithms,
    compare,
    ingest,
    mpi,
    platform,
    query,
    report,
    rules,
    run,
    schema,
    show,
    slurm,
    study,
    tune,
)
from collbench.errors import UserError
from collbench.version import __version__

# In the order `collbench --help` lists them.
COMMANDS = (mpi, algorithms, run, show, query, compare, ingest, report, study, tune, rules,
            slurm, platform, schema)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="collbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"collbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as e:
        print(f"collbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("collbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
