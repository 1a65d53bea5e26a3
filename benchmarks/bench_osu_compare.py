"""(a) collbench's kernel beside OSU 7.4: ping-pong latency and bcast at 2 ranks.

Same sizes (1 B–1 MiB) and OSU's default iterations; the OSU figures are the recorded
samples in ../shared/samples/osu-7.4 (same machine type, another day), so agreement within
run-to-run noise is what to look for. collbench figures: median over REPS launches run in
random order. bench_osu_fidelity.py builds OSU 7.4 and runs it beside the kernel in the same
job, interleaved: that is the comparison to trust for the kernel's fidelity.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import SHARED, query, run_campaign

from collbench.catalog.mpi import find_mpi, launcher_env

REPS = 5
SPEC = f"""
[campaign]
name = "osu-compare"
[measure]
collectives = ["latency", "bcast"]
algorithms = "default"
sizes = "1:1M"
nprocs = [2]
map_by = ["core"]
bind_to = "core"
[run]
repetitions = {REPS}
timeout = 600
seed = 2
"""


def osu_sample(name: str) -> dict[int, float]:
    """Size -> avg latency from an OSU text output (first numeric columns)."""
    out = {}
    for line in (SHARED / "samples" / "osu-7.4" / name).read_text().splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)", line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out


def reference_pingpong(tmp: Path, sizes: list[int]) -> dict[int, float]:
    """Median over REPS runs of a minimal ping-pong (pingpong_ref.c), on this machine now."""
    mpi = find_mpi()
    exe = tmp / "pingpong_ref"
    src = Path(__file__).with_name("pingpong_ref.c")
    subprocess.run([str(mpi.mpicc), "-O2", "-o", str(exe), str(src)], check=True)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    runs: dict[int, list[float]] = {}
    for _ in range(REPS):
        out = subprocess.run([str(mpi.mpirun), *root, "-np", "2", "--map-by", "core",
                              "--bind-to", "core", str(exe), *map(str, sizes)],
                             capture_output=True, text=True, check=True,
                             env=launcher_env(mpi)).stdout
        for line in out.splitlines():
            size, us = line.split()
            runs.setdefault(int(size), []).append(float(us))
    return {size: statistics.median(v) for size, v in runs.items()}


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "osu"
        wall = run_campaign(SPEC, out)
        rows = query(out, "SELECT collective, size_bytes, list(avg_us) FROM measurements "
                          "WHERE status = 'ok' GROUP BY 1, 2 ORDER BY 1, 2")
        here = reference_pingpong(Path(tmp), [2**i for i in range(21)])
    ours = {(c, s): (statistics.median(v), min(v), max(v)) for c, s, v in rows}
    lines = [
        "## Kernel vs OSU 7.4 at 2 ranks (µs)",
        "",
        f"Command: `python benchmarks/bench_osu_compare.py` ({REPS} repetitions as separate "
        f"launches in random order, OSU default iterations, `--map-by core --bind-to core`; "
        f"campaign wall time {wall:.0f} s). OSU: `../shared/samples/osu-7.4/osu_latency_np2.txt`"
        " and `osu_bcast_np2.txt` (one run each, same machine type, another day). Ratio = "
        "collbench / OSU. Reference: `benchmarks/pingpong_ref.c`, a minimal ping-pong timed "
        f"as osu_latency, run {REPS} times here right after the campaign (median): it tells a "
        "difference of kernels from a difference of machines.",
        "",
        "| size | latency OSU | latency collbench median [min–max] | ratio | reference here "
        "| bcast OSU | bcast collbench median [min–max] | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    osu = {"latency": osu_sample("osu_latency_np2.txt"), "bcast": osu_sample("osu_bcast_np2.txt")}
    for size in sorted(osu["bcast"]):
        cells = [str(size)]
        for coll in ("latency", "bcast"):
            ref = osu[coll].get(size)
            got = ours.get((coll, size))
            if ref is None or got is None:
                cells += ["-", "-", "-"] + (["-"] if coll == "latency" else [])
                continue
            cells += [f"{ref:.2f}", f"{got[0]:.2f} [{got[1]:.2f}–{got[2]:.2f}]",
                      f"{got[0] / ref:.2f}"]
            if coll == "latency":
                cells.append(f"{here[size]:.2f}" if size in here else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "How to read it: where collbench's latency is close to the reference measured "
              "here, the kernel times as osu_latency does, and a gap to the recorded OSU figures "
              "is a difference between machines (the recorded ones came from another VM of this "
              "type)."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
