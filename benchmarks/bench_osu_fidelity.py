"""Kernel fidelity: collbench's OSU-mode figures beside OSU 7.4's own osu_latency and
osu_bcast, built from source outside the repository and run in the same job, interleaved.

Each round runs osu_latency, osu_bcast and the collbench kernel (latency and bcast at the
same sizes, OSU's default iterations) at 2 ranks, `--map-by core --bind-to core
--mca btl ^ofi` (as collbench's local backend on one host), in an order shuffled per
round. A figure is the median over rounds of OSU's "Avg Latency" column and of the
kernel's avg_us; beside it, the interquartile range (IQR) over rounds of the same figure,
each tool's round-to-round spread. Targets (issue 16): within ±5 % at every size >= 4 KiB
and within 0.03 µs below.

`--baseline SOURCE` also measures a kernel compiled from another collbench_kernel.c (e.g.
`git show REV:src/collbench/kernel/collbench_kernel.c > old.c`) in the same rounds, for
an A/B of a kernel change against OSU.

OSU's source: $OSU_SRC (the `c` folder of osu-micro-benchmarks-7.4), default
/tmp/osu74/c, taken from the git directory $OSU_GIT when missing; the binaries are built
into /tmp/osu (never inside the repository).

    python benchmarks/bench_osu_fidelity.py [--rounds N] [--max-size BYTES] [--baseline C]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from collbench.catalog.collectives import osu_defaults
from collbench.catalog.mpi import MpiInstall, find_mpi, launcher_env
from collbench.kernel.build import build_kernel, kernel_source, support_sources
from collbench.launch.local import PMIX_STARTUP_FAILURE, STARTUP_RETRIES

OSU_SRC = Path(os.environ.get("OSU_SRC", "/tmp/osu74/c"))
OSU_GIT = Path(os.environ.get(
    "OSU_GIT", "/work/.mirror/sherrywong1220+osu-micro-benchmarks-7.4/repo"))
OSU_BIN = Path("/tmp/osu")
PROGRAMS = {"latency": "mpi/pt2pt/standard/osu_latency.c",
            "bcast": "mpi/collective/blocking/osu_bcast.c"}
UTIL = ("osu_util.c", "osu_util_mpi.c", "osu_util_graph.c", "osu_util_papi.c",
        "osu_util_validation.c")
# Open MPI spends about 1 s of MPI_Init probing the TCP BTL on this VM; on one node the
# messages go through shared memory either way, so leaving TCP out only shortens rounds.
MCA = (("btl", "^ofi"),)  # the local backend's one-host setting (launch/local.py)
SMALL = 4096  # below: absolute tolerance; from here on: relative
ABS_US, REL = 0.03, 0.05
ROUNDS = 15
Figures = dict[tuple[str, int], float]
READING = (
    "How to read it. A cell is the median over rounds, with the IQR over rounds (each "
    "tool's round-to-round spread) in brackets; ok is the issue's target, unchanged, and "
    "the count under the table says how many misses are smaller than either tool's IQR. "
    "**What was found.** Line by line the kernel's OSU mode does what osu_bcast and "
    "osu_latency 7.4 do (MPI_Wtime around each call or round trip; MPI_Barrier before the "
    "loop and after each collective call, untimed; OSU's warm-up and iteration counts; avg "
    "= mean over ranks of each rank's mean, or the mean round trip / 2) except in its "
    "buffers, and the buffers mattered. OSU allocates its buffers once, page-aligned, at "
    "the largest size: osu_bcast touches its buffer whole at once, osu_latency only each "
    "size's bytes. The kernel allocated fresh buffers per point, each touched whole. "
    "A/B against the kernel before the change (`--baseline` with `git show "
    "bc9d154:src/collbench/kernel/collbench_kernel.c`, 15 interleaved rounds): its latency "
    "was 3.5-7.6 % below osu_latency's from 2 KiB to 64 KiB (5 misses), the new kernel's "
    "is within 2.2 % there but at 8 KiB (4.9 %). A scratch variant showed why: a 1 MiB "
    "ping-pong buffer touched whole gives the old kernel's figures, touched per size "
    "OSU's. For bcast the cost of fresh buffers depended on the allocator's state: with "
    "bcast alone in a launch (25 rounds, medians of the per-round ratios) the old kernel "
    "was 3-11 % above osu_bcast from 4 KiB to 512 KiB and the new one within 1.5 %; after "
    "1 MiB latency points in the same "
    "launch (this benchmark) the old one was not. The kernel now has OSU's scheme: per "
    "launch a send and a receive buffer for the collectives, touched whole when allocated, "
    "and a pair for latency/bw, touched per point, both reserved at the largest point "
    "before the first. **Tried, not changed.** Measuring on MPI_COMM_WORLD instead of "
    "MPI_Comm_dup(MPI_COMM_WORLD) (a variant kernel, bcast and latency, 15-25 rounds) "
    "moved nothing beyond the spread, so the duplicate stays: a refused algorithm fails a "
    "point, not the launch; MPI_T forcing needs a new communicator; `rules verify`'s "
    "trace method tells measured calls from bookkeeping by communicator. OSU's buffer "
    "contents ('a', 'b') and an MPI_Status instead of MPI_STATUS_IGNORE: no difference. "
    "The MPI_T session opens only with --mpit, not used here. Both tools run with "
    "`--mca btl ^ofi`, as collbench's local backend does on one host: it saves the 1 s "
    "libfabric start-up per launch (docs/spec.md) and changes no path between two ranks of "
    "one host (shared memory). The 10-25 % small-message bcast gap of the `osu_compare` "
    "section is against "
    "OSU figures recorded on another VM on another day; side by side it is not there. "
    "**osu_latency's own 4 KiB figure moves.** The kernel's 4 KiB ping-pong read 4-8 % "
    "below osu_latency in some runs. A helper session bisected it (25 interleaved rounds, "
    "paired ratios): osu_latency's own 4 KiB figure drops by about as much when the program "
    "also stores each iteration's time, as OSU's `-z` does and the kernel always does "
    "(plain 1.39 µs, `-z` 1.32, kernel 1.35), and a scratch ping-pong with OSU's buffers "
    "drops 4-7 % from one 80 KB malloc or one fsync after the first size. 4 KiB is the "
    "first size on Open MPI's single-copy path (process_vm_readv) here, where the "
    "sensitivity sits; being the first size of a launch raises it 2-4 % for both tools. "
    "No change to the kernel's loop removed it (13 variants), so the table shows "
    "osu_latency -z beside plain osu_latency, measured in the same rounds; the target "
    "stays judged against the plain one. "
    "**32 and 64 KiB: where glibc puts the kernel's buffers.** Over 360 paired rounds "
    "(helper-22) the kernel's ping-pong read 0.964 x osu_latency at 32 KiB and 1.034 at "
    "64 KiB. glibc's default mmap threshold starts at 128 KiB and moves with what is freed, "
    "so the pools landed in per-block mmaps or in the heap depending on the points before. "
    "The kernel now fixes the threshold at 32 MiB after MPI_Init (its pools come from the "
    "heap; MPI's own allocations are as in OSU's programs): 1.003 and 0.982 over 100 "
    "rounds, the other sizes within 1 % (8 KiB +2 %). osu_latency run with the same "
    "threshold (LD_PRELOAD) does not move; why placement matters on the single-copy path "
    "is not known (no fsync, or --samples, also shift these two sizes by a few %). To "
    "repeat the A/B: `git show 16c2e66:src/collbench/kernel/collbench_kernel.c > old.c; "
    "python benchmarks/bench_osu_fidelity.py --baseline old.c`; one 15-round run moves "
    "about +-3 % at these sizes, so take several. "
    "**Left: noise.** Runs in a row differ by a few misses either way (2026-11-24: 3, 17 "
    "during a burst of load, 3). OSU prints two decimals, so below 4 KiB its figures move "
    "in 0.01 µs steps against a 0.03 µs target, and osu_latency's round-to-round spread "
    "at 2-32 KiB is often 2-4 times the kernel's; bcast at 512 B-2 KiB reads 0.01-0.06 µs below "
    "osu_bcast in some runs, not in others. In 15-round A/B runs with latency alone and "
    "with latency and bcast in one launch, the kernel's latency was within the target at "
    "every size from 4 KiB and within 0.035 µs below. Another process on this 2-core VM "
    "stalls a 2-rank run: run it as `flock /tmp/collbench-bench.lock python "
    "benchmarks/run_all.py osu_fidelity` (the lock the project's timing runs share) on a "
    "quiet machine.")


def osu_source() -> Path:
    """The `c` folder of OSU 7.4, extracted from OSU_GIT the first time if needed."""
    if not (OSU_SRC / "util" / "osu_util.c").exists() and (OSU_GIT / "HEAD").exists():
        OSU_SRC.parent.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", str(OSU_GIT), "archive", "HEAD", "c"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(OSU_SRC.parent)], input=archive, check=True)
    if not (OSU_SRC / "util" / "osu_util.c").exists():
        raise SystemExit(f"OSU 7.4 source not found at {OSU_SRC}: set OSU_SRC to the `c` "
                         "folder of osu-micro-benchmarks-7.4 (or OSU_GIT to its git folder)")
    return OSU_SRC


def build_osu(mpi: MpiInstall) -> dict[str, Path]:
    src = osu_source()
    OSU_BIN.mkdir(parents=True, exist_ok=True)
    util = src / "util"
    out = {}
    for coll, rel in PROGRAMS.items():
        exe = OSU_BIN / Path(rel).stem
        if not exe.exists():
            subprocess.run([str(mpi.mpicc), "-O2", "-I", str(util), "-o", str(exe),
                            str(src / rel), *(str(util / u) for u in UTIL), "-lm"],
                           check=True)
        out[coll] = exe
    return out


def build_baseline(mpi: MpiInstall, source: Path, out: Path) -> Path:
    """A kernel from another source, compiled as kernel/build.py compiles the kernel."""
    subprocess.run([str(mpi.mpicc), "-O2", "-I", str(kernel_source().parent), "-o", str(out),
                    str(source), *(str(p) for p in support_sources()), "-lm"], check=True)
    return out


def mpirun(mpi: MpiInstall, *argv: str, mca: tuple[tuple[str, str], ...] = ()) -> str:
    """A 2-rank launch's stdout; started again when PMIx's start-up race killed it before
    any rank ran (exit 213), as collbench's runner does (launch/local.py)."""
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    params = [a for k, v in mca for a in ("--mca", k, v)]
    cmd = [str(mpi.mpirun), *root, "-np", "2", "--map-by", "core", "--bind-to", "core",
           *params, *argv]
    for _ in range(STARTUP_RETRIES + 1):
        done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              env=launcher_env(mpi), timeout=3600)
        code, text = PMIX_STARTUP_FAILURE
        if not (done.returncode == code and text in done.stderr):
            break
    done.check_returncode()
    return done.stdout


