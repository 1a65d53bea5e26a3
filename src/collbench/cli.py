"""Command line: assemble the parsers of collbench.commands, call, print.

Errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Final, NoReturn

from collbench.commands import options
from collbench.errors import UserError
from collbench.version import __version__

# The modules of collbench.commands, in the order `collbench --help` lists them.
COMMAND_MODULES: Final = ("mpi", "algorithms", "run", "show", "query", "compare", "regress",
                          "ingest", "report", "study", "tune", "rules", "slurm", "platform",
                          "schema", "model")
# Which module registers each command (a test keeps it in step with the modules): a
# command line naming one imports only that module, not every command's dependencies
# (`collbench run` started 0.15-0.2 s sooner).
MODULE_OF: Final = {"mpi": "mpi", "algorithms": "algorithms", "plan": "run", "run": "run",
                    "show": "show", "query": "query", "export": "query",
                    "compare": "compare", "regress": "regress", "ingest": "ingest",
                    "report": "report",
                    "study": "study", "tune": "tune", "rules": "rules", "slurm": "slurm",
                    "platforms": "platform", "platform": "platform", "schema": "schema",
                    "model": "model"}


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"collbench.commands.{name}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit status 2) like every error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"collbench: error: {self.prog}: {message} (see {self.prog} --help)\n")


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only` (a module of MODULE_OF), just that module's
    commands, which parse their command lines exactly as in the whole parser."""
    p = _Parser(prog="collbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"collbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name in (only,) if only else COMMAND_MODULES:
        _module(name).add_parser(sub)
    if only is None:
        _module("completion").add_parser(sub, p)  # last: it completes every command above
    options.add_verbosity_everywhere(p)
    return p


def command_module(argv: Sequence[str]) -> str | None:
    """The module of the command `argv` names (its first word: collbench's own options
    take no value), or None: no command, or one to be told apart by the whole parser."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return MODULE_OF.get(word) if word is not None else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parser(command_module(argv)).parse_args(argv)
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
