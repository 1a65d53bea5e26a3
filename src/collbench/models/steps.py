"""The building blocks of algorithm schedules (models/schedules.py): steps, parameters, the
per-rank program builder and the algorithm names per collective."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from collbench.errors import UserError, did_you_mean

ALGORITHMS: Final[dict[str, tuple[str, ...]]] = {
    "bcast": ("basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree",
              "binomial", "knomial", "scatter_allgather", "scatter_allgather_ring"),
    "gather": ("basic_linear", "binomial", "linear_sync"),
    "scatter": ("basic_linear", "binomial", "linear_nb"),
    "reduce": ("linear", "chain", "pipeline", "binary", "binomial", "in-order_binary",
               "rabenseifner"),
    "allreduce": ("basic_linear", "nonoverlapping", "recursive_doubling", "ring",
                  "segmented_ring", "rabenseifner"),
    "allgather": ("linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc",
                  "sparbit"),
    "alltoall": ("linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"),
    "barrier": ("linear", "double_ring", "recursive_doubling", "bruck", "two_proc", "tree"),
}
DEFAULT_CHAIN_FANOUT: Final = 4
DEFAULT_KNOMIAL_RADIX: Final = 4
# Algorithms that call the communicator's current (decision-chosen) reduce/bcast/gather:
# Open MPI uses its fixed decision rules there; we use these unless told otherwise.
DEFAULT_INNER: Final = {"reduce": "binomial", "bcast": "binomial", "gather": "binomial"}


@dataclass(frozen=True)
class Step:
    """Sends (dst, bytes) leave in order; receives (src, reduce?) complete in arrival order.
    `sync`: the sends are synchronous (MPI_Ssend): the step waits until they are received,
    whatever their size. `posts`: sources whose next receive is posted now and completed
    by a later step's `recvs` (FIFO per source); a transfer can start once its receive
    is posted (models.fluid; algorithms.simulate costs it where it is waited for)."""

    sends: tuple[tuple[int, int], ...] = ()
    recvs: tuple[tuple[int, bool], ...] = ()
    compute: int = 0  # bytes of local reduction after the step's messages
    sync: bool = False
    posts: tuple[int, ...] = ()  # receives posted now (irecv), waited for by later steps


@dataclass
class Params:
    """Algorithm parameters as Open MPI's forced-algorithm MCA variables set them."""

    segsize: int = 0
    fanout: int = DEFAULT_CHAIN_FANOUT
    radix: int = DEFAULT_KNOMIAL_RADIX
    dtype_size: int = 1
    root: int = 0
    max_requests: int = 0
    inner: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_INNER))


Program = list[list[Step]]


class Builder:
    """Builder of per-rank programs."""

    def __init__(self, p: int) -> None:
        self.p = p
        self.progs: Program = [[] for _ in range(p)]

    def step(self, r: int, sends: Sequence[tuple[int, int]] = (),
             recvs: Sequence[tuple[int, bool]] = (), compute: int = 0,
             sync: bool = False, posts: Sequence[int] = ()) -> None:
        sends = tuple((d, b) for d, b in sends if d != r)
        recvs = tuple((s, red) for s, red in recvs if s != r)
        ahead = tuple(s for s in posts if s != r)
        if sends or recvs or compute or ahead:
            self.progs[r].append(Step(sends, recvs, compute, sync and bool(sends), ahead))

    def send(self, r: int, dst: int, nbytes: int, sync: bool = False) -> None:
        self.step(r, sends=[(dst, nbytes)], sync=sync)

    def recv(self, r: int, src: int, reduce: bool = False) -> None:
        self.step(r, recvs=[(src, reduce)])

    def sendrecv(self, r: int, dst: int, nbytes: int, src: int, reduce: bool = False) -> None:
        self.step(r, sends=[(dst, nbytes)], recvs=[(src, reduce)])




def need_two(p: int, coll: str, alg: str) -> None:
    if p != 2:
        raise UserError(f"{coll}: algorithm {alg}: nprocs {p} is not valid; valid: 2 (Open "
                        "MPI returns MPI_ERR_UNSUPPORTED_OPERATION otherwise)")


def check(alg: str, coll: str, what: str = "algorithm") -> None:
    if coll not in ALGORITHMS:
        raise UserError(f"collective: {coll!r} is not valid; valid: {', '.join(ALGORITHMS)}"
                        f"{did_you_mean(coll, ALGORITHMS)}")
    if alg not in ALGORITHMS[coll]:
        raise UserError(f"{coll}: {what} {alg!r} is not valid; valid: "
                        f"{', '.join(ALGORITHMS[coll])}{did_you_mean(alg, ALGORITHMS[coll])}")