def osu_run(mpi: MpiInstall, exe: Path, coll: str, max_size: int,
            *options: str) -> Figures:
    text = mpirun(mpi, str(exe), "-m", f"1:{max_size}", *options, mca=MCA)
    return {(coll, int(m.group(1))): float(m.group(2))
            for m in re.finditer(r"^\s*(\d+)\s+([\d.]+)", text, re.MULTILINE)}


def kernel_run(mpi: MpiInstall, kernel: Path, sizes: list[int], work: Path) -> Figures:
    jobs, out = work / "jobs.txt", work / f"{kernel.name}.jsonl"
    jobs.write_text("".join(f"{c} 0 0 0 {s} {' '.join(map(str, osu_defaults(c, s)))}\n"
                            for c in PROGRAMS for s in sizes))
    mpirun(mpi, str(kernel), "--jobs", str(jobs), "--output", str(out), mca=MCA)
    return {(r["collective"], r["size_bytes"]): float(r["avg_us"])
            for r in map(json.loads, out.read_text().splitlines())}


Runs = dict[str, list[Figures]]  # tool -> one Figures per round


def measure(rounds: int, max_size: int, baseline: Path | None) -> tuple[Runs, float]:
    mpi = find_mpi()
    osu = build_osu(mpi)
    sizes = [2**i for i in range(max_size.bit_length()) if 2**i <= max_size]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        kernels = {"collbench": build_kernel(mpi.mpicc).path}
        if baseline is not None:
            kernels["baseline"] = build_baseline(mpi, baseline, work / "baseline_kernel")
        runs: Runs = {"osu": [], "osu_z": [], **{k: [] for k in kernels}}
        rng = random.Random(16)
        t0 = time.monotonic()
        for _ in range(rounds):
            steps: list[tuple[str, Callable[[], Figures]]] = [
                ("osu", partial(osu_run, mpi, osu[c], c, max_size)) for c in PROGRAMS]
            # osu_latency -z stores each iteration's latency, as the kernel always does
            steps.append(("osu_z", partial(osu_run, mpi, osu["latency"], "latency",
                                           max_size, "-z")))
            steps += [(k, partial(kernel_run, mpi, exe, sizes, work))
                      for k, exe in kernels.items()]
            rng.shuffle(steps)
            got: dict[str, Figures] = {who: {} for who in runs}
            for who, step in steps:
                got[who].update(step())
            for who in runs:
                runs[who].append(got[who])
        return runs, time.monotonic() - t0


