"""(c) `collbench report` on a results folder with 10 million raw samples: time and memory;
and `collbench compare` on it, against another checkout's with `--baseline-src OLD/src`
(the read path before and after a change, interleaved rounds on one folder).

The folder is synthesised (no MPI): tidy rows through Store.write_launch, and the samples
written as Parquet straight from DuckDB, one file per launch as `collbench run` does. The
report aggregates samples inside DuckDB (quantiles per launch and point), so its memory
should not grow with their number.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from collbench.records import make_row
from collbench.store import Store, sql_path

ROUNDS = 3
COLLECTIVES = ("bcast", "allreduce")
ALGORITHMS = ("default", "basic_linear", "binomial", "binary_tree", "chain", "pipeline",
              "knomial", "ring")
SIZES = tuple(2**k for k in range(21))  # 1 B – 1 MiB
NPROCS = (4, 8)
REPETITIONS = 5
ITERATIONS = 3000  # samples per point: 2 × 8 × 21 × 2 × 5 points × 3000 = 10,080,000

# Runs the report in a child and prints that child's peak RSS (kB): the report's own
# workers are its children, and earlier benchmarks' processes are not counted.
MEASURE = ("import resource, subprocess, sys\n"
           "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def report_command(results: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "collbench.cli", "report", str(results), "-o", str(out)]


def _latency(alg: int, size: int, nprocs: int) -> float:
    """A plausible α + size/β model with a per-algorithm twist (µs)."""
    alpha = (1.0 + 0.3 * alg) * math.log2(nprocs)
    beta = 2000.0 * (1 + 0.15 * ((alg * 3) % 5))
    return alpha + size / beta


def synthesise(root: Path) -> int:
    """A results folder with rows and raw samples; returns the number of samples."""
    store = Store(root)
    store.create({"name": "report-scale", "seed": 1, "backend": "synthetic"}, "",
                 {"launches": []}, {"host": "synthetic", "cores": 64,
                                    "mpi": {"implementation": "openmpi", "version": "5.0"}})
    rng = random.Random(1)
    con = duckdb.connect()
    total = 0
    try:
        for rep in range(REPETITIONS):
            for nprocs in NPROCS:
                lid = f"{rep:02d}-np{nprocs}"
                rows: list[dict[str, Any]] = []
                points: list[tuple[int, str, str, int, float]] = []
                for coll in COLLECTIVES:
                    for a, alg in enumerate(ALGORITHMS):
                        for size in SIZES:
                            t = _latency(a, size, nprocs) * rng.uniform(0.95, 1.1)
                            points.append((len(points), coll, alg, size, t))
                            rows.append(_row(lid, rep, coll, alg, nprocs, size, t))
                _write_samples(con, store, lid, points)
                total += len(points) * ITERATIONS
                store.write_launch(lid, rows, {"status": "ok"})
    finally:
        con.close()
    return total


def _row(lid: str, rep: int, coll: str, alg: str, nprocs: int, size: int,
         t: float) -> dict[str, Any]:
    return make_row(
        campaign="report-scale", launch_id=lid, repetition=rep, backend="synthetic",
        source="kernel", mpi="openmpi", mpi_version="5.0", collective=coll, algorithm=alg,
        segsize=0, fanout=0, params=json.dumps({"env": {}, "mca": {}, "swept": {}}),
        nprocs=nprocs, nodes=1, ppn=nprocs, mapping="core", binding="core", size_bytes=size,
        iterations=ITERATIONS, warmup=100, avg_us=t, min_us=0.9 * t, max_us=1.2 * t,
        median_us=t, status="ok")


def _write_samples(con: duckdb.DuckDBPyConnection, store: Store, lid: str,
                   points: list[tuple[int, str, str, int, float]]) -> None:
    con.execute("CREATE OR REPLACE TABLE points (idx BIGINT, collective VARCHAR, "
                "algorithm VARCHAR, size_bytes BIGINT, t DOUBLE)")
    con.executemany("INSERT INTO points VALUES (?, ?, ?, ?, ?)", points)
    path = store.root / "samples" / f"{lid}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    # Column order and types of records.SAMPLE_COLUMNS; a 1 % tail of slow iterations.
    con.execute(f"""
        COPY (SELECT '{lid}' AS launch_id, p.collective, p.algorithm, 0::BIGINT AS segsize,
                     0::INTEGER AS fanout, p.size_bytes,
                     (r.range % {ITERATIONS})::INTEGER AS iteration,
                     p.t * (0.9 + 0.2 * random()
                            + CASE WHEN random() < 0.01 THEN 3 ELSE 0 END) AS sample_us
              FROM range({len(points) * ITERATIONS}) r
              JOIN points p ON p.idx = r.range // {ITERATIONS})
        TO '{sql_path(path)}' (FORMAT parquet)""")


def compare_wall(results: Path, src: Path | None) -> float:
    """Wall time of one `collbench compare RESULTS --format json` in a fresh process, with
    the collbench of `src` (a checkout's src/ folder) when given."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "collbench.cli", "compare", str(results),
                    "--format", "json"], check=True, stdout=subprocess.DEVNULL, env=env)
    return time.monotonic() - start


