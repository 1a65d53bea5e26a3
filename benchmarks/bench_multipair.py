"""The socket bandwidth found again from a multi-pair measurement (`platform calibrate
--multi-pair`), on simulated ground truths: each truth platform's ping-pongs and mbw_mr
(osu_mbw_mr's pairs, `--map-by core`, the senders filling one socket, then two) are
simulated, a description is calibrated from them (`--from` the truth with its port
removed, or a plain one), and the port it writes is compared with the truth's: the
relative error, the simulated aggregate against the "measured" one at the fitted count and
at the checked one, and the simulations and wall time the fit took.

Run: `.venv/bin/python benchmarks/bench_multipair.py` (about 1 min on 2 cores), or
`python benchmarks/run_all.py multipair`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from common import cli, query, run_campaign

TWO = """\
name = "{name}"
nodes = 1
sockets_per_node = 4
cores_per_socket = {cores}
[levels.intra_socket]
latency_us = 0.3
bandwidth_mbs = 10000.0
[levels.inter_socket]
latency_us = 0.6
bandwidth_mbs = 6000.0
[memory]
receiver_copies = {copies}
socket_bandwidth_mbs = {port}
send_queue = {queue}
"""

# name, cores per socket, port MB/s, receiver copies, send queue
CASES = [
    ("shared links", 4, 3000.0, "false", "false"),
    ("receiver copies + send queue", 4, 3000.0, "true", "true"),
    ("receiver copies + send queue", 8, 12000.0, "true", "true"),
]
SIZE = 4 << 20


def spec(platform: Path, cores: int) -> str:
    counts = [2, 2 * cores, 4 * cores]  # one socket's cores sending, then two sockets'
    return f"""
[campaign]
name = "truth"
[measure]
collectives = ["latency", "mbw_mr"]
sizes = [8, 65536, {SIZE}]
nprocs = {counts}
map_by = ["core", "socket"]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
[run.simgrid]
platform = "{platform}"
ompi_version = "4.1"
"""


def case(work: Path, name: str, cores: int, port: float, copies: str,
         queue: str) -> str:
    tag = f"c{cores}-{copies}-{queue}"
    truth = work / f"{tag}-truth.toml"
    truth.write_text(TWO.format(name="truth", cores=cores, port=port, copies=copies,
                                queue=queue))
    base = work / f"{tag}-base.toml"
    base.write_text(TWO.format(name="base", cores=cores, port=0.0, copies=copies,
                               queue=queue))
    measured = work / f"{tag}-measured"
    run_campaign(spec(truth, cores), measured)
    start = time.monotonic()
    sims = work / f"{tag}-sims"
    cli("platform", "calibrate", measured, "-o", work / f"{tag}-fit.toml", "--from", base,
        "--multi-pair", measured, "--simulations", sims)
    wall = time.monotonic() - start
    return row(f"4 x {cores} cores, {name}", port, work / f"{tag}-fit.toml", sims, wall)


EPYC_LOAD = (8, 16, 32, 64, 128)  # barrier counts within a node, as the recipe's


def epyc_specs(platform: Path) -> list[tuple[str, str]]:
    """The truth's ping-pongs (same CCX, next CCX, other node), mbw_mr with one CCX's and
    two CCXs' cores sending, and the barrier the load term is fitted to: one campaign each
    (name, spec)."""
    parts = [("pingpong", '["latency"]', '"1:4M"', "[2]", '["core", "socket", "node"]'),
             ("mbw", '["mbw_mr"]', f"[{SIZE}]", "[8, 16]", '["core"]'),
             ("barrier", '["barrier"]', "[0]", str(list(EPYC_LOAD)), '["core"]')]
    # the barrier as the calibration simulates it: Open MPI 4.1's tuned default
    return [(name, f"""
[campaign]
name = "truth-epyc-{name}"
[measure]
collectives = {colls}
sizes = {sizes}
nprocs = {counts}
map_by = {maps}
iterations = 2
warmup = 1
[measure.algorithms]
barrier = ["default"]
[run]
backend = "simgrid"
[run.simgrid]
platform = "{platform}"
ompi_version = "4.1"
""") for name, colls, sizes, counts, maps in parts]


def epyc_case(work: Path) -> str:
    """orfeo-epyc as the truth, with every term of its recipe (per-size overheads, load
    from the barrier, load bandwidth, receiver copies, send queue, rendezvous): a
    description calibrated from its simulated ping-pongs and barriers as the recipe does,
    the port from its mbw_mr."""
    from collbench.platforms.model import load_cluster

    truth, text, _ = load_cluster("orfeo-epyc")
    port = truth.memory.socket_bandwidth_mbs
    (work / "epyc-truth.toml").write_text(text)
    base = work / "epyc-base.toml"
    base.write_text(text.replace(f"socket_bandwidth_mbs = {port}", "socket_bandwidth_mbs = 0"))
    folders = {}
    for part, spec_text in epyc_specs(work / "epyc-truth.toml"):
        folders[part] = work / f"epyc-{part}"
        run_campaign(spec_text, folders[part])
    barrier = {int(n): float(us) for n, us in query(
        folders["barrier"], "SELECT nprocs, avg_us FROM measurements WHERE status = 'ok'")}
    sims = work / "epyc-sims"
    start = time.monotonic()
    calibrate = (
        "platform", "calibrate", folders["pingpong"], "-o", work / "epyc-fit.toml", "--from",
        base, "--rendezvous", "4097", "--overhead-share", "intra_socket=0.9", "--overhead-share",
        "inter_socket=0.9", "--sender-share", "0.9", "--receiver-copies", "--send-queue",
        "--load-bandwidth", *(a for n in EPYC_LOAD for a in ("--load-barrier",
                                                             f"{n}={barrier[n]:.6g}")),
        "--multi-pair", folders["mbw"], "--simulations", sims)
    name = "orfeo-epyc (2 x 32 CCXs x 4 cores), every recipe term"
    try:
        cli(*calibrate)
    except RuntimeError as e:  # the port does not limit these pairs: said, not fitted
        said = str(e).rsplit("error: ", 1)[-1].strip()
        return f"| {name} | {port:g} | refused | - | {said} | - | - |"
    wall = time.monotonic() - start
    return row(name, port, work / "epyc-fit.toml", sims, wall)


def row(name: str, port: float, fitted: Path, sims: Path, wall: float) -> str:
    fit = tomllib.loads(fitted.read_text())
    got = fit["memory"]["socket_bandwidth_mbs"]
    points = "; ".join(p.replace("x", " ranks x ", 1).replace("=", " B: ") + " MB/s"
                       for p in fit["calibration"]["multi_pair_mbs"])
    count = sum(1 for p in sims.iterdir() if p.name.startswith("multipair-"))
    return (f"| {name} | {port:g} | {got:g} | {100 * (got / port - 1):+.2f} % | {points} | "
            f"{count} | {wall:.0f} s |")


def main(argv: list[str] | None = None) -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="keep the folders here (default: temporary)")
    args = ap.parse_args([] if argv is None else argv)  # run_all passes none
    with tempfile.TemporaryDirectory() as tmp:
        work = args.out or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        rows = [case(work, *c) for c in CASES] + [epyc_case(work)]
    return "\n".join([
        "| ground truth (one node: sockets x cores) | port MB/s | fitted | error | mbw_mr "
        "measured / simulated (fitted count; the others checked) | multi-pair simulations | "
        "calibrate wall |",
        "|---|---|---|---|---|---|---|", *rows])


if __name__ == "__main__":
    print(main(sys.argv[1:]))
