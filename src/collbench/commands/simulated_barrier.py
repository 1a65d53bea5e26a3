"""The simulated barrier behind `platform calibrate --load-barrier`: one SimGrid campaign
per simulation, barrier (Open MPI 4.1's tuned default, collbench's ports) at the given
process counts, `--map-by core`; the mean over ranks (avg_us) read back: osu_barrier's
min_us and avg_us are one period, this kernel's avg_us is it (platforms.load)."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench import points as door
from collbench.campaign import SpecSource
from collbench.catalog.mpi import MpiInstall
from collbench.commands.results_folder import check_platform, measure
from collbench.errors import UserError
from collbench.platforms.model import Cluster
from collbench.platforms.template import cluster_toml
from collbench.store import Store

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
        source = SpecSource.from_text(spec_text(sorted(counts)),
                                      f"simulated barrier on {cluster.name}")
        text = cluster_toml(cluster, exact=True)
        check_platform(folder, text, self.resume)
        with tempfile.TemporaryDirectory(prefix="collbench-barrier-") as tmp:
            platform = Path(tmp) / "platform.toml"
            platform.write_text(text)
            with open(os.devnull, "w") as quiet:
                measure(source, self.mpi, folder, self.resume, platform=str(platform),
                        progress=quiet)
        out: dict[int, float] = {}
        for r in door.read(Store(folder), collective="barrier"):
            if r["status"] != "ok" or r["avg_us"] is None:
                said = " ".join(str(r["error"] or "no error recorded").split())
                raise UserError(f"simulated barrier at {r['nprocs']} ranks failed: "
                                f"{said[-400:]} (campaign {folder})")
            out[int(r["nprocs"])] = float(r["avg_us"])
        if sorted(out) != sorted(counts):
            raise UserError(f"simulated barrier: {len(out)} of {len(counts)} process counts "
                            f"stored in {folder}; valid: a campaign of this calibration")
        return out
