"""Simulate the two-rank ping-pong of each placement level on a cluster description.

The check behind calibration: the kernel's `latency` operation (osu_latency's ping-pong)
runs under smpirun with two ranks placed as `--map-by core|socket|node` would place them,
on the platform generated from the description, with collbench's usual determinism
options. Simulated time is deterministic, so two timed iterations say everything.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from collbench.errors import UserError
from collbench.launch.process import run_group, tail
from collbench.platforms.loader import platform_args
from collbench.platforms.model import Cluster
from collbench.platforms.placement import LEVEL_OF_MAPPING, hostfile
from collbench.platforms.simgrid_xml import platform_xml

MAPPING_OF_LEVEL: Final = {level: mapping for mapping, level in LEVEL_OF_MAPPING.items()}
ITERATIONS: Final = 2
TIMEOUT_S: Final = 300


def simulate_pingpong(cluster: Cluster, levels: Iterable[str], sizes: Iterable[int],
                      smpirun: Path, kernel: Path, simgrid_version: str
                      ) -> dict[str, dict[int, float]]:
    """One-way latency (µs) per level and size, as the simulation of `cluster` gives it."""
    sizes = sorted(set(sizes))
    jobs = "".join(f"latency 0 0 0 {s} {ITERATIONS} 1\n" for s in sizes)
    out: dict[str, dict[int, float]] = {}
    with tempfile.TemporaryDirectory(prefix="collbench-pingpong-") as tmp:
        work = Path(tmp)
        (work / "platform.xml").write_text(platform_xml(cluster))
        (work / "jobs.txt").write_text(jobs)
        platform, env = platform_args(cluster, work / "platform.xml", simgrid_version)
        for level in levels:
            mapping = MAPPING_OF_LEVEL[level]
            (work / "hostfile.txt").write_text(hostfile(cluster, 2, mapping))
            result = work / f"{level}.jsonl"
            argv = [str(smpirun), "-np", "2", *platform,
                    "-hostfile", str(work / "hostfile.txt"),
                    "--cfg=smpi/simulate-computation:no", "--cfg=smpi/wtime:0",
                    "--log=root.thres:warning", str(kernel), "--jobs", str(work / "jobs.txt"),
                    "--output", str(result)]
            # in its own session beside the watchdog: it ends with collbench, as launches do
            done = run_group(argv, {**os.environ, **env}, TIMEOUT_S, work / f"{level}-logs",
                             cwd=work)
            if done.timed_out or done.interrupted:
                raise UserError(f"simulated ping-pong ({level}) took more than {TIMEOUT_S} s"
                                if done.timed_out else
                                f"simulated ping-pong ({level}) was interrupted")
            rows = [json.loads(line) for line in result.read_text().splitlines()] \
                if result.exists() else []
            if done.returncode != 0 or len(rows) != len(sizes):
                said = done.stderr_tail or tail(work / f"{level}-logs" / "stdout.txt")
                raise UserError(f"simulated ping-pong ({level}) failed (exit "
                                f"{done.returncode}): {said.strip()[-400:]}")
            out[level] = {int(r["size_bytes"]): float(r["avg_us"]) for r in rows}
    return out
