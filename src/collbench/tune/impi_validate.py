"""`collbench tune validate --impi tuned.json -n N`: Intel MPI's default against the file.

Two arms, interleaved in random order per repetition as for Open MPI (tune/validate.py):
"default" runs Intel MPI's own tuning, "tuned" the same launch with I_MPI_TUNING=<file>.
The analysis is validate's own (compare's test, Holm over the switched points); a point is
"switched" where the file's rule for it names a preset other than 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from collbench.analyse.compare import RatioStat
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.plan import Launch, Point
from collbench.store import Store
from collbench.tune import campaign
from collbench.tune.impi import activation
from collbench.tune.impi_autotuner import AUTOTUNER
from collbench.tune.impi_autotuner import activation as autotuner_activation
from collbench.tune.impi_check import Reading, rule_for
from collbench.tune.validate import DEFAULT, TUNED, Validation, analyse, interleaved


def plan_launches(path: Path, nprocs_list: Sequence[int], sizes: Sequence[int],
                  collectives: Sequence[str], repetitions: int, seed: int, iterations: int,
                  timeout: float, autotuner: Path | None = None) -> list[Launch]:
    """`autotuner`: a dump of Intel's autotuner, measured as a third arm."""
    arms = {DEFAULT: [], TUNED: activation(path)}
    if autotuner is not None:
        arms[AUTOTUNER] = autotuner_activation(autotuner)

    def launch(arm: str, rep: int, nprocs: int, points: list[Point]) -> Launch:
        return campaign.launch(nprocs, points, (), "none", rep, timeout, env=arms[arm])

    return interleaved(list(arms), nprocs_list, collectives, sizes, repetitions, seed,
                       iterations, launch)


def collectives_of(reading: Reading, path: Path, wanted: Sequence[str]) -> list[str]:
    present = sorted({e.collective for e in reading.entries})
    colls = [c for c in present if not wanted or c in wanted]
    if not colls:
        raise UserError(f"{path}: no collective to validate: the file has "
                        f"{', '.join(present) or 'none'}")
    return colls


def validate(reading: Reading, path: Path, out: Path, nprocs_list: Sequence[int],
             sizes: Sequence[int], mpi: MpiInstall, *, repetitions: int, seed: int,
             collectives: Sequence[str] = (), iterations: int = 0, timeout: float = 600,
             confidence: float = 0.95, autotuner: Path | None = None) -> Validation:
    if mpi.implementation != "impi":
        raise UserError(f"tune validate --impi: --mpi is {mpi.implementation} "
                        f"{mpi.version}; valid: an Intel MPI (--mpi impi==VERSION)")
    if repetitions < 2:
        raise UserError(f"--repetitions {repetitions}: at least 2 are needed to test a "
                        "difference (6 or more to find one among noise, docs/statistics.md)")
    colls = collectives_of(reading, path, collectives)
    launches = plan_launches(path, nprocs_list, sizes, colls, repetitions, seed, iterations,
                             timeout, autotuner)
    spec = campaign.spec_text(f"Written by collbench tune validate --impi: default against "
                              f"I_MPI_TUNING={path.resolve()}", f"validate-{path.stem}",
                              launches, seed)
    _, summary = campaign.run(out, f"validate-{path.stem}", seed, launches, mpi, spec,
                              str(path))
    bad = {k: v for k, v in summary.points.items() if k != "ok"}
    if bad:
        raise UserError(f"{out}: not every point was measured ({bad}); see `collbench show "
                        f"{out}`; rerun the same command to retry")

    def switched(r: RatioStat) -> bool:
        p = r.point
        return bool(rule_for(reading.entries, p.collective, p.nprocs, p.size_bytes))

    return analyse(Store(out), None, confidence, switched)