def spread(runs: list[Figures], key: tuple[str, int]) -> tuple[float, float] | None:
    """(median, interquartile range) over rounds, or None where a round lacks the figure."""
    values = [r[key] for r in runs if key in r]
    if len(values) < len(runs) or len(values) < 2:
        return None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return statistics.median(values), q3 - q1


def within(size: int, ours: float, theirs: float) -> bool:
    return (abs(ours - theirs) <= ABS_US if size < SMALL
            else abs(ours / theirs - 1) <= REL)


def table(runs: Runs, tool: str) -> tuple[list[str], int, int, int]:
    """Markdown rows of `tool` against OSU; (lines, misses, misses within the spread,
    latency misses against osu_latency -z)."""
    lines = [f"| size | latency OSU | latency {tool} | ratio | ok | latency OSU -z | ratio | "
             f"ok | bcast OSU | bcast {tool} | ratio | ok |",
             "|---:|---:|---:|---:|:-:|---:|---:|:-:|---:|---:|---:|:-:|"]
    misses = noisy = misses_z = 0
    for size in sorted({s for r in runs["osu"] for _, s in r}):
        cells = [str(size)]
        for coll in PROGRAMS:
            if coll == "bcast":  # after latency: its figure against osu_latency -z
                z, b = spread(runs["osu_z"], ("latency", size)), \
                    spread(runs[tool], ("latency", size))
                if z is None or b is None:
                    cells += ["-"] * 3
                else:
                    good = within(size, b[0], z[0])
                    misses_z += not good
                    cells += [f"{z[0]:.2f} ({z[1]:.2f})", f"{b[0] / z[0]:.3f}",
                              "yes" if good else "**no**"]
            a, b = spread(runs["osu"], (coll, size)), spread(runs[tool], (coll, size))
            if a is None or b is None:
                cells += ["-"] * 4
                continue
            good = within(size, b[0], a[0])
            misses += not good
            noisy += not good and abs(b[0] - a[0]) < max(a[1], b[1])
            cells += [f"{a[0]:.2f} ({a[1]:.2f})", f"{b[0]:.2f} ({b[1]:.2f})",
                      f"{b[0] / a[0]:.3f}", "yes" if good else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines, misses, noisy, misses_z


def main(rounds: int = ROUNDS, max_size: int = 2**20, baseline: Path | None = None) -> str:
    runs, wall = measure(rounds, max_size, baseline)
    command = f"python benchmarks/bench_osu_fidelity.py --rounds {rounds}"
    if baseline is not None:
        command += f" --baseline {baseline}"
    lines = ["## Kernel fidelity: OSU mode beside OSU 7.4, interleaved, 2 ranks", "",
             f"Command: `{command}` (wall {wall:.0f} s; cells: median over rounds (IQR over "
             f"rounds), µs; ratio = collbench median / OSU median; ok = within {ABS_US} µs "
             f"below {SMALL} B, within ±{REL:.0%} from there on; both tools with "
             "`--mca btl ^ofi`).", ""]
    tools = ["collbench", *(["baseline"] if baseline is not None else [])]
    for tool in tools:
        if tool == "baseline":
            lines += [f"The kernel built from `{baseline}`, in the same rounds:", ""]
        rows, misses, noisy, misses_z = table(runs, tool)
        lines += [*rows, "", f"{misses} figure(s) outside the target, {noisy} of them by "
                  "less than either tool's IQR (against plain osu_latency and osu_bcast). "
                  f"Against osu_latency -z: {misses_z} latency figure(s) outside the target.",
                  ""]
    return "\n".join([*lines, READING])


def bounded(lo: int, hi: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = lo - 1
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}: want an integer from {lo} to {hi}")
        return value
    return parse


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    cli.add_argument("--rounds", type=bounded(2, 200), default=ROUNDS, help="2-200")
    cli.add_argument("--max-size", type=bounded(1, 2**30), default=2**20,
                     help="largest size in bytes, 1 B-1 GiB")
    cli.add_argument("--baseline", type=Path, default=None,
                     help="another collbench_kernel.c to measure in the same rounds")
    args = cli.parse_args()
    print(main(args.rounds, args.max_size, args.baseline))
