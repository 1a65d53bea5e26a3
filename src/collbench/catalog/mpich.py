"""MPICH intra-communicator algorithms, forced with MPIR_CVAR_<COLL>_INTRA_ALGORITHM."""

from __future__ import annotations

from typing import Final

from collbench.catalog.algorithms import Algorithm

# MPICH 4.x/5.0 CVAR values (src/mpi/coll/cvars); "auto" is the default selection.
MPICH_ALGORITHMS: Final[dict[str, tuple[str, ...]]] = {
    "barrier": ("nb", "smp", "k_dissemination", "recexch"),
    "bcast": ("binomial", "nb", "smp", "scatter_recursive_doubling_allgather",
              "scatter_ring_allgather", "pipelined_tree", "tree"),
    "gather": ("binomial", "nb"),
    "gatherv": ("linear", "nb"),
    "scatter": ("binomial", "nb"),
    "scatterv": ("linear", "nb"),
    "reduce": ("binomial", "nb", "smp", "reduce_scatter_gather"),
    "allreduce": ("nb", "smp", "recursive_doubling", "reduce_scatter_allgather", "tree",
                  "recexch", "ring", "k_reduce_scatter_allgather"),
    "allgather": ("brucks", "k_brucks", "nb", "recursive_doubling", "ring",
                  "recexch_doubling", "recexch_halving"),
    "allgatherv": ("brucks", "nb", "recursive_doubling", "ring"),
    "alltoall": ("brucks", "k_brucks", "nb", "pairwise", "pairwise_sendrecv_replace",
                 "scattered"),
    "alltoallv": ("nb", "pairwise_sendrecv_replace", "scattered"),
    "reduce_scatter": ("nb", "noncommutative", "pairwise", "recursive_doubling",
                       "recursive_halving"),
    "reduce_scatter_block": ("noncommutative", "recursive_doubling", "pairwise",
                             "recursive_halving", "nb"),
    # Non-blocking: MPIR_CVAR_I<COLL>_INTRA_ALGORITHM (MPICH 4.1+ src/mpi/coll/cvars.txt;
    # sched_* run on MPICH's schedules, tsp_* on its transport; "sched_auto" left out).
    "ibarrier": ("sched_recursive_doubling", "tsp_recexch", "tsp_k_dissemination"),
    "ibcast": ("sched_binomial", "sched_smp", "sched_scatter_recursive_doubling_allgather",
               "sched_scatter_ring_allgather", "tsp_tree", "tsp_scatterv_recexch_allgatherv",
               "tsp_scatterv_ring_allgatherv", "tsp_ring"),
    "igather": ("sched_binomial", "tsp_tree"),
    "igatherv": ("sched_linear", "tsp_linear"),
    "iscatter": ("sched_binomial", "tsp_tree"),
    "iscatterv": ("sched_linear", "tsp_linear"),
    "iallgather": ("sched_ring", "sched_brucks", "sched_recursive_doubling", "tsp_ring",
                   "tsp_brucks", "tsp_recexch_doubling", "tsp_recexch_halving"),
    "iallgatherv": ("sched_brucks", "sched_recursive_doubling", "sched_ring",
                    "tsp_recexch_doubling", "tsp_recexch_halving", "tsp_ring", "tsp_brucks"),
    "ialltoall": ("sched_brucks", "sched_inplace", "sched_pairwise", "sched_permuted_sendrecv",
                  "tsp_ring", "tsp_brucks", "tsp_scattered"),
    "ialltoallv": ("sched_blocked", "sched_inplace", "tsp_scattered", "tsp_blocked",
                   "tsp_inplace"),
    "ireduce": ("sched_smp", "sched_binomial", "sched_reduce_scatter_gather", "tsp_tree",
                "tsp_ring"),
    "iallreduce": ("sched_naive", "sched_smp", "sched_recursive_doubling",
                   "sched_reduce_scatter_allgather", "tsp_recexch_single_buffer",
                   "tsp_recexch_multiple_buffer", "tsp_tree", "tsp_ring",
                   "tsp_recexch_reduce_scatter_recexch_allgatherv"),
    "ireduce_scatter": ("sched_noncommutative", "sched_recursive_doubling", "sched_pairwise",
                        "sched_recursive_halving", "tsp_recexch"),
    "ireduce_scatter_block": ("sched_noncommutative", "sched_recursive_doubling",
                              "sched_pairwise", "sched_recursive_halving", "tsp_recexch"),
}


# MPICH's smp algorithms work on the communicator split per node (a node communicator and
# one of node leaders); MPICH only builds that split when the ranks span several nodes with
# more than one rank on some node. Elsewhere a forced smp algorithm is "not usable for the
# provided arguments": refused with MPIR_CVAR_COLLECTIVE_FALLBACK=error, which collbench
# sets, else silently replaced by MPICH's own choice (measured, MPICH 5.0.2, one node:
# bcast/allreduce fail in MPI_Init, reduce/barrier at the call; src/mpi/comm/commutil.c).
NEEDS_NODES: Final = frozenset({"smp", "sched_smp"})
LAYOUT_NOTE: Final = "needs ranks on 2+ nodes, 2+ on some node (MPICH's smp split)"


def layout_problem(name: str, nprocs: int, nodes: int | None) -> str | None:
    """Why algorithm `name` cannot run on `nprocs` ranks over `nodes` nodes (None: the
    node count is not known before the launch, so nothing is refused)."""
    if name not in NEEDS_NODES or nodes is None:
        return None
    if nodes < 2 or nprocs <= nodes:
        where = "one node" if nodes < 2 else f"{nodes} nodes with one rank each"
        return f"{name} needs ranks on 2+ nodes with 2+ on some node; {nprocs} ranks on " \
               f"{where} make MPICH refuse it"
    return None


def table() -> dict[str, tuple[Algorithm, ...]]:
    # MPICH has no numeric ids and no run-time switch: forcing is one launch per algorithm.
    return {
        coll: tuple(Algorithm(coll, n, None, False, False) for n in names)
        for coll, names in MPICH_ALGORITHMS.items()
    }
