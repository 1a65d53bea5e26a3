"""Fake backend for fast unit tests: a Python stand-in kernel, no MPI.

It runs a real subprocess (so timeouts, process-group kills and interruption are
exercised), reads the same job file and writes the same JSON lines as the C kernel, with
latencies from a Hockney model. Its numbers are synthetic and labelled so (backend "fake").
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from collbench.catalog.mpi import launcher_env
from collbench.launch.base import KernelCall, LaunchBackend, LaunchOutcome
from collbench.launch.process import run_group
from collbench.plan import Launch


class FakeBackend(LaunchBackend):
    name = "fake"

    def command(self, launch: Launch, call: KernelCall) -> list[str]:
        return [sys.executable, "-m", "collbench.launch.fake", "-np", str(launch.nprocs),
                *call.argv(launch)[1:]]

    def run(
        self, launch: Launch, call: KernelCall, interrupted: Callable[[], bool]
    ) -> LaunchOutcome:
        argv = self.command(launch, call)
        done = run_group(argv, launcher_env(self.mpi), launch.timeout_s, call.outfile.parent,
                         interrupted)
        status = ("interrupted" if done.interrupted else "timeout" if done.timed_out
                  else "ok" if done.returncode == 0 else "failed")
        return LaunchOutcome(status, argv, done.returncode, done.wall_s, done.stderr_tail,  # type: ignore[arg-type]
                             ["fakehost"])


def _latency_us(coll: str, alg: int, size: int, nprocs: int) -> float:
    alpha, beta = 1.0 + 0.1 * alg, 5000.0  # µs, bytes/µs
    return alpha * math.ceil(math.log2(max(nprocs, 2))) + size / beta * (1 + alg % 3)


def _main(argv: list[str]) -> int:
    valued = {"-np", "--jobs", "--output", "--debug", "--debug-at"}
    args: dict[str, str] = {}
    flags: set[str] = set()
    it = iter(argv)
    for arg in it:
        if arg in valued:
            args[arg] = next(it)
        else:
            flags.add(arg)
    nprocs = int(args["-np"])
    debug, debug_at = args.get("--debug", ""), int(args.get("--debug-at", "0"))
    lines = [ln.split() for ln in Path(args["--jobs"]).read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    with open(args["--output"], "w") as out:
        for index, (coll, alg, seg, fan, size, iters, warm) in enumerate(lines):
            if index == debug_at and debug == "hang":
                time.sleep(3600)
            if index == debug_at and debug == "crash":
                sys.stderr.write("fake kernel: rank 1 crashed (debug switch)\n")
                return 134
            lat = _latency_us(coll, int(alg), int(size), nprocs)
            row = {
                "collective": coll, "algorithm_id": int(alg), "segsize": int(seg),
                "fanout": int(fan), "nprocs": nprocs, "size_bytes": int(size),
                "iterations": int(iters), "warmup": int(warm), "avg_us": lat,
                "min_us": lat * 0.9, "max_us": lat * 1.1, "median_us": lat,
                "bandwidth_mbs": None, "validated": "--validate" in flags,
                "status": "ok", "error": None,
                "samples_us": [lat] * int(iters) if "--samples" in flags else None,
            }
            if index == debug_at and debug == "corrupt" and "--validate" in flags:
                row.update(status="invalid", error="rank 1 index 0: expected 1 got 254",
                           avg_us=None, min_us=None, max_us=None, median_us=None,
                           validated=False)
            out.write(json.dumps(row) + "\n")
            out.flush()
            os.fsync(out.fileno())
            time.sleep(float(os.environ.get("COLLBENCH_FAKE_POINT_S", "0")))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
