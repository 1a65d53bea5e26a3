"""The simulated barrier behind `platform calibrate --load-barrier`: one SimGrid campaign
per simulation, barrier (Open MPI 4.1's tuned default, collbench's ports) at the given
process counts, `--map-by core`; the mean over ranks (avg_us) read back: osu_barrier's
min_us and avg_us are one period, this kernel's avg_us is it (platforms.load)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.catalog.mpi import MpiInstall
from collbench.commands.simulated_campaign import simulate
from collbench.errors import UserError
from collbench.platforms.model import Cluster

OMPI_VERSION: Final = "4.1"
TIMEOUT_S: Final = 600


def spec_text(counts: list[int]) -> str:
    return "\n".join([
        "[campaign]", 'name = "calibrate-barrier"', "[measure]",
        'collectives = ["barrier"]', "sizes = [0]", f"nprocs = {json.dumps(counts)}",
        'map_by = ["core"]', "iterations = 2", "warmup = 1",
        "[measure.algorithms]", 'barrier = ["default"]',
        "[run]", 'backend = "simgrid"', f"timeout = {TIMEOUT_S}", 'order = "sequential"',
        "[run.simgrid]", f'ompi_version = "{OMPI_VERSION}"']) + "\n"


@dataclass
class BarrierSimulations:
    """platforms.load's `simulate`: each call a campaign under `root` (barrier-0, ...)."""

    root: Path
    mpi: MpiInstall
    resume: bool = False
    count: int = 0

    def __call__(self, cluster: Cluster, counts: list[int]) -> dict[int, float]:
        folder = self.root / f"barrier-{self.count}"
        self.count += 1
        rows = simulate(folder, cluster, spec_text(sorted(counts)), "barrier", self.mpi,
                        self.resume)
        out = {int(r["nprocs"]): float(r["avg_us"]) for r in rows
               if r["collective"] == "barrier" and r["avg_us"] is not None}
        if sorted(out) != sorted(counts):
            raise UserError(f"simulated barrier: {len(out)} of {len(counts)} process counts "
                            f"stored in {folder}; valid: a campaign of this calibration")
        return out
