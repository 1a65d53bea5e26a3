"""`collbench tune validate --impi FILE --autotuner`: collbench's tuning file against Intel's
own run-time autotuner, on the same points, speed-up and measurement cost side by side.

Intel's autotuner (I_MPI_TUNING_MODE=auto) tries the presets of each collective in the
running application, call after call, and with I_MPI_TUNING_BIN_DUMP writes what it chose
at MPI_Finalize; I_MPI_TUNING_BIN=<that file> makes a later run use it. Here the kernel is
that application: one launch over the validated points with the autotuner on (its wall
time is the autotuner's measurement cost; it runs under impitrace, which shows whether the
autotuner tried other presets: in 2021.18.1 at 2 ranks it ran the default's functions in
every call), then the A/B/C campaign of tune validate with a third arm, "autotuner", that
loads the dump. Its knobs (I_MPI_TUNING_AUTO_ITER_NUM,
I_MPI_TUNING_AUTO_WARMUP_ITER_NUM, I_MPI_TUNING_AUTO_SYNC, ...) are read from the
environment, as Intel MPI reads them. collbench's cost is the measurement time of the
campaign the file was tuned from (the sum of its launches' wall times), where it is named.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.analyse.columns import effect_text, point_column
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.impi import AUTOTUNE_BIN_VAR, AUTOTUNE_DUMP_VAR, AUTOTUNE_MODE_VAR
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import text_table
from collbench.tune import campaign
from collbench.tune.validate import DEFAULT, Validation

AUTOTUNER: Final = "autotuner"
DUMP_NAME: Final = "autotuner.bin"
MAX_WALL_S: Final = 1e9  # a launch's wall time above this is not believed


@dataclass(frozen=True)
class Cost:
    seconds: float | None  # None: not known (the tuning campaign was not named)
    launches: int
    what: str


@dataclass(frozen=True)
class Autotuned:
    dump: Path
    cost: Cost
    ran: dict[tuple[str, int], frozenset[str]]  # (collective, bytes) -> functions called


def wall_time(store: Store) -> tuple[float, int]:
    """The sum of the launches' wall times of a results folder, and how many there were."""
    total, count = 0.0, 0
    for rows in store.launch_files():
        meta = rows.with_name(rows.stem + ".meta.json")
        try:
            wall = float(json.loads(meta.read_text()).get("wall_s", 0.0))
        except (OSError, ValueError, AttributeError, TypeError):
            continue
        if math.isfinite(wall) and 0 <= wall <= MAX_WALL_S:
            total, count = total + wall, count + 1
    return total, count


def campaign_cost(folder: Path | None) -> Cost:
    if folder is None:
        return Cost(None, 0, "not known (name the campaign the file was tuned from with "
                             "--tuned-from)")
    from collbench.store import open_results

    seconds, launches = wall_time(open_results(folder))
    return Cost(seconds, launches, f"the measurement time of {folder}")


def run_autotuner(folder: Path, nprocs: int, sizes: Sequence[int],
                  collectives: Sequence[str], mpi: MpiInstall, iterations: int,
                  timeout: float) -> Autotuned:
    """One kernel launch over the points with Intel's autotuner on, in a folder of its own
    (run afresh each time), under impitrace: the dump it wrote, the launch's wall time and
    the algorithm functions its calls ran at each point (a tuner that tries presets runs
    several)."""
    from collbench.tune.impi_verify import WATCHED, Arm, build_library, traced_run

    folder.mkdir(parents=True, exist_ok=True)
    dump = (folder / DUMP_NAME).resolve()
    dump.unlink(missing_ok=True)
    points = [campaign.point(c, "default", 0, s, iterations, 1) for c in collectives
              for s in sizes if s >= COLLECTIVES[c].min_size
              and not (c == "reduce_scatter_block" and s < nprocs)]
    la = campaign.launch(nprocs, points, (), "none", 0, timeout,
                         env=[(AUTOTUNE_MODE_VAR, "auto"), (AUTOTUNE_DUMP_VAR, str(dump))])
    seen, failed = traced_run(mpi, build_library(mpi.mpicc), folder, Arm(AUTOTUNER, (la,)),
                              nprocs, WATCHED)
    if failed or not dump.is_file():
        raise UserError(f"{folder}: Intel's autotuner run did not write {dump.name}"
                        f"{': ' + failed if failed else ''}")
    seconds, launches = wall_time(Store(folder / f"np{nprocs}-{AUTOTUNER}"))
    return Autotuned(dump, Cost(seconds, launches, f"one launch with {AUTOTUNE_MODE_VAR}="
                                f"auto, {iterations} calls a point (traced by impitrace)"),
                     seen)


def activation(dump: Path) -> list[tuple[str, str]]:
    """What the autotuner's arm sets: the choices it dumped."""
    return [(AUTOTUNE_BIN_VAR, str(dump.resolve()))]


def render(tuned: Validation, auto: Validation, file_cost: Cost, autotuned: Autotuned) -> str:
    """Per size, and summed up: the file's arm and the autotuner's against the default."""
    from collbench.tune.impi_verify import short_names

    auto_cost = autotuned.cost
    value = point_column("median", "avg_us")
    theirs = {(r.collective, r.nprocs, r.size): r for r in auto.rows}
    rows = []
    for r in tuned.rows:
        a = theirs.get((r.collective, r.nprocs, r.size))
        rows.append({"collective": r.collective, "np": r.nprocs, "size": format_size(r.size),
                     f"default {value}": r.default_us, f"file {value}": r.tuned_us,
                     "file": r.effect, f"autotuner {value}": a.tuned_us if a else None,
                     "autotuner": a.effect if a else "not measured",
                     "autotuning ran": short_names(autotuned.ran.get(
                         (r.collective, r.size), frozenset())) or "-"})
    cols = list(rows[0]) if rows else []
    summary = []
    for label, v, cost in (("collbench's file", tuned, file_cost),
                           ("Intel's autotuner", auto, auto_cost)):
        g = v.geomean()
        summary.append({
            "arm": label,
            "speed-up vs default (geometric mean over sizes)": effect_text(
                g[0], g[1].low if g[1] else None, g[1].high if g[1] else None, DEFAULT)
            if g else "-",
            "measurement cost": ("-" if cost.seconds is None else
                                 f"{cost.seconds:.1f} s in {cost.launches} launch(es)"),
            "what was measured": cost.what})
    return "\n".join([
        f"# tune validate --autotuner: {tuned.repetitions} repetitions per arm, interleaved; "
        f"{value} = median over repetitions of avg_us; effects in `collbench compare`'s "
        f"words against the default (± reaches both ends of the {tuned.confidence:.0%} "
        f"interval); results: {tuned.store}", "", text_table(rows, cols), "",
        text_table(summary, list(summary[0])), ""])
