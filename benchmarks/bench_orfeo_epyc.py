"""Accuracy on a real cluster (issue 25): predictions made from point-to-point data only,
scored on the published collective measurements of ORFEO EPYC (../shared/data/orfeo-epyc),
with collbench's own commands end to end:

1. `collbench ingest` the real collectives (tidy CSV, --column mapping) and the ping-pongs
   (the recipe of docs/simgrid.md, "How orfeo-epyc was made", read from the docs);
2. `collbench run --backend simgrid --platform orfeo-epyc` (the built-in calibrated from
   those ping-pongs) on a subset: bcast and scatter, every algorithm measured, 4 process
   counts, 8 sizes, `--map-by core`; again on copies without its send queue ([memory]
   send_queue) and without its load bandwidth ([memory] load_bandwidth): those terms'
   shares of the error;
3. `collbench model p2p` on the ping-pongs and `collbench model predict` at the same points
   (`--sockets 32 --cores-per-socket 4`: the platform's CCX-as-socket shape);
4. `collbench compare REAL --against SIM|MODEL --format json`: median and p95 |error| per
   algorithm and size band, same-winner share, selection penalty (the regret of the
   predicted choice). This script only tabulates what compare prints.

With `--ablation`, the SimGrid prediction again on platforms without each calibration
term (each written by `platform calibrate` from the same ping-pongs, the recipe's command
without the term): without the CCX level (one level for every pair of cores of a node: 2
nodes × 1 × 128 cores), without the per-message overheads (`--overhead-share`), without
either sharing term (`--receiver-copies`, `--socket-bandwidth`), and without the load term
(`--load-barrier`: the latency a message gains when every core of a node is busy, fitted to
the published barrier times).

Run: `.venv/bin/python benchmarks/bench_orfeo_epyc.py [--out DIR] [--ablation]` (3 minutes
on 2 cores; about 30 with --ablation).
"""

from __future__ import annotations

import argparse
import json
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, SHARED, cli, run_campaign

DATA = SHARED / "data" / "orfeo-epyc"
NPROCS = [8, 32, 128, 256]  # one CCX pair .. two full nodes
SIZES = [2, 16, 128, 1024, 4096, 32768, 65536, 262144]  # every size band twice or more
ALGORITHMS = {"bcast": ["default", "basic_linear", "pipeline", "binary_tree"],
              "scatter": ["default", "basic_linear", "binomial", "linear_nb"]}
REAL_COLUMNS = ["--column", "collective=collective", "--column", "algorithm=algorithm",
                "--column", "algorithm_id=algorithm_id", "--column", "nprocs=nprocs",
                "--column", "mapping=map_by", "--column", "size_bytes=size_bytes",
                "--column", "avg_us=avg_us", "--column", "min_us=min_us", "--column",
                "max_us=max_us"]


def spec(platform: str = "orfeo-epyc") -> str:
    algs = "\n".join(f"{c} = {json.dumps(a)}" for c, a in ALGORITHMS.items())
    return f"""
[campaign]
name = "orfeo-epyc-sim"
[measure]
collectives = {json.dumps(list(ALGORITHMS))}
sizes = {SIZES}
nprocs = {NPROCS}
map_by = ["core"]
iterations = 2
warmup = 1
[measure.algorithms]
{algs}
[run]
backend = "simgrid"
[run.simgrid]
platform = "{platform}"
ompi_version = "4.1"
"""


def recipe_ingests() -> list[list[str]]:
    """The ingest commands of docs/simgrid.md's orfeo-epyc recipe (../shared paths)."""
    text = (ROOT / "docs" / "simgrid.md").read_text()
    block = text.split("<!-- recipe: orfeo-epyc -->", 1)[1].split("```")[1]
    return [shlex.split(line)[1:] for line in block.splitlines()
            if line.startswith("collbench ingest ")]


