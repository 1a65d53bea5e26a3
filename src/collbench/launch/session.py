"""The processes of one launch, found through /proc.

A launch's command starts a session of its own (start_new_session), so its pid is also the
session id of everything it starts. Killing its process group is not enough: mpirun (prterun)
puts each rank in a process group of its own, so a SIGKILLed mpirun leaves its ranks running.
They stay in the session, unless a program leaves it on purpose (setsid).

Before its pid is known, a launch is found by the token in its environment (LAUNCH_TOKEN),
which its ranks inherit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def members(sid: int) -> list[int]:
    """Pids of the live processes (zombies excluded) in session `sid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[3]) == sid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile, or not ours to read
    return found


LAUNCH_TOKEN = "COLLBENCH_LAUNCH_TOKEN"


def carrying(token: str) -> list[int]:
    """Pids of the live processes whose environment holds this launch token."""
    mark = f"{LAUNCH_TOKEN}={token}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark in environ.read_bytes().split(b"\0"):
                found.append(int(environ.parent.name))
        except (OSError, ValueError):
            continue
    return found


def kill(sid: int, wait_s: float = 5.0) -> None:
    """SIGKILL every process left in session `sid`, until none is left or wait_s passes
    (a process may fork while it is being killed)."""
    deadline = time.monotonic() + wait_s
    while (left := members(sid)) and time.monotonic() < deadline:
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
