"""Precision-driven iterations: the 10-variant bcast sweep (Open MPI's default and its 9
coll/tuned algorithms, 1 B–1 MiB, 2 ranks) at equal precision, against OSU 7.4's
osu_bcast run once per algorithm with its fixed counts.

1. OSU: `osu_bcast -m 1:1048576` under `--mca coll_tuned_bcast_algorithm K`, K = 0..9,
   ten launches; their summed wall time is the reference.
2. The precision OSU's counts reach: the kernel in OSU mode with OSU's counts and
   --samples (one --mpit launch for all variants, the kernel times as osu_bcast does):
   per point the relative half-width of the 95% CI of the median; the median over
   points is the target "equal precision".
3. collbench: one --mpit launch with `precision=<that target>` (first batch 20, at most
   100,000 iterations or 10 s per point), and one at the spec's example target 0.02;
   their wall times against the reference.

    python benchmarks/bench_precision.py [--max-size BYTES]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_osu_fidelity import build_osu, mpirun

from collbench.catalog.collectives import osu_defaults
from collbench.catalog.mpi import find_mpi
from collbench.kernel.build import build_kernel

ALGORITHMS = range(10)  # coll/tuned bcast: 0 = default, 1..9 forced
READING = (
    "How to read it. \"Equal precision\" is the median, over the 210 points, of the relative "
    "half-width of the median's 95 % interval that OSU's own counts reach; 0.02 is the "
    "spec's example target. Precision mode spends iterations where the noise is (a few "
    "points need thousands) and the first batch of 20 elsewhere; on this 2-core VM shared "
    "with other jobs the noisy points dominate. Every point also pays costs OSU's loop does "
    "not: OSU's warm-up (200 calls below 8 KiB), the bookkeeping reductions and the output "
    "line (flushed per point, fsynced at most once a second: an fsync per point cost 5-15 ms "
    "here and made this launch 3x slower). The same launch with 20 iterations per point and "
    "no target takes about 1.3-1.6 s, about 0.1x OSU's wall time: that is the floor here.")


def forced(alg: int) -> tuple[tuple[str, str], ...]:
    return (("coll_tuned_use_dynamic_rules", "1"), ("coll_tuned_bcast_algorithm", str(alg)))


def kernel(exe: Path, lines: list[str], work: Path, *flags: str) -> tuple[list[dict[str, Any]],
                                                                          float]:
    jobs, out = work / "jobs.txt", work / "out.jsonl"
    jobs.write_text("".join(lines))
    t0 = time.monotonic()
    mpirun(find_mpi(), str(exe), "--jobs", str(jobs), "--output", str(out), "--mpit", *flags)
    wall = time.monotonic() - t0
    return [json.loads(x) for x in out.read_text().splitlines()], wall


def relative_halfwidth(samples: list[float]) -> float:
    """As the kernel's precision mode judges it (cs_median_ci): order statistics n/2 -+
    0.98 sqrt(n) around the median (the exact binomial search is slow at 10^4 samples)."""
    s, n = sorted(samples), len(samples)
    if n < 6:
        lo, hi = s[0], s[-1]
    else:
        h = 0.98 * math.sqrt(n)
        lo, hi = s[max(1, math.floor(n / 2 - h)) - 1], s[min(n, math.ceil(n / 2 + 1 + h)) - 1]
    med = statistics.median(s)
    return (hi - lo) / 2 / med if med > 0 else float("inf")


def main(max_size: int = 2**20) -> str:
    mpi = find_mpi()
    osu = build_osu(mpi)["bcast"]
    exe = build_kernel(mpi.mpicc).path
    sizes = [2**i for i in range(max_size.bit_length()) if 2**i <= max_size]
    t0 = time.monotonic()
    for alg in ALGORITHMS:
        mpirun(mpi, str(osu), "-m", f"1:{max_size}", mca=forced(alg))
    osu_wall = time.monotonic() - t0
    with tempfile.TemporaryDirectory() as tmp:
        fixed_lines = [f"bcast {a} 0 0 {s} {' '.join(map(str, osu_defaults('bcast', s)))}\n"
                       for a in ALGORITHMS for s in sizes]
        fixed, fixed_wall = kernel(exe, fixed_lines, Path(tmp), "--samples")
        reached = [relative_halfwidth(r["samples_us"]) for r in fixed if r["status"] == "ok"]
        target = statistics.median(reached)
        runs = []
        for goal in (target, 0.02):
            lines = [f"bcast {a} 0 0 {s} 20 {osu_defaults('bcast', s)[1]} "
                     f"precision={goal:.4g} max_iterations=100000 max_seconds=10\n"
                     for a in ALGORITHMS for s in sizes]
            runs.append((goal, *kernel(exe, lines, Path(tmp))))
    rows = []
    for goal, precise, wall in runs:
        got = [r["precision"] for r in precise if r["status"] == "ok"]
        iters = [r["iterations"] for r in precise if r["status"] == "ok"]
        met = sum(x <= goal for x in got)
        rows.append((f"| collbench kernel, precision={goal:.4g} (one launch) | {wall:.1f} | "
                     f"{len(precise)} | {statistics.median(got):.4f} | "
                     f"{statistics.median(iters):.0f}, {max(iters)} |",
                     f"precision={goal:.4g}: wall-time ratio collbench / OSU "
                     f"{wall / osu_wall:.3f}; {met} of {len(got)} points met the target, the "
                     "others stopped at a cap."))
    return "\n".join([
        "## Precision-driven iterations: the 10-variant bcast sweep at equal precision", "",
        f"Command: `python benchmarks/bench_precision.py --max-size {max_size}` (1 B–"
        f"{max_size} B, 2 ranks, `--map-by core --bind-to core`; wall times include each "
        "launch's start-up).", "",
        "| | wall (s) | points | median precision reached | iterations (median, max) |",
        "|---|---:|---:|---:|---:|",
        f"| OSU 7.4 osu_bcast, once per algorithm (10 launches) | {osu_wall:.1f} | "
        f"{len(fixed)} | - | OSU's fixed counts |",
        f"| collbench kernel, OSU's counts (one launch, samples) | {fixed_wall:.1f} | "
        f"{len(fixed)} | {target:.4f} | fixed |",
        *(r[0] for r in rows), "", *(r[1] for r in rows), "", READING,
    ])


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    cli.add_argument("--max-size", type=int, default=2**20)
    print(main(cli.parse_args().max_size))
