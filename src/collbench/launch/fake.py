"""Fake backend for fast unit tests: a Python stand-in kernel, no MPI.

It runs a real subprocess, fakekernel.py (so timeouts, process-group kills and interruption are
exercised), reads the same job file and writes the same JSON lines as the C kernel, with
latencies from a Hockney model. Its numbers are synthetic and labelled so (backend "fake").
A workload's program is started as it is, as one process (an MPI program runs as a
singleton), with COLLBENCH_FAKE_NPROCS telling it the planned process count.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from collbench.catalog.mpi import launcher_env
from collbench.launch.base import Call, LaunchBackend, LaunchOutcome
from collbench.launch.fakekernel import main
from collbench.launch.process import run_group

if TYPE_CHECKING:
    from collbench.plan import Launch


class FakeBackend(LaunchBackend):
    name = "fake"

    def command(self, launch: Launch, call: Call) -> list[str]:
        return [sys.executable, "-m", "collbench.launch.fakekernel", "-np",
                str(launch.nprocs), "--", *call.argv(launch)]

    def run(
        self, launch: Launch, call: Call, interrupted: Callable[[], bool]
    ) -> LaunchOutcome:
        argv = self.command(launch, call)
        done = run_group(argv, launcher_env(self.mpi), launch.timeout_s, call.work,
                         interrupted)
        status = ("interrupted" if done.interrupted else "timeout" if done.timed_out
                  else "ok" if done.returncode == 0 else "failed")
        return LaunchOutcome(status, argv, done.returncode, done.wall_s, done.stderr_tail,  # type: ignore[arg-type]
                             ["fakehost"])


if __name__ == "__main__":  # the stand-in kernel by its former name
    raise SystemExit(main(sys.argv[1:]))
