"""The simulated multi-pair bandwidth behind `platform calibrate --multi-pair`: one SimGrid
campaign per simulation (mbw_mr at the given process counts and sizes, `--map-by core`),
the aggregate bandwidth read back (platforms.multipair)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.catalog.mpi import MpiInstall
from collbench.commands.simulated_campaign import simulate
from collbench.errors import UserError
from collbench.platforms.model import Cluster
from collbench.platforms.multipair import Aggregate

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
