"""Files that appear whole or not at all: written aside, fsynced, renamed.

    atomic_write(path, data)    collbench's own files (a results folder's, rules, models)
    publish(path, write)        the user's files (exports, figures): into an existing folder
    temporary(path)             a private file beside `path`, swept once its writer is dead
    writing(frame)              whether a stopped process is inside one of these writes

A temporary file's name holds its writer's PID and host, so a later writer in the same
folder removes those of a writer that died (SIGKILL, a power cut), never a live one's.
A failure is one line naming the file (UserError), never a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import socket
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from collbench.errors import UserError


class WriteError(UserError, OSError):
    """A file that could not be written (full disk, read-only, permission): one line naming
    it. An OSError too, so a caller that words the failure in its own terms still can."""

    def __init__(self, path: Path, error: OSError) -> None:
        why = error.strerror or str(error) or type(error).__name__
        UserError.__init__(self, f"{path}: cannot write: {why}")  # as publish() says it
        self.errno, self.strerror, self.filename = error.errno, why, str(path)

    def __str__(self) -> str:
        return str(self.args[0])


def atomic_write(path: Path, data: bytes, mode: int | None = None) -> None:
    """`path` holds `data` whole, or keeps what it held: written aside, fsynced, renamed.
    `mode` (e.g. 0o644 for files users share) replaces the private temporary file's."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temporary(path)
    except OSError as e:
        raise WriteError(path, e) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise WriteError(path, e) from None
        raise
    with contextlib.suppress(OSError):  # the rename is done; a folder that cannot be
        dir_fd = os.open(path.parent, os.O_RDONLY)  # fsynced only risks a power cut
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


# A temporary file is `.<name>.<pid>-<host>.<random>.tmp<suffix>`: the writer's PID tells a
# later writer whether it died (SIGKILL, a power cut) and left the file behind; the host
# (hashed: any characters) keeps a PID of another machine sharing the folder out of it.
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]
_TEMPORARY = re.compile(
    r"\..+\.(?P<pid>\d+)-(?P<host>[0-9a-f]{8})\.[0-9a-f]{8}\.tmp(\.[^./]*)?")
_SWEPT: set[Path] = set()


def temporary(path: Path, suffix: str = "") -> tuple[int, Path]:
    """A new private file beside `path` (an open descriptor and its path), named so that
    sweep() removes it once its writer is dead; the folder's dead writers' are swept first."""
    sweep(path.parent)
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{_HOST}.{secrets.token_hex(4)}"
                             f".tmp{suffix}")
        try:
            return os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), tmp
        except FileExistsError:
            continue


def sweep(folder: Path) -> None:
    """Remove the temporary files in `folder` that a writer on this host left when it died
    (once per folder and process); a live writer's (another export, another run) stay."""
    real = folder.resolve()
    if real in _SWEPT:
        return
    _SWEPT.add(real)
    try:
        names = os.listdir(folder)
    except OSError:
        return  # not there yet, or not readable: nothing of ours to sweep
    for name in names:
        m = _TEMPORARY.fullmatch(name)
        if m and m["host"] == _HOST and not _alive(int(m["pid"])):
            with contextlib.suppress(OSError):
                (folder / name).unlink()


def private_dir(prefix: str) -> Path:
    """A new private folder in the temporary directory, named after this host and process
    (`<prefix><host>-<pid>-<random>`), after removing those a process of this host that is
    gone left behind (a SIGKILLed `platform calibrate` or `model loggp` cannot clean up)."""
    import shutil
    import tempfile

    parent = Path(tempfile.gettempdir())
    mine = re.compile(rf"{re.escape(prefix)}(?P<host>[0-9a-f]{{8}})-(?P<pid>\d+)-\w+")
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            m = mine.fullmatch(name)
            if m and m["host"] == _HOST and not _alive(int(m["pid"])):
                shutil.rmtree(parent / name, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{_HOST}-{os.getpid()}-", dir=parent))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def publish(path: Path, write: Callable[[Path], None], mode: int = 0o644) -> None:
    """Let `write` fill a private temporary file beside `path`, then rename it into place:
    the user's file appears complete or not at all (exports, figures). The folder must
    exist (a mistyped path makes no folders); a failure is one line naming `path`."""
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise UserError(f"{path}: the folder {folder} {what}; valid: an existing folder")
    try:
        fd, tmp = temporary(path, path.suffix)
    except OSError as e:
        raise WriteError(path, e) from None
    os.close(fd)
    try:
        write(tmp)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as e:
        raise WriteError(path, e) from None
    finally:
        tmp.unlink(missing_ok=True)


_WRITES = frozenset(f.__code__ for f in (atomic_write, publish, temporary, sweep))


def writing(frame: FrameType | None) -> bool:
    """Whether `frame` (where a signal handler found the process) is inside one of these
    writes: a stop raised there would cut a file's rename or its temporary's removal."""
    while frame is not None:
        if frame.f_code in _WRITES:
            return True
        frame = frame.f_back
    return False
