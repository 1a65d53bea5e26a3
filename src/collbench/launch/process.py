"""Run one command in its own process group, with a timeout that kills the whole group, and
a watchdog (launch/watchdog.py) that kills it if collbench itself dies.

Its stdout and stderr come through pipes that collbench copies to stdout.txt and stderr.txt,
up to OUTPUT_LIMIT bytes together: a launch that prints more is stopped (a file never holds
more than the limit, however fast the launch prints), as is one whose output a full disk
cannot take (it is not left running unheard). collbench waits for the command to
exit, never for its pipes to close, so a process it left behind that holds them (a daemon)
does not hold the launch; once the command has ended, every process still carrying the
launch's token in its environment is killed, wherever it went (another session, a group of
its own). Ranks of a workload's program also run under the rank guard (rankguard.c), which
finds what they leave behind even without the token, on remote hosts too.
"""

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
from typing import BinaryIO

from collbench.launch import session
from collbench.launch.watchdog import end_session, sweep_token

POLL_S = 0.1
TMP_PREFIX = "collbench-launch-"
GRACE_S = 3.0  # after SIGTERM, before SIGKILL: lets mpirun tear down its ranks
# What a launch may print, stdout and stderr together (docs/workloads.md, "Limits"): prterun
# keeps what ranks print in memory until it has written it (5 bytes of memory per byte
# printed), so a program printing without end would take the machine down. Each rank of a
# program may print its share (rankguard.c); the launch's files take the launcher's own
# messages beside them (OUTPUT_SLACK).
OUTPUT_LIMIT = 64 << 20
OUTPUT_SLACK = 64 << 10
OUTPUT_MARK = "collbench: output limit:"  # starts the line saying a launch was stopped
OUTPUT_LOST = "collbench: output lost:"  # ... that its output could not be written
STARTUP_MARK = "collbench: start-up watchdog:"  # starts the line saying a launch never began
# The start-up watchdog's deadline: a tenth of the launch's timeout, within these bounds. A
# launch that has not begun its first point by then hangs before it (in MPI_Init, say): it
# is stopped then rather than at the timeout (600 s by default), and the campaign goes on.
STARTUP_MIN_S = 10.0
STARTUP_MAX_S = 60.0


def startup_deadline(timeout_s: float) -> float:
    """Seconds a launch has to begin its first point (docs/spec.md, "run.timeout")."""
    return min(timeout_s, max(STARTUP_MIN_S, min(STARTUP_MAX_S, timeout_s / 10)))


@dataclass
class Finished:
    returncode: int | None
    timed_out: bool
    interrupted: bool
    wall_s: float
    stderr_tail: str
    output_problem: str = ""  # the line saying why it was stopped for its output
    never_started: bool = False  # stopped by the start-up watchdog


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


