"""Run one command in its own process group, with a timeout that kills the whole group, and
a watchdog (launch/watchdog.py) that kills it if collbench itself dies."""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from collbench.launch import session

POLL_S = 0.1
TMP_PREFIX = "collbench-launch-"
GRACE_S = 3.0  # after SIGTERM, before SIGKILL: lets mpirun tear down its ranks


@dataclass
class Finished:
    returncode: int | None
    timed_out: bool
    interrupted: bool
    wall_s: float
    stderr_tail: str


def tail(path: Path, limit: int = 4000) -> str:
    """The end of a log file, as text (empty when it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""


def wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait up to timeout_s for proc to exit; True when it has. Popen.wait(timeout) polls
    with sleeps of up to 50 ms, a tenth of a short launch; a pidfd wakes on the exit."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (kernel < 5.3, not Linux): poll
        try:
            proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    return proc.poll() is not None


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after a grace period, and
    last whatever of its session is left (mpirun's ranks have process groups of their own)."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            os.killpg(proc.pid, signal.SIGKILL)  # mpirun gone: nothing of its group stays
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
        break
    # unkillable (a process stuck in the kernel): nothing more can be done for it
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10.0)
    session.kill(proc.pid)


def start_watchdog() -> subprocess.Popen[bytes]:
    """The watchdog of the next launch (its own session: a kill of ours does not reach it)."""
    return subprocess.Popen([sys.executable, "-m", "collbench.launch.watchdog"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def stop_watchdog(guard: subprocess.Popen[bytes]) -> None:
    """The launch ended while collbench lived: the watchdog leaves quietly."""
    try:
        guard.stdin.write(b"done\n")  # type: ignore[union-attr]
        guard.stdin.close()  # type: ignore[union-attr]
    except OSError:
        pass
    if not wait_exit(guard, 10.0):
        guard.kill()
        guard.wait()


def _tell(guard: subprocess.Popen[bytes], key: str, value: str) -> None:
    guard.stdin.write(f"{key} {value}\n".encode())  # type: ignore[union-attr]
    guard.stdin.flush()  # type: ignore[union-attr]


def _private_tmp(guard: subprocess.Popen[bytes], token: str) -> Path | None:
    """A fresh directory for TMPDIR, named to the watchdog before it exists (so that a
    death of collbench at any moment leaves none behind); None if it cannot be made."""
    path = Path(tempfile.gettempdir()) / f"{TMP_PREFIX}{token}"
    _tell(guard, "tmp", os.fsencode(path).hex())  # hex: any path, one word
    try:
        path.mkdir(mode=0o700)
    except OSError:
        return None
    return path


def run_group(
    argv: list[str],
    env: Mapping[str, str],
    timeout_s: float,
    log_dir: Path,
    interrupted: Callable[[], bool] = lambda: False,
    private_tmp: bool = False,
    cwd: Path | None = None,
) -> Finished:
    """Run argv in a new session; stdout/stderr go to files in log_dir.

    The watchdog learns the launch's token (in the command's environment, so that it finds
    the command even if collbench dies before telling it the pid) and then its pid.
    `private_tmp`: the command gets a TMPDIR of its own (mpirun keeps its pid-named session
    directory there; launch/local.py says why), removed once the command has ended, by the
    watchdog if collbench has died. Without a directory (a full or read-only temporary
    folder), TMPDIR stays as it is."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / "stdout.txt", log_dir / "stderr.txt"
    start = time.monotonic()
    token = secrets.token_hex(8)
    run_env = {**env, session.LAUNCH_TOKEN: token}
    with out_path.open("wb") as out, err_path.open("wb") as err:
        guard = start_watchdog()
        _tell(guard, "token", token)
        scratch = _private_tmp(guard, token) if private_tmp else None
        if scratch is not None:
            run_env["TMPDIR"] = str(scratch)
        proc = subprocess.Popen(
            argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=run_env,
            start_new_session=True, cwd=cwd,
        )
        _tell(guard, "pid", str(proc.pid))
        timed_out = was_interrupted = False
        try:
            while True:
                if wait_exit(proc, POLL_S):  # returns the moment mpirun exits
                    break
                if time.monotonic() - start > timeout_s:
                    timed_out = True
                    break
                if interrupted():
                    was_interrupted = True
                    break
        except KeyboardInterrupt:
            was_interrupted = True
        if timed_out or was_interrupted:
            kill_group(proc)
        elif proc.returncode != 0:
            session.kill(proc.pid)  # a launcher that died may leave ranks behind
        stop_watchdog(guard)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    return Finished(
        returncode=proc.returncode,
        timed_out=timed_out,
        interrupted=was_interrupted,
        wall_s=time.monotonic() - start,
        stderr_tail=tail(err_path),
    )
