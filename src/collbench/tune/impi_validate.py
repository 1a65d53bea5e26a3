"""`collbench tune validate --impi tuned.json -n N`: Intel MPI's default against the file.

Two arms, interleaved in random order per repetition as for Open MPI (tune/validate.py):
"default" runs Intel MPI's own tuning, "tuned" the same launch with I_MPI_TUNING=<file>.
The analysis is validate's own (compare's test, Holm over the switched points); a point is
"switched" where the file's rule for it names a preset other than 0.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from collbench.analyse.compare import RatioStat
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.plan import Launch
from collbench.store import Store
from collbench.tune import campaign
from collbench.tune.impi import activation
from collbench.tune.impi_check import Entry, Reading
from collbench.tune.validate import DEFAULT, TUNED, Validation, analyse


def rule_for(entries: Sequence[Entry], collective: str, nprocs: int, size: int) -> int | None:
    """The preset the file gives this call (Intel's lookup on one node: ppn = nprocs), None
    where it has no rule for the collective. Entries are in file order."""
    mine = [e for e in entries if e.collective == collective]
    for level, value in (("ppn", nprocs), ("comm_size", nprocs), ("msg_size", size)):
        keys = list(dict.fromkeys(getattr(e, level) for e in mine))
        if not keys:
            return None
        hit = next((k for k in keys if k == -1 or value <= k), keys[-1])
        mine = [e for e in mine if getattr(e, level) == hit]
    return mine[0].preset if mine else None


def plan_launches(path: Path, nprocs_list: Sequence[int], sizes: Sequence[int],
                  collectives: Sequence[str], repetitions: int, seed: int, iterations: int,
                  timeout: float) -> list[Launch]:
    rng = random.Random(seed)
    arms = {DEFAULT: [], TUNED: activation(path)}
    launches = []
    for rep in range(repetitions):
        for nprocs in nprocs_list:
            order = list(arms)
            rng.shuffle(order)
            blocks = list(collectives)
            rng.shuffle(blocks)
            for arm in order:
                points = [campaign.point(c, arm, 0, s, iterations,
                                         max(1, iterations // 10) if iterations else 0)
                          for c in blocks for s in sizes if s >= COLLECTIVES[c].min_size]
                launches.append(campaign.launch(nprocs, points, (), "none", rep, timeout,
                                                env=arms[arm]))
    return launches


def validate(reading: Reading, path: Path, out: Path, nprocs_list: Sequence[int],
             sizes: Sequence[int], mpi: MpiInstall, *, repetitions: int, seed: int,
             collectives: Sequence[str] = (), iterations: int = 0, timeout: float = 600,
             confidence: float = 0.95) -> Validation:
    if mpi.implementation != "impi":
        raise UserError(f"tune validate --impi: --mpi is {mpi.implementation} "
                        f"{mpi.version}; valid: an Intel MPI (--mpi impi==VERSION)")
    if repetitions < 2:
        raise UserError(f"--repetitions {repetitions}: at least 2 are needed to test a "
                        "difference (6 or more to find one among noise, docs/statistics.md)")
    present = sorted({e.collective for e in reading.entries})
    colls = [c for c in present if not collectives or c in collectives]
    if not colls:
        raise UserError(f"{path}: no collective to validate: the file has "
                        f"{', '.join(present) or 'none'}")
    launches = plan_launches(path, nprocs_list, sizes, colls, repetitions, seed, iterations,
                             timeout)
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

