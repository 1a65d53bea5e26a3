"""Options several commands share, defined once: the MPI, the output format, the backend,
the output path. Each `add_*` puts the option on a parser; each reader turns the parsed
value into what the library takes."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.catalog.mpi import MpiInstall, find_mpi

FORMATS = ("table", "csv", "json")

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction


def add_mpi(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MPI under study (default: the Open MPI wheel beside collbench)")
    g.add_argument("--mpi", type=Path, metavar="PREFIX", help="MPI installation prefix")
    g.add_argument("--mpi-from-path", action="store_true", help="use the mpicc on PATH")


def mpi(args: argparse.Namespace) -> MpiInstall:
    """The MPI chosen with --mpi / --mpi-from-path / COLLBENCH_MPI (default: the wheel's)."""
    return find_mpi(args.mpi, args.mpi_from_path)


def add_format(p: argparse.ArgumentParser, choices: Sequence[str] = FORMATS,
               default: str = "table") -> None:
    p.add_argument("--format", choices=tuple(choices), default=default,
                   help=f"output format (default: {default})")


def add_backend(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", help="override the spec's run.backend")


def add_output(p: argparse.ArgumentParser, help: str, required: bool = False) -> None:
    p.add_argument("-o", "--output", type=Path, required=required, help=help)


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
