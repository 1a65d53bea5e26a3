"""Kill a launch's process group when collbench dies, however it dies.

collbench starts each launch (mpirun, smpirun, srun inside an allocation) in a session of
its own, so that a timeout can kill every rank at once; but then a SIGKILL of collbench
itself would leave that session running (re-parented to init, a hung rank spinning for
ever). So beside each launch runs this watchdog, in a session of its own too (a kill of
collbench's process group does not reach it): it reads its stdin, a pipe whose write end
only collbench holds. collbench writes the launch's process group id, then "done" when the
launch has ended; if the pipe closes without "done", collbench has died, and the watchdog
ends the group: SIGTERM, a grace period for mpirun to tear down its ranks, SIGKILL. A second
word, when given, is a directory (hex-encoded) the launch may leave behind, mpirun's session
directory: the watchdog removes it after the group has ended.
"""

from __future__ import annotations

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
    session.kill(pgid)  # the launch's pid is its session's id: ranks in groups of their own


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is collbench's to handle
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # outlive the terminal collbench had
    data = sys.stdin.buffer.read()  # until collbench closes the pipe, or dies
    words = data.split()
    if not words or not words[0].isdigit():
        return 0  # collbench died before the launch started
    if words[-1:] != [b"done"]:
        end_group(int(words[0]))
        if len(words) > 1:
            try:
                scratch = os.fsdecode(bytes.fromhex(words[1].decode("ascii")))
            except ValueError:
                return 0
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
