"""Intel MPI's default decisions, by trace: what `diff-mpi` compares for two Intel MPIs.

Intel MPI keeps its defaults in compressed binary tuning files (etc/tuning_*.dat) whose
format is not documented, so they are not read: the kernel runs each collective at each
size once per process count, a few calls a point, under the impitrace library
(tune/impi_verify.py), and the default of a point is the set of algorithm functions its
calls ran (e.g. `Bcast_intra_binomial`). It is a run, on this machine (one node), not a
table: its decisions are the ones Intel MPI takes here.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from collbench.catalog.collectives import COLLECTIVES, RulesBytes
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.tune import campaign
from collbench.tune.impi_verify import (
    TRACED,
    WATCHED,
    Arm,
    build_library,
    short_names,
    traced_run,
)

NONE = "(no traced function)"  # the call ran none of the functions impitrace watches
__all__ = ["NONE", "TRACED", "TracedDefaults"]


class TracedDefaults:
    """decide(collective, nprocs, size) for one Intel MPI, traced once per process count
    over the collectives and sizes given; a size not traced is '' (unknown)."""

    def __init__(self, mpi: MpiInstall, collectives: Sequence[str], sizes: Sequence[int],
                 timeout: float = 600) -> None:
        self.mpi, self.timeout = mpi, timeout
        self.colls = [c for c in collectives if c in TRACED and c in COLLECTIVES]
        self.sizes = sorted(set(sizes))
        self._seen: dict[int, dict[tuple[str, int], str]] = {}

    def collectives(self) -> list[str]:
        return list(self.colls)

    def decide(self, collective: str, nprocs: int, size: int) -> str:
        if nprocs not in self._seen:
            self._seen[nprocs] = self._trace(nprocs)
        return self._seen[nprocs].get((collective, _sized(collective, size)), "")

    def _trace(self, nprocs: int) -> dict[tuple[str, int], str]:
        points = [campaign.point(c, "default", None, s, 3, 1) for c in self.colls
                  for s in sorted({_sized(c, x) for x in self.sizes})
                  if s >= COLLECTIVES[c].min_size
                  and not (c == "reduce_scatter_block" and s < nprocs)]
        la = campaign.launch(nprocs, points, (), "none", 0, self.timeout)
        library = build_library(self.mpi.mpicc)
        work = Path(tempfile.mkdtemp(prefix="collbench-impi-defaults-"))
        try:
            seen, failed = traced_run(self.mpi, library, work, Arm("default", (la,)), nprocs,
                                      WATCHED)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        if failed:
            raise UserError(f"diff-mpi: the traced run of {self.mpi.implementation} "
                            f"{self.mpi.version} at np={nprocs} failed: {failed}")
        out: dict[tuple[str, int], str] = {}
        for coll in self.colls:
            sizes = sorted(p.size_bytes for p in points if p.collective == coll)
            got = sorted(b for c, b in seen if c == coll)
            if not set(sizes) & set(got) and len(got) == len(sizes):
                # bytes (count x type size) that are not the kernel's size: pair in order
                pairs = dict(zip(sizes, got, strict=True))
            else:
                pairs = {s: s for s in sizes}
            for size in sizes:
                fns = seen.get((coll, pairs[size]))
                out[(coll, size)] = short_names(fns) if fns else NONE
        if not any(out.values()):  # an empty table would say that nothing changed
            raise UserError(f"diff-mpi: impitrace saw no algorithm function of "
                            f"{self.mpi.implementation} {self.mpi.version} at np={nprocs} (a "
                            "libmpi without its symbol table?); valid: an Intel MPI 2021 "
                            "whose libmpi keeps its symbols, as the PyPI wheels do")
        return out


def _sized(collective: str, size: int) -> int:
    """A collective that carries no data (barrier) runs at size 0, whatever size is asked."""
    return 0 if COLLECTIVES[collective].rules_bytes is RulesBytes.ZERO else size