def prepare(work: Path) -> dict[str, float]:
    """Every input and prediction in `work`; wall seconds per step."""
    wall: dict[str, float] = {}
    t = time.monotonic()
    cli("ingest", DATA / "collectives.csv", "--where", "source_repo=eruoppolo/HPC_2023",
        "--where", "map_by=core", *REAL_COLUMNS, "--ppn", "128", "--mpi", "openmpi",
        "--mpi-version", "4.1.6", "-o", work / "real")
    for argv in recipe_ingests():
        argv = [str(DATA / "pingpong.csv") if a.endswith("orfeo-epyc/pingpong.csv") else
                str(work / a.removeprefix("results/")) if a.startswith("results/epyc-") else a
                for a in argv]
        cli(*argv)
    wall["ingest"] = time.monotonic() - t
    wall["simgrid"] = run_campaign(spec(), work / "sim")
    # the built-in without its send queue: that term's share of the error
    builtin = ROOT / "src" / "collbench" / "platforms" / "builtin" / "orfeo-epyc.toml"
    no_queue = work / "no-send-queue.toml"
    no_queue.write_text("".join(line for line in builtin.read_text().splitlines(True)
                                if not line.startswith("send_queue")))
    wall["simgrid, no send queue"] = run_campaign(spec(str(no_queue)), work / "sim-no-queue")
    # and without its load bandwidth (the load term slowing a message's bytes too)
    steady = work / "no-load-bandwidth.toml"
    steady.write_text("".join(line for line in builtin.read_text().splitlines(True)
                              if not line.startswith("load_bandwidth")))
    wall["simgrid, no load bandwidth"] = run_campaign(spec(str(steady)), work / "sim-steady")
    t = time.monotonic()
    cli("model", "p2p", work / "epyc-pp", "-o", work / "epyc.p2p.toml")
    cli("model", "predict", work / "epyc.p2p.toml", "--collective", ",".join(ALGORITHMS),
        "--algorithms", "all", "--nprocs", ",".join(map(str, NPROCS)), "--ppn", "128",
        "--nodes", "2", "--map-by", "core", "--sockets", "32", "--cores-per-socket", "4",
        "--sizes", ",".join(map(str, SIZES)), "-o", work / "model")
    wall["model"] = time.monotonic() - t
    return wall


def _without(argv: list[str], *flags: str) -> list[str]:
    """`argv` without the options `flags` (and the value of those that take one)."""
    out, skip = [], False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        if a in flags:
            skip = i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        out.append(a)
    return out


def ablation(work: Path) -> dict[str, dict[str, Any]]:
    """compare --format json of SimGrid on each platform with terms left out, each written by
    `platform calibrate` from the same ping-pongs (the recipe's command without them)."""
    one_level = work / "one-level-pp"  # every intra-node series as one level: no CCX
    for argv in recipe_ingests():
        argv = [str(DATA / "pingpong.csv") if a.endswith("orfeo-epyc/pingpong.csv") else
                str(one_level) if a == "results/epyc-pp" else a for a in argv]
        if 'detail~"Same CCX"' in argv or "results/epyc-package" in argv:
            continue  # the CCX pair is the level left out (and the package level, later)
        argv = ["core" if a == "socket" and argv[i - 1] == "--mapping" else a
                for i, a in enumerate(argv)]
        cli(*argv)
    recipe = recipe_calibrate()[1:]  # after "platform": calibrate results/epyc-pp -o ...
    # the calibration terms of the recipe; the variants have no packages (the built-in row
    # is the one with them)
    options = _without(recipe[recipe.index("--from") + 2:], "--inter-package", "--send-queue")
    overheads = _without(options, "--receiver-copies", "--socket-bandwidth", "--load-barrier")
    variants = {
        "no CCX level, no overheads, no sharing": (one_level, ("--sockets", "1", "--cores",
                                                               "128"), []),
        "CCX level, no overheads, no sharing": (work / "epyc-pp", ("--sockets", "32",
                                                                   "--cores", "4"), []),
        "CCX level + overheads per size (before)": (work / "epyc-pp", ("--sockets", "32",
                                                                       "--cores", "4"),
                                                    overheads),
        "+ socket bandwidth, no receiver copies": (work / "epyc-pp", ("--sockets", "32",
                                                                      "--cores", "4"),
                                                   _without(options, "--receiver-copies",
                                                            "--load-barrier")),
        "+ receiver copies, no socket bandwidth": (work / "epyc-pp", ("--sockets", "32",
                                                                      "--cores", "4"),
                                                   _without(options, "--socket-bandwidth",
                                                            "--load-barrier")),
        "+ receiver copies + socket bandwidth (before)": (work / "epyc-pp",
                                                          ("--sockets", "32", "--cores", "4"),
                                                          _without(options, "--load-barrier")),
    }
    out = {}
    for i, (label, (pp_dir, shape, terms)) in enumerate(variants.items()):
        base, platform = work / f"shape-{i}.toml", work / f"platform-{i}.toml"
        cli("platform", "new", base, "--name", f"ablation-{i}", "--nodes", "2", *shape)
        cli("platform", "calibrate", pp_dir, "-o", platform, "--from", base, *terms)
        run_campaign(spec(str(platform)), work / f"sim-{i}")
        out[label] = json.loads(cli("compare", work / "real", "--against", work / f"sim-{i}",
                                    "--format", "json"))
    return out