def main(baseline_src: Path | None = None) -> str:
    walls: list[float] = []
    peaks: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp) / "results"
        start = time.monotonic()
        samples = synthesise(results)
        synth = time.monotonic() - start
        compares: dict[str, list[float]] = {"this": [], "baseline": []}
        for _ in range(ROUNDS):  # interleaved: drift of the machine hits both alike
            compares["this"].append(compare_wall(results, None))
            if baseline_src is not None:
                compares["baseline"].append(compare_wall(results, baseline_src))
        parquet_mb = sum(p.stat().st_size for p in (results / "samples").glob("*")) / 1e6
        for r in range(ROUNDS):
            out = Path(tmp) / f"report{r}"
            start = time.monotonic()
            res = subprocess.run([sys.executable, "-c", MEASURE,
                                  *report_command(results, out)],
                                 check=True, capture_output=True, text=True)
            walls.append(time.monotonic() - start)
            peaks.append(int(res.stdout.split()[-1]) / 1024)  # ru_maxrss is in kB on Linux
        figs = len(list((Path(tmp) / "report0" / "figures").glob("*.png")))
        page_mb = (Path(tmp) / "report0" / "index.html").stat().st_size / 1e6
    points = len(COLLECTIVES) * len(ALGORITHMS) * len(SIZES) * len(NPROCS)
    return "\n".join([
        "## Report on 10 million raw samples",
        "",
        f"Command: `python benchmarks/bench_report_scale.py`: a synthetic results folder "
        f"({len(COLLECTIVES)} collectives × {len(ALGORITHMS)} algorithms × {len(SIZES)} "
        f"sizes × {len(NPROCS)} process counts = {points} points, {REPETITIONS} "
        f"repetitions, {ITERATIONS} samples per point: {samples:,} samples, "
        f"{parquet_mb:.0f} MB of Parquet, written in {synth:.1f} s), then "
        f"`collbench report results -o report` ({ROUNDS} runs, each a fresh process; "
        "wall time includes Python start-up; peak memory is the largest resident set of "
        "the report process and its figure workers).",
        "",
        "| figures | page (MB) | wall time median (s) | all runs (s) | peak RSS median (MB) |",
        "|---:|---:|---:|---|---:|",
        f"| {figs} | {page_mb:.1f} | {statistics.median(walls):.1f} | "
        f"{', '.join(f'{w:.1f}' for w in walls)} | {statistics.median(peaks):.0f} |",
        "",
        "Samples are reduced to quantiles per launch and point inside DuckDB, so they never "
        "reach Python; the time goes into drawing the figures (matplotlib, in parallel "
        "worker processes).",
        "",
        f"`collbench compare results --format json` on the same folder ({ROUNDS} runs, "
        "fresh processes, Python start-up included): median "
        f"{statistics.median(compares['this']):.2f} s "
        f"({', '.join(f'{w:.2f}' for w in compares['this'])})"
        + (f"; with {baseline_src} (interleaved): median "
           f"{statistics.median(compares['baseline']):.2f} s "
           f"({', '.join(f'{w:.2f}' for w in compares['baseline'])})"
           if baseline_src is not None else "") + ".",
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-src", type=Path,
                        help="another checkout's src/ folder: its compare is timed too")
    print(main(parser.parse_args().baseline_src))
