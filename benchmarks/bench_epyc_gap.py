"""The chain on ORFEO EPYC (issue 25): how a copy slows down when the node works, in the
real runs and in the simulation on the built-in orfeo-epyc, and what the few-rank probe a
calibration may read can show of it. From collbench's commands on ../shared/data/orfeo-epyc
(`ingest`, `run --backend simgrid`, `export`):

1. The time per hop of the one-segment chain (bcast pipeline: OSU's average over ranks of a
   chain is (1 + P(P-1)/2) / P hops), per size and process count, real and simulated, and
   its ratio to the 2-rank hop: from 16 KiB on a real hop costs about the 2-rank bcast at 2
   ranks, about 1.5x it at 4 (one CCX busy) and 1.7-2.0x from 8 ranks on (two CCXs or more
   busy), at every count to 256. The built-in's load term (fitted on barriers) slows a
   cross-CCX message's bytes by 1 + load / latency ([memory] load_bandwidth).
2. The 4-rank probe (one CCX, every bcast and scatter algorithm, 8-256 KiB) simulated
   against the real 4-rank rows: the median ratio. A fit to it could not see the effect,
   which starts with the second CCX.

Run: `.venv/bin/python benchmarks/bench_epyc_gap.py` (about 2 min on 2 cores), or
`python benchmarks/run_all.py epyc_gap`.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
import tempfile
from pathlib import Path

from bench_models_real import ingest
from bench_orfeo_epyc import ALGORITHMS, spec
from common import cli, run_campaign

HOP_SIZES = (2, 1024, 16384, 65536, 262144)
HOP_NPROCS = (2, 4, 8, 32, 128, 256)
PROBE_SIZES = [8192, 16384, 32768, 65536, 131072, 262144]
Hops = dict[tuple[int, int], float]


def rows(folder: Path, work: Path, name: str) -> list[dict[str, str]]:
    out = work / f"{name}.csv"
    cli("export", folder, "-o", out)
    with out.open() as f:
        return list(csv.DictReader(f))


def chain_hops(found: list[dict[str, str]]) -> Hops:
    """(size, nprocs) -> µs per hop of a one-segment chain (bcast pipeline)."""
    out = {}
    for r in found:
        if r["collective"] == "bcast" and r["algorithm"] == "pipeline" and r["avg_us"]:
            p, s = int(r["nprocs"]), int(r["size_bytes"])
            if p in HOP_NPROCS and s in HOP_SIZES:
                out[(s, p)] = float(r["avg_us"]) / ((1 + p * (p - 1) / 2) / p)
    return out


def chain_spec() -> str:
    """bench_orfeo_epyc's spec: the chain alone, at the table's counts and sizes."""
    text = re.sub(r"^nprocs = .*$", f"nprocs = {list(HOP_NPROCS)}", spec(), flags=re.M)
    text = re.sub(r"^sizes = .*$", f"sizes = {list(HOP_SIZES)}", text, flags=re.M)
    text = re.sub(r'^collectives = .*$', 'collectives = ["bcast"]', text, flags=re.M)
    text = re.sub(r"^bcast = .*$", 'bcast = ["pipeline"]', text, flags=re.M)
    return re.sub(r"^scatter = .*\n", "", text, flags=re.M)


def probe_spec() -> str:
    """bench_orfeo_epyc's spec at 4 ranks (one CCX) and the rendezvous sizes."""
    text = re.sub(r"^nprocs = .*$", "nprocs = [4]", spec(), flags=re.M)
    return re.sub(r"^sizes = .*$", f"sizes = {PROBE_SIZES}", text, flags=re.M)


def probe_ratio(real: list[dict[str, str]], sim: list[dict[str, str]]) -> float:
    """Median over the 4-rank points of simulated / real avg_us."""
    have = {(r["collective"], r["algorithm"], int(r["size_bytes"])): float(r["avg_us"])
            for r in real if r["nprocs"] == "4" and r["avg_us"]}
    return statistics.median(float(r["avg_us"]) / have[k] for r in sim
                             if (k := (r["collective"], r["algorithm"], int(r["size_bytes"])))
                             in have and r["avg_us"])


def table(title: str, hops: Hops) -> list[str]:
    out = [title, "", "| size B | " + " | ".join(f"{p} ranks" for p in HOP_NPROCS) + " |",
           "|---|" + "---|" * len(HOP_NPROCS)]
    for s in HOP_SIZES:
        base = hops.get((s, 2))
        out.append(f"| {s} | " + " | ".join(
            f"{hops[(s, p)]:.2f} ({hops[(s, p)] / base:.2f}×)" if (s, p) in hops and base
            else "-" for p in HOP_NPROCS) + " |")
    return out


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep the folders here (default: temporary)")
    args = ap.parse_args([] if argv is None else argv)  # run_all passes none
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ingest(work)
        real = rows(work / "real", work, "real")
        run_campaign(chain_spec(), work / "chain")
        run_campaign(probe_spec(), work / "probe")
        simulated = chain_hops(rows(work / "chain", work, "chain"))
        ratio = probe_ratio(real, rows(work / "probe", work, "probe"))
    return "\n".join([
        *table("Real chain (bcast pipeline, one segment): µs per hop, and its ratio to 2 ranks",
               chain_hops(real)), "",
        *table("Simulated on orfeo-epyc (SimGrid, the built-in):", simulated), "",
        f"4-rank probe ({', '.join(ALGORITHMS)}, every algorithm, {PROBE_SIZES[0]}-"
        f"{PROBE_SIZES[-1]} B): median simulated / real {ratio:.2f} on orfeo-epyc"])


if __name__ == "__main__":
    print(main(sys.argv[1:]))
