"""`platform calibrate --multi-pair`: the measured aggregates read and checked against the
description's shape before any simulation, and the port fitted to them; each simulation a
SimGrid campaign (mbw_mr at the given process counts and sizes, `--map-by core`), the
aggregate bandwidth read back (platforms.multipair)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.catalog.mpi import MpiInstall, find_mpi
from collbench.commands.simulated_campaign import simulate
from collbench.errors import UserError
from collbench.platforms.model import Cluster
from collbench.platforms.multipair import Aggregate, fit_socket, usable

TIMEOUT_S: Final = 600


def spec_text(counts: list[int], sizes: list[int]) -> str:
    return "\n".join([
        "[campaign]", 'name = "calibrate-multi-pair"', "[measure]",
        'collectives = ["mbw_mr"]', f"sizes = {json.dumps(sizes)}",
        f"nprocs = {json.dumps(counts)}", 'map_by = ["core"]', "iterations = 2",
        "warmup = 1", "[run]", 'backend = "simgrid"', f"timeout = {TIMEOUT_S}",
        'order = "sequential"']) + "\n"


@dataclass
class MultiPairSimulations:
    """platforms.multipair's `simulate`: each call a campaign under `root` (multipair-0,
    ...); a campaign measures every size at every count, the points asked for are read."""

    root: Path
    mpi: MpiInstall
    resume: bool = False
    count: int = 0

    def __call__(self, cluster: Cluster, wanted: list[tuple[int, int]]) -> Aggregate:
        folder = self.root / f"multipair-{self.count}"
        self.count += 1
        counts = sorted({n for n, _ in wanted})
        sizes = sorted({s for _, s in wanted})
        rows = simulate(folder, cluster, spec_text(counts, sizes), "mbw_mr", self.mpi,
                        self.resume)
        got = {(int(r["nprocs"]), int(r["size_bytes"])): float(r["bandwidth_mbs"])
               for r in rows if r["collective"] == "mbw_mr" and r["bandwidth_mbs"]}
        missing = [p for p in wanted if p not in got]
        if missing:
            raise UserError(f"simulated mbw_mr: {len(missing)} of {len(wanted)} points not "
                            f"stored in {folder}; valid: a campaign of this calibration")
        return {p: got[p] for p in wanted}


def measured_pairs(args: argparse.Namespace, base: Cluster,
                   notes: list[str]) -> dict[tuple[int, int], float] | None:
    """--multi-pair's measured aggregates (checked against the description's shape)."""
    if args.multi_pair is None:
        return None
    from collbench.analyse.modeldata import multipair_medians

    if args.socket_bandwidth is not None:
        raise UserError("--multi-pair: not with --socket-bandwidth; valid: one source of the "
                        "socket bandwidth")
    if not args.multi_pair.is_dir():
        raise UserError(f"--multi-pair: {args.multi_pair}: not a results folder; valid: a "
                        "folder of mbw_mr rows")
    found, said = multipair_medians(args.multi_pair)
    usable(found, base, f"--multi-pair: {args.multi_pair}")
    notes += said
    return found


def fitted_port(args: argparse.Namespace, cluster: Cluster,
                found: dict[tuple[int, int], float], root: Path,
                notes: list[str]) -> Cluster:
    """`cluster` with the socket bandwidth fitted to --multi-pair's aggregate."""
    fit = fit_socket(cluster, found, MultiPairSimulations(root, find_mpi(), args.resume),
                     f"--multi-pair: {args.multi_pair}")
    notes.append(fit.note)
    return fit.cluster.model_copy(update={"calibration": {
        **fit.cluster.calibration, "multi_pair": str(args.multi_pair),
        "multi_pair_mbs": [f"{n}x{s}={fit.measured[n, s]:.6g}/{fit.simulated[n, s]:.6g}"
                           for n, s in fit.measured]}})
