"""(c) SimGrid backend at scale: wall time and memory of 512 simulated ranks at 1 MiB.

`collbench run --backend simgrid` on the built-in `jupiter` platform (32 nodes × 16
cores), Open MPI's default choice (5.0's fixed rules, run by collbench's ports), one
size of 1 MiB per rank, 2 timed iterations (simulated time is deterministic: more add
nothing), with and without
shared buffers (run.simgrid.shared_malloc). Memory is sampled every 0.2 s over the whole
process tree: RSS counts a shared page once per mapping, so it overstates what shared
buffers cost; PSS is the memory actually used.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from common import query, run_measured

CASES = (("bcast", True), ("bcast", False), ("reduce", True), ("reduce", False))
SPEC = """
[campaign]
name = "simgrid-scale-{coll}"
[measure]
collectives = ["{coll}"]
algorithms = "default"
sizes = [1048576]
nprocs = [512]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
timeout = 3600
seed = 1
[run.simgrid]
platform = "jupiter"
shared_malloc = {shared}
"""


def run(coll: str, shared: bool, out: Path) -> tuple[float, float, float]:
    """(wall s, peak RSS MB, peak PSS MB) of one `collbench run`."""
    return run_measured(SPEC.format(coll=coll, shared="true" if shared else "false"), out)


def main() -> str:
    lines = ["## SimGrid backend at scale: 512 simulated ranks, 1 MiB", "",
             "Command: `python benchmarks/bench_simgrid_scale.py` (`collbench run --backend "
             "simgrid` on `jupiter`, 32 nodes × 16 cores; Open MPI's default choice: Open "
             "MPI 5.0's fixed rules run by collbench's ports; 1 MiB per rank, 2 timed "
             "iterations + 1 warm-up; wall "
             "time of the whole `collbench run` including SimGrid start-up; memory sampled "
             "every 0.2 s over the process tree).", "",
             "| collective | shared buffers | wall time (s) | peak RSS (MB) | peak PSS (MB) | "
             "simulated avg (µs) |", "|---|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as tmp:
        for coll, shared in CASES:
            out = Path(tmp) / f"{coll}-{shared}"
            wall, rss, pss = run(coll, shared, out)
            avg = query(out, "SELECT avg_us FROM measurements")[0][0]
            lines.append(f"| {coll} | {'yes' if shared else 'no'} | {wall:.0f} | {rss:.0f} | "
                         f"{pss:.0f} | {avg:.0f} |")
    lines += ["", "RSS counts a shared page once per mapping (each simulated rank maps the "
              "shared buffer), so with shared buffers it overstates memory; PSS is what the "
              "machine gives. The simulated time does not depend on sharing (same numbers "
              "either way); validated runs (`measure.validate`) cannot share buffers."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
