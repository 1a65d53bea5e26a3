"""What each Open MPI 5.0 coll/tuned algorithm sends: per-rank programs of point-to-point steps.

Derived from the structure of Open MPI's `ompi/mca/coll/base` algorithms (v5.0.x): which
rank sends how many bytes to which rank, in which order, and what each rank waits for. No
data is moved; only message sizes and dependencies are kept.

A program is, per rank, a list of `Step`s executed in order. A step posts its sends (they
leave one after another on the rank's send port) and its receives (completed in arrival
order on the rank's receive port), and ends when all of them are done; the next step starts
then. A blocking MPI call is a step of its own; a group of isend/irecv followed by a waitall
is one step. Receives match sends in FIFO order per (source, destination) pair, as MPI's
non-overtaking rule does for one tag. A receive flagged `reduce` is followed by a local
reduction of the received bytes; `compute` adds reduction work not tied to a message.

Sizes are "bytes per rank as OSU counts them" (osu_* -m argument): the buffer of bcast,
reduce and allreduce; each rank's block for gather, scatter and allgather; each pair's block
for alltoall. Barrier ignores the size. `dtype_size` (OSU's default MPI_CHAR: 1) matters where
Open MPI counts elements (segments, block splits, fallbacks when count < P).

Forced algorithms are unsegmented unless `segsize` (bytes) is given, as in Open MPI; chain
fanout and knomial radix default to 4. Open MPI's own fallbacks are reproduced (e.g.
scatter_allgather → basic_linear when count < P; recursive_doubling allgather → bruck when P
is not a power of two; segmented_ring → ring when the segment would not split the buffer).
"""

from __future__ import annotations

from collbench.errors import UserError
from collbench.models.sched_all import _allgather, _allreduce, _alltoall, _barrier, _reduce
from collbench.models.sched_rooted import _bcast, _gather, _scatter
from collbench.models.steps import (
    ALGORITHMS,
    DEFAULT_CHAIN_FANOUT,
    DEFAULT_INNER,
    DEFAULT_KNOMIAL_RADIX,
    Builder,
    Params,
    Program,
    Step,
    check,
)
from collbench.models.trees import (
    block_counts,
    parents,
    seg_count,
    segments,
    tree_binomial,
    tree_chain,
    tree_in_order_binary,
    tree_in_order_binomial,
    tree_kary,
    tree_knomial,
)

__all__ = ["ALGORITHMS", "DEFAULT_CHAIN_FANOUT", "DEFAULT_INNER", "DEFAULT_KNOMIAL_RADIX",
           "Params", "Program", "Step", "block_counts", "messages", "parents", "program",
           "seg_count", "segments", "tree_binomial", "tree_chain", "tree_in_order_binary",
           "tree_in_order_binomial", "tree_kary", "tree_knomial"]


def program(collective: str, algorithm: str, nprocs: int, size: int,
            params: Params | None = None) -> Program:
    """Per-rank programs of `algorithm` for `collective` on nprocs ranks, `size` bytes as
    OSU counts them."""
    check(algorithm, collective)
    pr = params or Params()
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise UserError(f"{collective}: nprocs {nprocs!r} is not valid; valid: an integer >= 1")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise UserError(f"{collective}: size {size!r} is not valid; valid: bytes >= 0")
    if not 0 <= pr.root < nprocs:
        raise UserError(f"{collective}: root {pr.root} is not valid; valid: 0-{nprocs - 1}")
    for name, low in (("segsize", 0), ("fanout", 1), ("radix", 2), ("dtype_size", 1),
                      ("max_requests", 0)):
        value = getattr(pr, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UserError(f"{collective}: {name} {value!r} is not valid; valid: an "
                            f"integer >= {low}")
    b = Builder(nprocs)
    if nprocs == 1:
        return b.progs
    if collective == "bcast":
        _bcast(b, algorithm, size, pr)
    elif collective == "gather":
        _gather(b, algorithm, size, pr)
    elif collective == "scatter":
        _scatter(b, algorithm, size, pr)
    elif collective == "reduce":
        _reduce(b, algorithm, size, pr)
    elif collective == "allreduce":
        _allreduce(b, algorithm, size, pr)
    elif collective == "allgather":
        _allgather(b, algorithm, size, pr)
    elif collective == "alltoall":
        _alltoall(b, algorithm, size, pr)
    else:
        _barrier(b, algorithm, pr)
    return b.progs


def messages(progs: Program) -> list[tuple[int, int, int]]:
    """Every point-to-point message (src, dst, bytes) of a program, in program order."""
    return [(r, d, n) for r, steps in enumerate(progs) for st in steps for d, n in st.sends]
