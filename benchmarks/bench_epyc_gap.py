"""What the rest of the error on ORFEO EPYC needs (issue 25): a measurement the dev set does
not have. Three figures, each from collbench's commands on ../shared/data/orfeo-epyc:

1. The chain's time per hop in the real runs (bcast pipeline, one segment: OSU's average
   over ranks of a chain is (1 + P(P-1)/2) / P hops), per size and process count: from 16
   KiB on a hop costs about the 2-rank bcast at 2 ranks, about 1.5× it at 4 (one CCX
   busy) and 1.7-1.9× it from 8 ranks on (two CCXs and more busy), at every count to 256.
   A copy slows down when the node's other cores work: no ping-pong (two busy cores) can
   show it.
2. The few-rank probe the calibration may use (`collbench run --backend simgrid` at 4
   ranks, every algorithm, 8-256 KiB, against the real 4-rank rows) already matches
   without any such term: a fit to it finds none. The slowdown appears from 8 ranks on,
   which only the scored collectives show.
3. What the term would be worth: the scored points (bench_orfeo_epyc's) simulated and
   modelled on a copy of the built-in whose intra-node bandwidth factors are divided by
   SLOWDOWN from the rendezvous threshold on (the size of the effect in 1., not a fit).
   It is what a multi-pair bandwidth measurement at 8 or more busy cores (osu_mbw_mr,
   IMB Sendrecv/Exchange) would have to show before a calibration could set it.

Run: `.venv/bin/python benchmarks/bench_epyc_gap.py [--slowdown 1.5]` (under 2 min on 2
cores), or `python benchmarks/run_all.py epyc_gap`.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from bench_models_real import PLATFORM, POINTS, ingest
from bench_orfeo_epyc import ALGORITHMS, spec, summary_rows
from common import cli, run_campaign

INTRA_NODE = ("intra_socket", "inter_socket", "inter_package")
HOP_SIZES = (2, 1024, 16384, 65536, 262144)
HOP_NPROCS = (2, 4, 8, 32, 128, 256)
PROBE_SIZES = [8192, 16384, 32768, 65536, 131072, 262144]


def rows(folder: Path, work: Path, name: str) -> list[dict[str, str]]:
    out = work / f"{name}.csv"
    cli("export", folder, "-o", out)
    with out.open() as f:
        return list(csv.DictReader(f))


def chain_hops(real: list[dict[str, str]]) -> dict[tuple[int, int], float]:
    """(size, nprocs) -> µs per hop of the real one-segment chain (bcast pipeline)."""
    out = {}
    for r in real:
        if r["collective"] == "bcast" and r["algorithm"] == "pipeline" and r["avg_us"]:
            p, s = int(r["nprocs"]), int(r["size_bytes"])
            if p in HOP_NPROCS and s in HOP_SIZES:
                out[(s, p)] = float(r["avg_us"]) / ((1 + p * (p - 1) / 2) / p)
    return out


def slowed(work: Path, factor: float) -> Path:
    """The built-in with its intra-node bandwidth factors divided by `factor` from the
    rendezvous threshold on (the bytes of single copies; the ping-pong's 2-rank view)."""
    text = PLATFORM.read_text()
    found = re.search(r"^rendezvous_bytes = (\d+)", text, re.M)
    if found is None:
        raise SystemExit(f"{PLATFORM}: no rendezvous_bytes")
    start = int(found.group(1))
    out, level = [], ""
    for line in text.splitlines():
        head = re.match(r"\[levels\.(\w+)\]", line)
        level = head.group(1) if head else ("" if line.startswith("[") else level)
        if level in INTRA_NODE and line.startswith("bw_factor = "):
            table = json.loads(line.split("=", 1)[1])
            line = "bw_factor = " + json.dumps(
                [[s, v / factor if s >= start else v] for s, v in table])
        out.append(line)
    path = work / "slowed.toml"
    path.write_text("\n".join(out).replace('name = "orfeo-epyc"', 'name = "epyc-slowed"')
                    + "\n")
    return path


def probe_spec(platform: str) -> str:
    """bench_orfeo_epyc's spec at 4 ranks (one CCX) and the rendezvous sizes."""
    text = spec(platform)
    text = re.sub(r"^nprocs = .*$", "nprocs = [4]", text, flags=re.M)
    return re.sub(r"^sizes = .*$", f"sizes = {PROBE_SIZES}", text, flags=re.M)


def probe_ratio(real: list[dict[str, str]], sim: list[dict[str, str]]) -> float:
    """Median over the 4-rank points of simulated / real avg_us."""
    have = {(r["collective"], r["algorithm"], int(r["size_bytes"])): float(r["avg_us"])
            for r in real if r["nprocs"] == "4" and r["avg_us"]}
    return statistics.median(float(r["avg_us"]) / have[k] for r in sim
                             if (k := (r["collective"], r["algorithm"], int(r["size_bytes"])))
                             in have and r["avg_us"])


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--slowdown", type=float, default=1.5,
                    help="the bandwidth slowdown tried (default 1.5: a 4-rank chain hop)")
    ap.add_argument("--out", type=Path, help="keep the folders here (default: temporary)")
    args = ap.parse_args([] if argv is None else argv)  # run_all passes none
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        ingest(work)
        real = rows(work / "real", work, "real")
        hops = chain_hops(real)
        platform = slowed(work, args.slowdown)
        ratios = {}
        for name, plat in (("built-in", "orfeo-epyc"), ("slowed", str(platform))):
            run_campaign(probe_spec(plat), work / f"probe-{name}")
            ratios[name] = probe_ratio(real, rows(work / f"probe-{name}", work, name))
        run_campaign(spec(str(platform)), work / "sim")
        cli("model", "predict", "--platform", platform, "--openmpi", "4.1", *POINTS,
            "-o", work / "model")
        scored = {n: json.loads(cli("compare", work / "real", "--against", work / n,
                                    "--format", "json")) for n in ("sim", "model")}
    out = ["real chain (bcast pipeline, one segment): µs per hop, and its ratio to 2 ranks",
           "", "| size B | " + " | ".join(f"{p} ranks" for p in HOP_NPROCS) + " |",
           "|---|" + "---|" * len(HOP_NPROCS)]
    for s in HOP_SIZES:
        base = hops.get((s, 2))
        out.append(f"| {s} | " + " | ".join(
            f"{hops[(s, p)]:.2f} ({hops[(s, p)] / base:.2f}×)" if (s, p) in hops and base
            else "-" for p in HOP_NPROCS) + " |")
    out += ["", f"4-rank probe ({', '.join(ALGORITHMS)}, every algorithm, "
                f"{PROBE_SIZES[0]}-{PROBE_SIZES[-1]} B): median simulated / real "
                f"{ratios['built-in']:.2f} on orfeo-epyc, {ratios['slowed']:.2f} with the "
                f"slowdown {args.slowdown:g}", "",
            "| prediction | points | median / p95 % | <= 1 KiB | 1-64 KiB | >= 64 KiB | "
            "same best | selection penalty median / p95 % |", "|---|---|---|---|---|---|---|---|",
            *summary_rows(f"SimGrid, slowdown {args.slowdown:g}", scored["sim"]),
            *summary_rows(f"model predict, slowdown {args.slowdown:g}", scored["model"])]
    return "\n".join(out)

if __name__ == "__main__":
    print(main(sys.argv[1:]))
