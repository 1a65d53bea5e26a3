"""Kill a launch's process group when collbench dies, however it dies.

collbench starts each launch (mpirun, smpirun, srun inside an allocation) in a session of
its own, so that a timeout can kill every rank at once; but then a SIGKILL of collbench
itself would leave that session running (re-parented to init, a hung rank spinning for
ever). So beside each launch runs this watchdog, in a session of its own too (a kill of
collbench's process group does not reach it): it reads its stdin, a pipe whose write end
only collbench holds. collbench writes the launch's process group id, then "done" when the
launch has ended; if the pipe closes without "done", collbench has died, and the watchdog
ends the group: SIGTERM, a grace period for mpirun to tear down its ranks, SIGKILL, then what
is left of the launch's session (SIGTERM first: a program's rank guard then ends what the
program left behind, rankguard.c), and last every process still carrying the launch's token
(what the launch left behind in other sessions). Before the pid, collbench writes the
launch's token (in the command's environment: if collbench dies before writing the pid, the
command is found by it) and, when the launch has a TMPDIR of its own, that directory (hex),
removed at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time

from collbench.launch import session

GRACE_S = 2.0


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def end_group(pgid: int, grace_s: float = GRACE_S) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _alive(pgid):
            time.sleep(0.05)
    end_session(pgid)  # the launch's pid is its session's id: ranks in groups of their own


def end_session(sid: int, grace_s: float = 1.0) -> None:
    """SIGTERM what is left of session `sid` (a rank guard then ends what its program left
    behind), then SIGKILL whatever is still there after grace_s."""
    for pid in session.members(sid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while session.members(sid) and time.monotonic() < deadline:
        time.sleep(0.02)
    session.kill(sid)


def sweep_token(token: str, wait_s: float = 5.0) -> None:
    """SIGKILL every process that carries this launch's token in its environment, until none
    is left or wait_s passes: whatever the launch left behind on this machine, in whatever
    session or process group."""
    deadline = time.monotonic() + wait_s
    while (left := session.carrying(token)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def _said(data: bytes) -> dict[str, str]:
    """collbench's lines, `key value` (token, tmp, pid) and a last `done`."""
    told: dict[str, str] = {}
    for line in data.decode("ascii", "replace").splitlines():
        key, _, value = line.partition(" ")
        told[key] = value
    return told


def _tmp(told: dict[str, str]) -> str | None:
    try:
        return os.fsdecode(bytes.fromhex(told["tmp"])) if "tmp" in told else None
    except ValueError:
        return None


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is collbench's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # outlive the terminal collbench had
    told = _said(sys.stdin.buffer.read())  # until collbench closes the pipe, or dies
    if "done" in told:
        return 0
    if told.get("pid", "").isdigit():
        end_group(int(told["pid"]))
    elif told.get("token"):
        # collbench died between starting the command and telling its pid: find it (and
        # what it started) by the token in its environment
        found = session.carrying(told["token"])
        for sid in {sid for p in found if (sid := _sid(p)) is not None}:
            end_group(sid)
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    if told.get("token"):
        sweep_token(told["token"])  # what the launch left behind outside its session
    tmp = _tmp(told)
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _sid(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
