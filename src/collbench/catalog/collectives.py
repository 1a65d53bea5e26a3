"""The operations collbench measures, independent of any MPI implementation."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Kind(StrEnum):
    P2P = "p2p"
    SYNC = "sync"  # barrier: no payload
    ROOTED = "rooted"  # one root sends or receives
    ALL = "all"  # everybody sends and receives
    REDUCTION = "reduction"  # combines values with an MPI_Op


class RulesBytes(StrEnum):
    """How Open MPI's dynamic rules count 'message size' (coll_tuned_decision_dynamic.c)."""

    PER_RANK = "count*typesize"  # bcast, reduce, allreduce
    TIMES_P = "count*typesize*P"  # gather, scatter, allgather, alltoall, reduce_scatter_block
    SUM_COUNTS = "sum(counts)*typesize"  # allgatherv (OSU: equal counts of size per rank)
    WHOLE = "whole vector"  # reduce_scatter(_block): OSU's size is already the whole vector
    ZERO = "0"  # barrier, alltoallv


@dataclass(frozen=True)
class Collective:
    name: str
    kind: Kind
    ompi_rules_id: int | None  # COLLTYPE id in a coll/tuned rules file
    rules_bytes: RulesBytes
    min_size: int  # smallest meaningful message in bytes (OSU reduces MPI_CHAR)
    mpich_cvar: str | None  # MPIR_CVAR_<X>_INTRA_ALGORITHM
    blocking: str | None = None  # non-blocking collectives: the blocking counterpart

    @property
    def nonblocking(self) -> bool:
        return self.blocking is not None


def _c(
    name: str, kind: Kind, rid: int | None, rb: RulesBytes, min_size: int, mpich: bool = True
) -> Collective:
    cvar = f"MPIR_CVAR_{name.upper()}_INTRA_ALGORITHM" if mpich else None
    return Collective(name, kind, rid, rb, min_size, cvar)


def _i(blocking: Collective) -> Collective:
    """The non-blocking counterpart (OSU 7.4's osu_i<coll>): same kind, sizes and byte
    counting (libnbc reads no rules file, so rules_bytes only says how sizes compare),
    no coll/tuned rules id, MPICH's MPIR_CVAR_I<COLL>_INTRA_ALGORITHM."""
    name = f"i{blocking.name}"
    return Collective(name, blocking.kind, None, blocking.rules_bytes, blocking.min_size,
                      f"MPIR_CVAR_{name.upper()}_INTRA_ALGORITHM", blocking.name)


COLLECTIVES: Final[dict[str, Collective]] = {
    c.name: c
    for c in (
        _c("barrier", Kind.SYNC, 6, RulesBytes.ZERO, 0),
        _c("bcast", Kind.ROOTED, 7, RulesBytes.PER_RANK, 1),
        _c("gather", Kind.ROOTED, 9, RulesBytes.TIMES_P, 1),
        _c("gatherv", Kind.ROOTED, None, RulesBytes.SUM_COUNTS, 1),
        _c("scatter", Kind.ROOTED, 15, RulesBytes.TIMES_P, 1),
        _c("scatterv", Kind.ROOTED, None, RulesBytes.SUM_COUNTS, 1),
        _c("reduce", Kind.REDUCTION, 11, RulesBytes.PER_RANK, 1),
        _c("allreduce", Kind.REDUCTION, 2, RulesBytes.PER_RANK, 1),
        _c("allgather", Kind.ALL, 0, RulesBytes.TIMES_P, 1),
        _c("allgatherv", Kind.ALL, 1, RulesBytes.SUM_COUNTS, 1),
        _c("alltoall", Kind.ALL, 3, RulesBytes.TIMES_P, 1),
        _c("alltoallv", Kind.ALL, 4, RulesBytes.ZERO, 1),
        _c("reduce_scatter", Kind.REDUCTION, 12, RulesBytes.WHOLE, 1),
        _c("reduce_scatter_block", Kind.REDUCTION, 13, RulesBytes.WHOLE, 1),
        _c("latency", Kind.P2P, None, RulesBytes.ZERO, 0, mpich=False),
        _c("bw", Kind.P2P, None, RulesBytes.ZERO, 1, mpich=False),
        _c("mbw_mr", Kind.P2P, None, RulesBytes.ZERO, 1, mpich=False),
    )
}
# The 14 non-blocking collectives of OSU 7.4 (ibarrier ... ireduce_scatter_block).
COLLECTIVES.update({c.name: c for c in (_i(b) for b in tuple(COLLECTIVES.values())
                                         if b.kind is not Kind.P2P)})

BLOCKING: Final = tuple(n for n, c in COLLECTIVES.items()
                        if c.kind is not Kind.P2P and not c.nonblocking)
NONBLOCKING: Final = tuple(n for n, c in COLLECTIVES.items() if c.nonblocking)
POINT_TO_POINT: Final = tuple(n for n, c in COLLECTIVES.items() if c.kind is Kind.P2P)

# OSU defaults (osu_util.h): iterations/warm-up below and above LARGE_MESSAGE_SIZE.
OSU_LARGE_THRESHOLD: Final = 8192
OSU_COLL_ITERATIONS: Final = (1000, 100)  # (small, large)
OSU_COLL_WARMUP: Final = (100, 10)
OSU_LAT_ITERATIONS: Final = (10000, 1000)
OSU_LAT_WARMUP: Final = (100, 10)
OSU_BW_ITERATIONS: Final = (100, 20)
OSU_BW_WARMUP: Final = (10, 2)
OSU_BW_WINDOW: Final = 64


def osu_defaults(collective: str, size: int) -> tuple[int, int]:
    """(iterations, warmup) OSU would use for this operation and message size."""
    large = size > OSU_LARGE_THRESHOLD
    if collective == "latency":
        it, wu = OSU_LAT_ITERATIONS, OSU_LAT_WARMUP
    elif collective in ("bw", "mbw_mr"):
        it, wu = OSU_BW_ITERATIONS, OSU_BW_WARMUP
    else:
        it, wu = OSU_COLL_ITERATIONS, OSU_COLL_WARMUP
    return (it[1], wu[1]) if large else (it[0], wu[0])


def rules_bytes(collective: str, size_per_rank: int, nprocs: int) -> int:
    """Message size as an Open MPI rules file counts it, from OSU's bytes per rank."""
    rb = COLLECTIVES[collective].rules_bytes
    if rb is RulesBytes.PER_RANK:
        return size_per_rank
    if rb is RulesBytes.WHOLE:
        # OSU's reduce_scatter size is the whole vector: recvcounts are size/P (+ remainder),
        # so Open MPI's sum(counts)*typesize (or rcount*typesize*P) is the size itself.
        return size_per_rank - size_per_rank % nprocs if collective.endswith("_block") \
            else size_per_rank
    if rb in (RulesBytes.TIMES_P, RulesBytes.SUM_COUNTS):
        return size_per_rank * nprocs
    return 0
