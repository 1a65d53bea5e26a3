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

import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import query

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


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for child in children:
        out += _tree(int(child))
    return out


def _memory_mb(root: int) -> tuple[float, float]:
    """(RSS, PSS) of the process tree in MB."""
    rss = pss = 0
    for pid in _tree(root):
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for key, acc in (("Rss", "rss"), ("Pss", "pss")):
            m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
            if m and acc == "rss":
                rss += int(m.group(1))
            elif m:
                pss += int(m.group(1))
    return rss / 1024, pss / 1024


def run(coll: str, shared: bool, out: Path) -> tuple[float, float, float]:
    """(wall s, peak RSS MB, peak PSS MB) of one `collbench run`."""
    spec = out.with_suffix(".toml")
    spec.write_text(SPEC.format(coll=coll, shared="true" if shared else "false"))
    peak = [0.0, 0.0]
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "run", str(spec), "-o",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def watch() -> None:
        while proc.poll() is None:
            rss, pss = _memory_mb(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    _, err = proc.communicate()
    watcher.join()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{coll} shared={shared}: exit {proc.returncode}: {err[-800:]!r}")
    return wall, peak[0], peak[1]


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
