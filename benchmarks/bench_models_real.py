"""`model predict` on a real cluster (issue 25): the per-algorithm models costed with the
SimGrid platform's own parameters, scored on ORFEO EPYC's published collectives with
collbench's commands, beside the ping-pong fit they replace and an ablation of the
platform's terms.

1. `collbench ingest` the real collectives and the ping-pongs (as bench_orfeo_epyc.py);
2. `collbench model predict --platform orfeo-epyc --openmpi 4.1` (the real runs' series)
   at bench_orfeo_epyc's points: bcast and scatter, 4 algorithms each, 8/32/128/256 ranks,
   8 sizes, `--map-by core`, 2 nodes × 128; the same on copies of the platform without its
   [memory] table, without its per-message overheads, without its load term, without its
   load bandwidth, without its send queue and without its package level (one package per node); and
   `model p2p` + `model predict FIT.p2p.toml` (the ping-pong fit, `--sockets 32
   --cores-per-socket 4`);
3. `collbench compare REAL --against MODEL --format json`: median / p95 |error| per size
   band, same-best share and the regret of the predicted choice.

Run: `.venv/bin/python benchmarks/bench_models_real.py` (about 10 min on 2 shared cores),
or through `run_all.py models_real`.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from bench_orfeo_epyc import (
    ALGORITHMS,
    DATA,
    NPROCS,
    REAL_COLUMNS,
    SIZES,
    recipe_ingests,
    summary_rows,
)
from common import ROOT, cli

PLATFORM = ROOT / "src" / "collbench" / "platforms" / "builtin" / "orfeo-epyc.toml"
POINTS = ("--collective", ",".join(ALGORITHMS), "--algorithms", "all", "--nprocs",
          ",".join(map(str, NPROCS)), "--ppn", "128", "--nodes", "2", "--map-by", "core",
          "--sizes", ",".join(map(str, SIZES)))


def ingest(work: Path) -> None:
    cli("ingest", DATA / "collectives.csv", "--where", "source_repo=eruoppolo/HPC_2023",
        "--where", "map_by=core", *REAL_COLUMNS, "--ppn", "128", "--mpi", "openmpi",
        "--mpi-version", "4.1.6", "-o", work / "real")
    for argv in recipe_ingests():
        cli(*[str(DATA / "pingpong.csv") if a.endswith("orfeo-epyc/pingpong.csv") else
              str(work / a.removeprefix("results/")) if a.startswith("results/epyc-") else a
              for a in argv])


def without(work: Path, name: str, drop: tuple[str, ...]) -> Path:
    """A copy of the built-in platform without the lines that set `drop`'s keys."""
    out = work / f"{name}.toml"
    out.write_text("\n".join(line for line in PLATFORM.read_text().splitlines()
                             if not line.startswith(drop)) + "\n")
    return out


def without_packages(work: Path) -> Path:
    """A copy of the built-in platform with one package per node (no inter_package level:
    messages between the two processors priced as inter_socket)."""
    out, keep, skipping = work / "no-package.toml", [], False
    for line in PLATFORM.read_text().splitlines():
        if line.startswith("["):
            skipping = line.strip() == "[levels.inter_package]"
        if not skipping and not line.startswith("sockets_per_package"):
            keep.append(line)
    out.write_text("\n".join(keep) + "\n")
    return out


def main() -> str:
    wall: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        t = time.monotonic()
        ingest(work)
        cli("model", "p2p", work / "epyc-pp", "-o", work / "epyc.p2p.toml")
        wall["ingest + fit"] = time.monotonic() - t
        fit = (str(work / "epyc.p2p.toml"), "--sockets", "32", "--cores-per-socket", "4")
        variants = {
            "ping-pong fit (`model p2p`), --openmpi 5.0 (before)": (*fit, "--openmpi", "5.0"),
            "ping-pong fit (`model p2p`), --openmpi 4.1": (*fit, "--openmpi", "4.1"),
            "platform without [memory] sharing": (
                "--platform", str(without(work, "no-memory", ("receiver_copies",
                                                            "socket_bandwidth_mbs",
                                                            "load_bandwidth",
                                                            "send_queue"))),
                "--openmpi", "4.1"),
            "platform without per-message overheads": (
                "--platform", str(without(work, "no-overheads", ("send_overhead_us",
                                                               "recv_overhead_us",
                                                               "overhead_per_size"))),
                "--openmpi", "4.1"),
            "platform without the load term": (
                "--platform", str(without(work, "no-load", ("load_latency_us",))),
                "--openmpi", "4.1"),
            "platform without the load bandwidth": (
                "--platform", str(without(work, "no-slowdown", ("load_bandwidth",))),
                "--openmpi", "4.1"),
            "platform without the send queue": (
                "--platform", str(without(work, "no-queue", ("send_queue",))),
                "--openmpi", "4.1"),
            "platform without the package level": (
                "--platform", str(without_packages(work)), "--openmpi", "4.1"),
            "`--platform orfeo-epyc` (every term)": ("--platform", "orfeo-epyc",
                                                     "--openmpi", "4.1"),
        }
        lines = ["| model predict | points | median / p95 % | <= 1 KiB | 1-64 KiB | >= 64 KiB "
                 "| same best | selection penalty median / p95 % |",
                 "|---|---|---|---|---|---|---|---|"]
        for i, (label, args) in enumerate(variants.items()):
            t = time.monotonic()
            cli("model", "predict", *args, *POINTS, "-o", work / f"model-{i}")
            wall[f"predict {i}"] = time.monotonic() - t
            scored = json.loads(cli("compare", work / "real", "--against",
                                    work / f"model-{i}", "--format", "json"))
            lines += summary_rows(label, scored)
    return ("## Models from the platform's parameters, on a real cluster (orfeo-epyc)\n\n"
            "Command: `.venv/bin/python benchmarks/bench_models_real.py`.\n\n"
            + "\n".join(lines) + "\n\nwall seconds: "
            + ", ".join(f"{k} {v:.0f}" for k, v in wall.items()) + "\n")


if __name__ == "__main__":
    print(main())
