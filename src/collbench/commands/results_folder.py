"""The kept folder (`--results DIR` of `model loggp`, `--simulations DIR` of `platform
calibrate`) and `--resume` of the commands that measure through campaigns of their own.

Each measurement is a campaign like `collbench run`'s (campaign.open_campaign: plan,
provenance, stored rows, resume, the watchdog); the command reads its rows back. Given a
folder, the campaigns stay there; without one, they live in a private temporary folder
removed when the command ends.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from collbench.errors import UserError

if TYPE_CHECKING:  # the campaign machinery loads when a command measures, not to parse
    from collbench.campaign import Campaign, SpecSource
    from collbench.catalog.mpi import MpiInstall
    from collbench.launch.base import Backend


class Interrupted(UserError):
    """SIGINT/SIGTERM during a measurement: what finished is stored (exit 130, as `run`)."""

    exit_code = 130


def add_options(p: argparse.ArgumentParser, flag: str, what: str) -> None:
    """`flag DIR` (parsed as args.keep) and --resume."""
    p.add_argument(flag, dest="keep", type=Path, metavar="DIR",
                   help=f"keep {what} in DIR (`collbench show` reads them; default: a "
                        "temporary folder removed at the end)")
    p.add_argument("--resume", action="store_true",
                   help=f"continue in {flag} DIR: launches stored there are not run again "
                        "(failed ones are)")
    p.set_defaults(keep_flag=flag)


def check(args: argparse.Namespace, command: str) -> None:
    """One line, before anything is built or run, for a folder that cannot be one."""
    results: Path | None = args.keep
    if results is None:
        if args.resume:
            raise UserError(f"{command}: --resume: nothing to resume; valid: with "
                            f"{args.keep_flag} DIR, the folder of an earlier run")
        return
    if "\0" in str(results):
        raise UserError(f"{command}: {args.keep_flag}: {str(results)!r} holds a NUL byte; "
                        "valid: a folder")
    where = f"{command}: {args.keep_flag} {results}"
    if results.exists() and not results.is_dir():
        raise UserError(f"{where}: is a file; valid: a folder (new, or an earlier run's with "
                        "--resume)")
    if results.is_dir() and any(results.iterdir()) and not args.resume:
        raise UserError(f"{where}: is not empty; valid: a new or empty folder, or add "
                        "--resume to continue the run stored there")
    parent = next((p for p in [results, *results.parents] if p.exists()), Path("."))
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"{where}: cannot be created ({parent} is not a writable folder); "
                        "valid: a folder you can write")


@contextmanager
def root(args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """The folder the command's campaigns go under: the user's, or a temporary one."""
    if args.keep is not None:
        try:
            args.keep.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{args.keep_flag} {args.keep}: cannot be created: "
                            f"{e.strerror or e}; valid: a folder you can write") from None
        yield args.keep
        return
    from collbench.storefiles import private_dir

    tmp = private_dir(prefix)  # swept at the next start if this process is killed
    _TEMPORARY[tmp] = args.keep_flag
    try:
        yield tmp
    finally:
        del _TEMPORARY[tmp]
        shutil.rmtree(tmp, ignore_errors=True)


# The temporary roots of the commands under way, with the option that would keep them: an
# interruption must not name a folder about to be removed as where the launches are kept.
_TEMPORARY: dict[Path, str] = {}


def _kept(output: Path) -> str:
    for tmp, flag in _TEMPORARY.items():
        if output.is_relative_to(tmp):
            return (f"nothing is kept (a temporary folder; {flag} DIR keeps the launches "
                    "that finish, and the same command with --resume goes on)")
    return (f"the launches that finished are stored in {output} (the same command with "
            "--resume goes on)")


def measure(source: SpecSource, mpi: MpiInstall, output: Path, resume: bool,
            platform: str | None = None, progress: TextIO | None = None,
            say: Callable[[str], None] | None = None) -> Campaign[Backend]:
    """Create (or, with `resume`, continue) the campaign in `output` and run what it does not
    hold yet; failed launches run again on resume (the command needs every point)."""
    from collbench.campaign import Request, open_campaign

    camp = open_campaign(source, mpi, Request(output, resume=resume, retry_failed=resume,
                                              platform=platform), say=say or _quiet)
    summary = camp.run(progress=progress)
    if summary.skipped == summary.launches:  # the progress display said nothing
        (say or _quiet)(f"{output}: {summary.words()}")
    if summary.interrupted:
        raise Interrupted(f"{source.origin}: interrupted; {_kept(output)}")
    return camp


def check_platform(folder: Path, text: str, resume: bool) -> None:
    """A simulation resumed from `folder` must be of the same description (the backend
    would refuse it too, naming the private file the description was written to)."""
    from collbench.launch.simgrid import PLATFORM_TOML
    from collbench.store import Store

    stored = Store(folder).backend_file(PLATFORM_TOML)
    if resume and stored.is_file() and stored.read_text() != text:
        raise UserError(f"{folder}: simulated another platform description (the measurements "
                        "or options differ from the run that stored it); valid: the same "
                        "command, or another folder")


def _quiet(message: str) -> None:
    return None


def say(message: str) -> None:
    """What the campaign opener says (a fresh build), on stderr as `collbench run` does."""
    print(f"collbench: {message}", file=sys.stderr)
