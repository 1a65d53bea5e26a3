"""Reading what users hand collbench: regular files of sane size, TOML of sane depth.

A FIFO would block a plain read for ever, a device could be endless and a deeply nested
TOML document overflows Python's recursion; each is one line naming the file instead.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path
from typing import Any, Final

from collbench.errors import UserError

MiB: Final = 1024 * 1024
SPEC_LIMIT: Final = 1 * MiB  # specs, studies, platforms, p2p models, rules files
OUTPUT_LIMIT: Final = 64 * MiB  # OSU/IMB output and program output


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: Path, what: str, limit: int = SPEC_LIMIT) -> bytes:
    """The bytes of regular file `path` (at most `limit`); UserError otherwise."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not hang before we can refuse it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: is {_kind(info.st_mode)}; the {what} must be a regular "
                            "file")
        if info.st_size > limit:
            raise UserError(f"{path}: {info.st_size} bytes; a {what} may hold at most "
                            f"{limit} bytes")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise UserError(f"{path}: cannot read the {what}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if len(data) > limit:  # grew while we read it
        raise UserError(f"{path}: more than {limit} bytes; a {what} may hold at most that")
    return data


def read_text(path: Path, what: str, limit: int = SPEC_LIMIT) -> str:
    """Like read_bytes, decoded as UTF-8 (a one-line error names the bad byte's offset)."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: byte {e.start} is not UTF-8; the {what} must be UTF-8 "
                        "text") from None


def load_toml(text: str, source: str) -> dict[str, Any]:
    """tomllib.loads, with syntax errors and runaway nesting as one-line UserErrors."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(toml_error(e, source)) from None
    except RecursionError:
        raise UserError(f"{source}: nested too deeply to be a collbench file") from None


def toml_error(error: tomllib.TOMLDecodeError, source: str) -> str:
    text = str(error)
    marker = " (at line "
    if marker in text and text.endswith(")"):
        head, _, where = text.rpartition(marker)
        line, _, col = where[:-1].partition(", column ")
        if line.isdigit() and col.isdigit():
            return f"{source}:{line}:{col}: TOML syntax error: {head}"
    return f"{source}: TOML syntax error: {text}"
