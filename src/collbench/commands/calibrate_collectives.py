"""`platform calibrate --collectives REAL`: choose the per-message overheads from measured
collectives (issue 12's optional calibration).

A ping-pong fixes each level's latency but not how much of it is CPU time per message
(LogGP o_s, o_r), which is what serialises a root's sends. Here a short list of candidate
overheads is tried: each is calibrated against the ping-pong as usual (so every candidate
reproduces it), the collectives measured in REAL are simulated on it (SimGrid, collbench's
ports, the same collectives, algorithms, sizes, process counts and placements), and the
candidate whose simulation is closest to REAL (median absolute error of `compare
--against`) is kept. Candidates: the --overheads file's values scaled by SCALES, or, without
one, FRACTIONS of each level's latency split evenly between sender and receiver.

Every simulation is a campaign kept under the command's folder (Folders): candidate-<i>/
holds that candidate's ping-pong simulations (pingpong-<k>) and its collectives. The
candidate's platform is given as --platform is (its [calibration] summary, which carries
the date, left out), so a resumed run checks it is the same description.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.analyse.against import against, read_points
from collbench.campaign import SpecSource
from collbench.catalog.mpi import MpiInstall
from collbench.commands.results_folder import check_platform, measure
from collbench.errors import UserError
from collbench.models.accuracy import Key
from collbench.platforms.calibrate import Calibration, Overheads, hockney
from collbench.platforms.template import cluster_toml
from collbench.store import Store

SCALES: Final = (0.0, 0.5, 1.0, 1.5, 2.0)
FRACTIONS: Final = (0.0, 0.2, 0.4, 0.6, 0.8)
PINGPONG: Final = ("latency", "bw")
MAX_POINTS: Final = 20_000  # simulated per candidate; more is a study, not a calibration


@dataclass(frozen=True)
class Trial:
    label: str
    overheads: dict[str, tuple[float, float]]
    median_abs_pct: float
    p95_abs_pct: float
    points: int


def candidates(measured: Mapping[str, Mapping[int, float]],
               given: Overheads) -> list[tuple[str, dict[str, tuple[float, float]]]]:
    """(label, overheads per level) to try."""
    if given:
        return [(f"{s:g} × --overheads", {lv: (o_s * s, o_r * s)
                                          for lv, (o_s, o_r) in given.items()})
                for s in SCALES]
    alphas = {lv: hockney(dict(pts))[0] for lv, pts in measured.items()}
    return [(f"{f:.0%} of latency", {lv: (f * a / 2, f * a / 2) for lv, a in alphas.items()})
            for f in FRACTIONS]


def collective_points(real: Path, cores: int) -> dict[Key, float]:
    """REAL's collective points a simulation of `cores` cores can reproduce."""
    points = {k: v for k, v in read_points(Store(real)).items()
              if k.collective not in PINGPONG and k.nprocs <= cores
              and k.mapping in ("core", "socket", "node") and " " not in k.algorithm}
    if not points:
        raise UserError(f"{real}: --collectives: no collective rows to fit on (at most "
                        f"{cores} processes, mapping core/socket/node); valid: a results "
                        "folder of measured collectives")
    if len(points) > MAX_POINTS:
        raise UserError(f"{real}: --collectives: {len(points)} points; valid: at most "
                        f"{MAX_POINTS} (narrow the campaign)")
    return points


def spec_for(points: Mapping[Key, float]) -> str:
    """A SimGrid campaign over the points' collectives, algorithms, sizes, counts, maps (the
    platform is given apart)."""
    algs: dict[str, set[str]] = {}
    for k in points:
        algs.setdefault(k.collective, set()).add(k.algorithm)
    lines = ["[campaign]", 'name = "calibrate-collectives"', "[measure]",
             f"collectives = {json.dumps(sorted(algs))}",
             f"sizes = {json.dumps(sorted({k.size_bytes for k in points}))}",
             f"nprocs = {json.dumps(sorted({k.nprocs for k in points}))}",
             f"map_by = {json.dumps(sorted({k.mapping for k in points}))}",
             "iterations = 2", "warmup = 1", "[measure.algorithms]"]
    lines += [f"{json.dumps(c)} = {json.dumps(sorted(a))}" for c, a in sorted(algs.items())]
    lines += ["[run]", 'backend = "simgrid"']
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Folders:
    """Where the candidates' campaigns go: root/candidate-<i>/ (ping-pongs, collectives)."""

    root: Path
    mpi: MpiInstall
    resume: bool = False

    def candidate(self, i: int) -> Path:
        return self.root / f"candidate-{i}"


def simulate_collectives(points: Mapping[Key, float], result: Calibration, label: str,
                         folder: Path, where: Folders) -> dict[Key, float]:
    """REAL's points simulated on the candidate's platform, as a campaign in `folder`."""
    source = SpecSource.from_text(spec_for(points),
                                  f"platform calibrate --collectives ({label})")
    # without the [calibration] summary: it holds the date, and a resume compares texts
    text = cluster_toml(result.cluster.model_copy(update={"calibration": {}}))
    check_platform(folder, text, where.resume)
    with tempfile.TemporaryDirectory(prefix="collbench-calibrate-") as tmp, \
            open(os.devnull, "w") as quiet:
        platform = Path(tmp) / "platform.toml"  # the campaign keeps its own copy
        platform.write_text(text)
        measure(source, where.mpi, folder, where.resume, platform=str(platform),
                progress=quiet)
    return read_points(Store(folder))


def fit(real: Path, measured: Mapping[str, Mapping[int, float]], given: Overheads,
        calibrate_with: Callable[[Overheads, Path], Calibration], where: Folders
        ) -> tuple[Calibration, list[Trial], int]:
    """The calibration whose simulated collectives are closest to REAL's; every trial; the
    index of the chosen one. `calibrate_with(overheads, folder)` keeps its ping-pong
    simulations in `folder`."""
    trials: list[Trial] = []
    results: list[Calibration] = []
    for i, (label, over) in enumerate(candidates(measured, given)):
        result = calibrate_with(over, where.candidate(i))
        real_points = collective_points(real, result.cluster.cores)
        sim = simulate_collectives(real_points, result, label,
                                   where.candidate(i) / "collectives", where)
        err = against(real_points, sim, str(real), label).overall
        used = {lv: (lv_.send_overhead_us, lv_.recv_overhead_us)
                for lv in measured if (lv_ := result.cluster.level(lv)) is not None}
        trials.append(Trial(label, used, err.median_abs_pct, err.p95_abs_pct, err.points))
        results.append(result)
    best = min(range(len(trials)), key=lambda i: (trials[i].median_abs_pct, i))
    chosen = results[best]
    chosen.notes.append(
        f"overheads chosen from the collectives in {real}: {trials[best].label} "
        f"(median error {trials[best].median_abs_pct:.1f} % over {trials[best].points} "
        "points; every candidate in the table above)")
    summary = dict(chosen.cluster.calibration)
    summary["collectives"] = str(real)
    summary["collectives_choice"] = trials[best].label
    summary["collectives_median_error_pct"] = round(trials[best].median_abs_pct, 2)
    summary["collectives_p95_error_pct"] = round(trials[best].p95_abs_pct, 2)
    chosen.cluster = chosen.cluster.model_copy(update={"calibration": summary})
    return chosen, trials, best
