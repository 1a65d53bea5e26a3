"""Command line: assemble the parsers of collbench.commands, call, print.

Errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from collbench.commands import (
    algorithms,
    compare,
    completion,
    ingest,
    model,
    mpi,
    options,
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
            slurm, platform, schema, model)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit status 2) like every error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"collbench: error: {self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="collbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"collbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.add_parser(sub)
    completion.add_parser(sub, p)  # last: it completes every command above
    options.add_verbosity_everywhere(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    options.apply_verbosity(args)
    try:
        return int(args.func(args))
    except UserError as e:
        print(f"collbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `collbench show ... | head`
        return 0
    except OSError as e:  # a full disk, a read-only folder: what finished stays stored
        where = f"{e.filename}: " if e.filename else ""
        print(f"collbench: error: {where}{e.strerror or e}; nothing finished was lost: "
              "remove the cause and run the same command again (with --resume for a run)",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("collbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