def kill_group(proc: subprocess.Popen[bytes],
               wait: Callable[[float], bool] | None = None) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after a grace period, and
    last whatever of its session is left (mpirun's ranks have process groups of their own):
    SIGTERM first, so that rank guards end what their programs left behind, then SIGKILL.
    `wait(seconds)`: True once proc has exited (the launch's output is read meanwhile)."""
    waited = wait or (lambda seconds: wait_exit(proc, seconds))
    for sig, grace in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        if not waited(grace):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # mpirun gone: nothing of its group stays
        break
    # unkillable (a process stuck in the kernel): nothing more can be done for it
    waited(10.0)
    end_session(proc.pid)


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


class Output:
    """A launch's stdout and stderr: pipes copied to their files as the launch prints, up
    to `limit` bytes together. Past it, or when a file cannot be written (a full disk),
    what comes is dropped and `problem` says why: the launch is stopped, as its output
    cannot be kept whole."""

    def __init__(self, pipes: dict[int, BinaryIO], limit: int) -> None:
        self.files = dict(pipes)
        self.limit = self.room = limit
        self.problem = ""
        for fd in self.files:
            os.set_blocking(fd, False)

    def pump(self, fd: int) -> bool:
        """Copy one read of pipe fd; False when it had nothing (for now, or for good)."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:  # every writer has closed it
            os.close(fd)
            del self.files[fd]
            return False
        keep = b"" if self.problem else data[:self.room]
        try:
            self.files[fd].write(keep)
        except OSError as e:
            self.problem = f"{OUTPUT_LOST} {self.files[fd].name} cannot be written " \
                           f"({e.strerror or e}); the launch was stopped"
        self.room -= len(keep)
        if len(keep) < len(data) and not self.problem:
            self.problem = (f"{OUTPUT_MARK} the launch printed more than {self.limit} bytes; "
                            "it was stopped")
        return True

    def wait(self, proc: subprocess.Popen[bytes], pidfd: int | None, seconds: float) -> bool:
        """Copy output until proc exits (True) or `seconds` pass (False); past the limit, what
        comes is dropped. The pidfd wakes the moment proc exits (Popen.wait polls with
        sleeps of up to 50 ms)."""
        deadline = time.monotonic() + seconds
        while proc.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            poller = select.poll()  # not select(): no limit on descriptor numbers
            for fd in [*self.files, *([pidfd] if pidfd is not None else [])]:
                poller.register(fd, select.POLLIN)
            for fd, _ in poller.poll(min(left, POLL_S) * 1000):
                if fd in self.files:
                    self.pump(fd)
        return True

    def close(self, seconds: float = 1.0) -> None:
        """Copy what the pipes hold (for `seconds` at most: a process left behind may hold
        them open and write for ever), then close them."""
        deadline = time.monotonic() + seconds
        for fd in list(self.files):
            while fd in self.files and time.monotonic() < deadline and self.pump(fd):
                pass
        for fd in self.files:
            os.close(fd)
        self.files.clear()


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd (kernel < 5.3, not Linux): poll
        return None


def run_group(
    argv: list[str],
    env: Mapping[str, str],
    timeout_s: float,
    log_dir: Path,
    interrupted: Callable[[], bool] = lambda: False,
    private_tmp: bool = False,
    cwd: Path | None = None,
    output_limit: int | None = None,
    started: Callable[[], bool] | None = None,
) -> Finished:
    """Run argv in a new session; stdout/stderr go to files in log_dir.

    The watchdog learns the launch's token (in the command's environment, so that it finds
    the command even if collbench dies before telling it the pid) and then its pid.
    `private_tmp`: the command gets a TMPDIR of its own (mpirun keeps its pid-named session
    directory there; launch/local.py says why), removed once the command has ended, by the
    watchdog if collbench has died. Without a directory (a full or read-only temporary
    folder), TMPDIR stays as it is. `output_limit`: bytes the command may print (default
    OUTPUT_LIMIT and its slack); beyond, it is stopped (`output_problem`). `started`: True
    once the command has begun its first point (the kernel's output file exists: rank 0
    makes it after MPI_Init); if it is not by `startup_deadline(timeout_s)`, the command is
    stopped then (`never_started`), its stderr saying why (STARTUP_MARK)."""
    limit = OUTPUT_LIMIT + OUTPUT_SLACK if output_limit is None else output_limit
    log_dir.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log_dir / "stdout.txt", log_dir / "stderr.txt"
    start = time.monotonic()
    token = secrets.token_hex(8)
    run_env = {**env, session.LAUNCH_TOKEN: token}
    # unbuffered: a full disk is met at the write, where Output takes it, not at close
    with out_path.open("wb", buffering=0) as out, err_path.open("wb", buffering=0) as err:
        guard = start_watchdog()
        _tell(guard, "token", token)
        scratch = _private_tmp(guard, token) if private_tmp else None
        if scratch is not None:
            run_env["TMPDIR"] = str(scratch)
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
            env=run_env, start_new_session=True, cwd=cwd,
        )
        _tell(guard, "pid", str(proc.pid))
        assert proc.stdout is not None and proc.stderr is not None
        # the pipes are read through their descriptors: the file objects must not close them
        output = Output({os.dup(proc.stdout.fileno()): out, os.dup(proc.stderr.fileno()): err},
                        limit)
        proc.stdout.close()
        proc.stderr.close()
        pidfd = _pidfd(proc.pid)
        timed_out = was_interrupted = never_started = False
        startup_s = startup_deadline(timeout_s)
        try:
            while not output.wait(proc, pidfd, POLL_S):  # returns the moment mpirun exits
                if output.problem:
                    break
                if started is not None and time.monotonic() - start > startup_s:
                    if not started():
                        never_started = True
                        break
                    started = None  # it has begun: the timeout alone watches it now
                if time.monotonic() - start > timeout_s:
                    timed_out = True
                    break
                if interrupted():
                    was_interrupted = True
                    break
        except KeyboardInterrupt:
            was_interrupted = True
        if proc.returncode is None:
            kill_group(proc, lambda seconds: output.wait(proc, pidfd, seconds))
        elif proc.returncode != 0:
            end_session(proc.pid)  # a launcher that died may leave ranks behind
        sweep_token(token)  # whatever it left behind on this machine, in any session
        output.close()
        if pidfd is not None:
            os.close(pidfd)
        stop_watchdog(guard)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)
    stderr_tail = tail(err_path)
    if output.problem:
        stderr_tail = f"{stderr_tail}\n{output.problem}".strip()
    if never_started:
        stderr_tail = (f"{stderr_tail}\n{STARTUP_MARK} no point had begun {startup_s:g} s "
                       "after the start (a hang before the first point, e.g. in MPI_Init); "
                       "the launch was stopped").strip()
    return Finished(
        returncode=proc.returncode,
        timed_out=timed_out,
        interrupted=was_interrupted,
        wall_s=time.monotonic() - start,
        stderr_tail=stderr_tail,
        output_problem=output.problem,
        never_started=never_started,
    )
