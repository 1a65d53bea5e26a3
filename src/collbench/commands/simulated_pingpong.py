"""The simulated ping-pong behind `platform calibrate`: one SimGrid campaign per simulation.

The kernel's `latency` operation (osu_latency's ping-pong) at 2 ranks per placement level
(`--map-by core|socket|node`), simulated on a cluster description exactly as `collbench
run --backend simgrid --platform FILE` would: a campaign whose spec is generated here and
whose platform is the description written out in full precision (what is simulated is
what calibration computed, not a rounding of it); its rows are read back. Simulated time is
deterministic, so two timed iterations say everything, and a resumed calibration computes
the same descriptions again and finds each simulation stored.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench import points as door
from collbench.campaign import SpecSource
from collbench.catalog.mpi import MpiInstall
from collbench.commands.results_folder import check_platform, measure
from collbench.errors import UserError
from collbench.platforms.model import Cluster
from collbench.platforms.placement import LEVEL_OF_MAPPING
from collbench.platforms.template import cluster_toml
from collbench.store import Store

MAPPING_OF_LEVEL: Final = {level: mapping for mapping, level in LEVEL_OF_MAPPING.items()}
ITERATIONS: Final = 2
TIMEOUT_S: Final = 300
CAMPAIGN: Final = "calibrate-pingpong"

Points = dict[int, float]  # size_bytes -> one-way latency (µs)


def spec_text(levels: Iterable[str], sizes: Iterable[int]) -> str:
    """The campaign: `latency` at 2 ranks, one launch per level's placement."""
    mappings = [MAPPING_OF_LEVEL[lv] for lv in levels]
    return "\n".join([
        "[campaign]", f"name = {json.dumps(CAMPAIGN)}", "[measure]",
        'collectives = ["latency"]', f"sizes = {json.dumps(sorted(set(sizes)))}",
        "nprocs = [2]", f"map_by = {json.dumps(mappings)}",
        f"iterations = {ITERATIONS}", "warmup = 1",
        "[run]", 'backend = "simgrid"', f"timeout = {TIMEOUT_S}", 'order = "sequential"',
    ]) + "\n"


def simulate_pingpong(cluster: Cluster, levels: Iterable[str], sizes: Iterable[int],
                      folder: Path, mpi: MpiInstall, resume: bool = False) -> dict[str, Points]:
    """One-way latency (µs) per level and size, as the simulation of `cluster` gives it; the
    campaign is kept in `folder` (with `resume`, one already there is continued)."""
    levels, sizes = list(levels), sorted(set(sizes))
    source = SpecSource.from_text(spec_text(levels, sizes),
                                  f"simulated ping-pong on {cluster.name}")
    text = cluster_toml(cluster, exact=True)
    check_platform(folder, text, resume)
    with tempfile.TemporaryDirectory(prefix="collbench-pingpong-") as tmp:
        platform = Path(tmp) / "platform.toml"  # the campaign keeps its own copy
        platform.write_text(text)
        with open(os.devnull, "w") as quiet:
            measure(source, mpi, folder, resume, platform=str(platform), progress=quiet)
    return read_latencies(folder, levels, sizes)


def read_latencies(folder: Path, levels: list[str], sizes: list[int]) -> dict[str, Points]:
    """Every level's simulated latency at every size from the campaign's rows; a failed
    point is one line with its stored error."""
    rows = [(r["mapping"], r["size_bytes"], r["status"], r["avg_us"], r["error"])
            for r in door.read(Store(folder), collective="latency")]
    out: dict[str, Points] = {lv: {} for lv in levels}
    for mapping, size, status, avg, error in rows:
        level = LEVEL_OF_MAPPING.get(mapping)
        if status != "ok" or avg is None:
            said = " ".join(str(error or "no error recorded").split())
            raise UserError(f"simulated ping-pong ({level}) failed at {size} B: "
                            f"{said[-400:]} (campaign {folder})")
        if level in out:
            out[level][int(size)] = float(avg)
    for level, points in out.items():
        if sorted(points) != sizes:
            raise UserError(f"simulated ping-pong ({level}): {len(points)} of {len(sizes)} "
                            f"sizes stored in {folder}; valid: a campaign of this "
                            "calibration (remove the folder or drop --resume)")
    return out


@dataclass
class Simulations:
    """The `simulate` callable of platforms.calibrate: each call a campaign of its own,
    numbered in call order under `root` (pingpong-0, pingpong-1, ...)."""

    root: Path
    mpi: MpiInstall
    resume: bool = False
    count: int = 0

    def __call__(self, cluster: Cluster, levels: list[str], sizes: list[int]
                 ) -> dict[str, Points]:
        folder = self.root / f"pingpong-{self.count}"
        self.count += 1
        return simulate_pingpong(cluster, levels, sizes, folder, self.mpi, self.resume)