def recipe_calibrate() -> list[str]:
    """The recipe's `platform calibrate` command (docs/simgrid.md), as arguments."""
    text = (ROOT / "docs" / "simgrid.md").read_text()
    block = text.split("<!-- recipe: orfeo-epyc -->", 1)[1].split("```")[1]
    line = next(x for x in block.splitlines() if x.startswith("collbench platform calibrate"))
    return shlex.split(line)[1:]


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def summary_rows(name: str, data: dict[str, Any]) -> list[str]:
    bands = {b["band"]: b for b in data["bands"] if not b["collective"]}
    sel = data["selection"]
    pen = sel["penalty_pct"] or {}
    same = sel["same_fraction"]
    cells = [name, str(data["overall"]["points"]),
             f"{_f(data['overall']['median_abs_pct'])} / {_f(data['overall']['p95_abs_pct'])}",
             *(f"{_f(b['median_abs_pct'])} / {_f(b['p95_abs_pct'])}" if b else "-"
               for b in (bands.get(k) for k in ("<= 1 KiB", "1-64 KiB", ">= 64 KiB"))),
             f"{same * 100:.1f} % of {sel['configurations']}" if same is not None else "-",
             f"{_f(pen.get('median_abs_pct'))} / {_f(pen.get('p95_abs_pct'))}"]
    return ["| " + " | ".join(cells) + " |"]


def algorithm_rows(name: str, data: dict[str, Any]) -> list[str]:
    bands: dict[tuple[str, str], dict[str, str]] = {}
    for b in data["bands"]:
        if b["collective"]:
            bands.setdefault((b["collective"], b["algorithm"]), {})[b["band"]] = \
                f"{_f(b['median_abs_pct'])} / {_f(b['p95_abs_pct'])}"
    return [f"| {name} | {a['collective']} | {a['algorithm']} | {a['points']} | "
            f"{_f(a['median_abs_pct'])} / {_f(a['p95_abs_pct'])} | {a['median_ratio']:.2f} | "
            + " | ".join(bands.get((a["collective"], a["algorithm"]), {}).get(k, "-")
                         for k in ("<= 1 KiB", "1-64 KiB", ">= 64 KiB")) + " |"
            for a in data["algorithms"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep the folders here (default: temporary)")
    ap.add_argument("--ablation", action="store_true",
                    help="also simulate on platforms without each calibration term")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        wall = prepare(work)
        scored = {name: json.loads(cli("compare", work / "real", "--against", work / name,
                                       "--format", "json"))
                  for name in ("sim", "sim-no-queue", "sim-steady", "model")}
        print(cli("compare", work / "real", "--against", work / "sim"))
        ablated = ablation(work) if args.ablation else {}
    print("| prediction | points | median / p95 % | <= 1 KiB | 1-64 KiB | >= 64 KiB | "
          "same best | selection penalty median / p95 % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, label in (("sim-no-queue", "SimGrid, orfeo-epyc without the send queue"),
                        ("sim-steady", "SimGrid, orfeo-epyc without the load bandwidth"),
                        ("sim", "SimGrid, orfeo-epyc"), ("model", "model predict (mpi)")):
        print("\n".join(summary_rows(label, scored[name])))
    print("\n| prediction | collective | algorithm | points | median / p95 % | median B/A | "
          "<= 1 KiB | 1-64 KiB | >= 64 KiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, label in (("sim", "SimGrid"), ("model", "model")):
        print("\n".join(algorithm_rows(label, scored[name])))
    if ablated:
        print("\n| SimGrid platform | points | median / p95 % | <= 1 KiB | 1-64 KiB | "
              ">= 64 KiB | same best | selection penalty median / p95 % |")
        print("|---|---|---|---|---|---|---|---|")
        for label, data in ablated.items():
            print("\n".join(summary_rows(label, data)))
        print("\n".join(summary_rows("+ load term (orfeo-epyc)", scored["sim"])))
        print("\nablation command: " + shlex.join(["collbench", *recipe_calibrate()]) +
              " (each row: this command without the terms it names)")
    print("\nwall seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in wall.items()))


if __name__ == "__main__":
    main()
