"""The fake backend's stand-in kernel (`python -m collbench.launch.fakekernel`): reads the
job file, writes the C kernel's JSON lines with Hockney-model latencies. Standard library
only: it starts once per fake launch, and collbench's own modules would triple that."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path


def _latency_us(coll: str, alg: int, size: int, nprocs: int) -> float:
    alpha, beta = 1.0 + 0.1 * alg, 5000.0  # µs, bytes/µs
    return alpha * math.ceil(math.log2(max(nprocs, 2))) + size / beta * (1 + alg % 3)


def _nonblocking(options: list[str], pure: float) -> dict[str, object]:
    """Synthetic OSU non-blocking figures: MPI_Test calls buy progress (50 calls: all of
    the pure time hidden), each costs 0.02 µs; the kernel's keys and formulas."""
    opts = dict(o.split("=", 1) for o in options)
    tests, compute, hide = int(opts.get("test_calls", "0")), opts.get("compute", "auto"), \
        int(opts.get("hide_steps", "0"))
    cpu = (pure if compute == "auto" else float(compute[:-1]) * pure if compute.endswith("x")
           else float(compute.removesuffix("us")))
    hidden = min(1.0, tests / 50) * min(cpu, pure)
    init, test, wait = 0.1 * pure, 0.02 * tests, pure - hidden
    overall = init + cpu + test + wait
    raw = 100 - (overall - cpu) / pure * 100
    return {
        "test_calls": tests, "compute": compute, "hide_steps": hide, "overall_us": overall,
        "compute_us": cpu, "init_us": init, "test_us": test, "wait_us": wait,
        "pure_us": pure, "min_comm_us": pure * 0.9, "max_comm_us": pure * 1.1,
        "overlap_pct": max(0.0, raw),
        "overlap_imb_pct": 100 * max(0.0, min(1.0, (pure + cpu - overall) / max(pure, cpu))),
        "overlap_raw_pct": raw, "slowdown_us": max(0.0, overall - cpu - pure),
        "max_hidden_us": min(1.0, tests / 50) * pure if hide else None,
        "max_hidden_pct": min(1.0, tests / 50) * 100 if hide else None,
        "hide_bound_us": pure * 1.05 if hide else None,
    }


def _rank_command(argv: list[str]) -> int | list[str]:
    """`-np N -- COMMAND...`: the kernel's flags (COMMAND[1:]) when COMMAND is the kernel,
    else the program run as it is (exit status returned)."""
    split = argv.index("--")
    nprocs, command = argv[:split], argv[split + 1:]
    if "--jobs" in command:
        return nprocs + command[1:]
    env = {**os.environ, "COLLBENCH_FAKE_NPROCS": nprocs[nprocs.index("-np") + 1]}
    sys.stdout.flush()
    try:
        os.execvpe(command[0], command, env)
    except OSError as e:
        sys.stderr.write(f"fake launcher: cannot start {command[0]}: {e.strerror or e}\n")
    return 127


def main(argv: list[str]) -> int:
    if "--" in argv:
        got = _rank_command(argv)
        if isinstance(got, int):
            return got
        argv = got
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
        for index, (coll, alg, seg, fan, size, iters, warm, *options) in enumerate(lines):
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
            if coll.startswith("i"):  # non-blocking: avg/min/max are the pure time
                row.update(_nonblocking(options, lat))
            if "timing=completion" in options:  # the last rank ends after the average
                row.update(completion_us=lat * 1.2, completion_ci=[lat * 1.15, lat * 1.25],
                           completion_late=0, synced_avg_us=lat, sync_error_us=0.1)
            if any(o.startswith("precision=") for o in options):  # reached at the first batch
                row.update(precision=float(next(o for o in options
                                                if o.startswith("precision="))[10:]) / 2)
            if index == debug_at and debug == "corrupt" and "--validate" in flags:
                row.update(status="invalid", error="rank 1 index 0: expected 1 got 254",
                           avg_us=None, min_us=None, max_us=None, median_us=None,
                           validated=False)
                row.update({k: None for k in row if k.endswith(("_us", "_pct"))
                            and k != "samples_us"})
            out.write(json.dumps(row) + "\n")
            out.flush()
            os.fsync(out.fileno())
            time.sleep(float(os.environ.get("COLLBENCH_FAKE_POINT_S", "0")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
