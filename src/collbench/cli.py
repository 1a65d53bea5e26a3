"""Command line: assemble the parsers of collbench.commands, call, print.

Errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import FrameType, ModuleType
from typing import Final, NoReturn

from collbench import duckstop
from collbench.errors import UserError
from collbench.version import __version__

# The modules of collbench.commands, in the order `collbench --help` lists them.
COMMAND_MODULES: Final = ("mpi", "algorithms", "run", "show", "query", "compare", "regress",
                          "diff_mpi", "ingest", "report", "study", "tune", "rules", "slurm",
                          "platform", "schema", "model")
# Which module registers each command (a test keeps it in step with the modules): a
# command line naming one imports only that module, not every command's dependencies
# (`collbench run` started 0.15-0.2 s sooner).
MODULE_OF: Final = {"mpi": "mpi", "algorithms": "algorithms", "plan": "run", "run": "run",
                    "show": "show", "query": "query", "export": "query",
                    "compare": "compare", "regress": "regress", "diff-mpi": "diff_mpi",
                    "ingest": "ingest",
                    "report": "report",
                    "study": "study", "tune": "tune", "rules": "rules", "slurm": "slurm",
                    "platforms": "platform", "platform": "platform", "schema": "schema",
                    "model": "model"}


DESCRIPTION: Final = """\
collbench measures MPI collectives (bcast, allreduce, ...) with every algorithm the MPI
offers, over sizes and process counts, repeated so that differences can be tested; it
compares the algorithms with statistics, reports, and writes tuning rules for the MPI.

  collbench run -c bcast -m 1:1M -n 2     measure and print a size x algorithm table
  collbench run SPEC.toml -o RESULTS      a campaign from a spec file into a folder
  collbench compare RESULTS --summary     the algorithm to use per size range
  collbench report RESULTS -o REPORT      an HTML page with figures
  collbench tune RESULTS -o rules.txt     an Open MPI rules file

-o is a FILE for commands that print a table (written instead of printed), a folder for
commands that write results, reports or scripts. `collbench COMMAND --help` for each."""


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"collbench.commands.{name}")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and exit status 2) like every error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"collbench: error: {self.prog}: {message} (see {self.prog} --help)\n")


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only` (a module of MODULE_OF), just that module's
    commands, which parse their command lines exactly as in the whole parser."""
    from collbench.commands import options

    p = _Parser(prog="collbench", description=DESCRIPTION,
                formatter_class=argparse.RawDescriptionHelpFormatter)
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


# SIGTERM and SIGHUP stop a command as Ctrl-C does: its temporary folders are removed, a
# launch or trial under way is ended, and it says so (exit 130); by default Python would
# die on the spot (exit 143) and leave them. A run's runner, a trial, `model loggp` set
# handlers of their own for their part; ignored signals (nohup) stay ignored.
STOPS: Final = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
                signal.SIGHUP: signal.SIG_DFL}  # each with the handler it replaces
RETRY_S: Final = 0.05
# DuckDB turns a Ctrl-C during a query into this RuntimeError, not KeyboardInterrupt.
DUCKDB_INTERRUPTED: Final = "Query interrupted"


def _stop(signum: int, frame: FrameType | None) -> None:
    """KeyboardInterrupt, once no module is being imported: an exception inside a C
    extension's set-up (DuckDB's nanobind enums) aborts the process (SIGABRT, a core)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            again = threading.Timer(RETRY_S, os.kill, (os.getpid(), signum))
            again.daemon = True
            again.start()
            return
        frame = frame.f_back
    duckstop.interrupt()  # else DuckDB's worker threads finish their tasks first (minutes)
    raise KeyboardInterrupt


@contextmanager
def _stops_as_interrupt(process: bool) -> Iterator[None]:
    """`process`: collbench is the process (not a call from Python), and once the command
    is over a stop is ignored: Python's exit puts the default handlers back, and a signal
    then would only turn the command's exit status into a death by signal."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers
        return
    old = {s: signal.getsignal(s) for s in STOPS}
    for s, handler in old.items():
        if handler is STOPS[s]:
            signal.signal(s, _stop)
    try:
        yield
    finally:
        for s, handler in old.items():  # SIGINT first
            signal.signal(s, signal.SIG_IGN if process else handler)


def main(argv: list[str] | None = None) -> int:
    with _stops_as_interrupt(process=argv is None):
        return _main(sys.argv[1:] if argv is None else argv)


def _main(argv: list[str]) -> int:
    try:  # importing a command's modules takes a while: a Ctrl-C then is one line too
        from collbench.commands import options

        args = parser(command_module(argv)).parse_args(argv)
        options.apply_verbosity(args)
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
    except RuntimeError as e:
        if str(e) != DUCKDB_INTERRUPTED:
            raise
        print("collbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    status = main()
    # CPython ends a `python -m` process with SIGINT when any string exec (a dataclass being
    # made, while a module imports) ever ended in KeyboardInterrupt, even one caught and
    # reported here; a string exec resets that flag (the console script is not affected).
    exec("None")
    raise SystemExit(status)
