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
}


def table() -> dict[str, tuple[Algorithm, ...]]:
    # MPICH has no numeric ids and no run-time switch: forcing is one launch per algorithm.
    return {
        coll: tuple(Algorithm(coll, n, None, False, False) for n in names)
        for coll, names in MPICH_ALGORITHMS.items()
    }
