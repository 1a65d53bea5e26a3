"""SimGrid SMPI's collective algorithms under the names users know (Open MPI's, MPICH's).

SMPI (3.32) re-implements many MPI libraries' algorithms; it is forced one collective at a
time with `--cfg=smpi/<collective>:<algorithm>`. Users keep writing Open MPI `coll/tuned`
names (or MPICH's); this table says which SMPI algorithm runs for each, how close it is,
and which ones SMPI does not have. Every entry was checked against SimGrid's sources
(src/smpi/colls/): "port" = SMPI's code is a port of that library's code; "equivalent" =
the same communication pattern written independently; "approximate" = the same idea with
differences given in the note. The default ("default" in a spec) is SMPI's selector that
mimics the library's own decisions: `--cfg=smpi/coll-selector:ompi` (or `mpich`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

from collbench.catalog.algorithms import DEFAULT, Catalog
from collbench.catalog.collectives import COLLECTIVES, Kind
from collbench.errors import UserError, did_you_mean

Relation = Literal["port", "equivalent", "approximate"]

# Collectives SMPI lets you force (`smpi/<name>`); the others always run SMPI's default.
SMPI_SWITCHES: Final = ("barrier", "bcast", "gather", "scatter", "reduce", "allreduce",
                        "allgather", "allgatherv", "alltoall", "alltoallv", "reduce_scatter")
SELECTORS: Final = {"openmpi": "ompi", "mpich": "mpich"}


@dataclass(frozen=True)
class SmpiAlgorithm:
    smpi: str  # SMPI's name for --cfg=smpi/<collective>:<smpi>
    relation: Relation
    note: str = ""


def _p(smpi: str, note: str = "") -> SmpiAlgorithm:
    return SmpiAlgorithm(smpi, "port", note)


def _e(smpi: str, note: str = "") -> SmpiAlgorithm:
    return SmpiAlgorithm(smpi, "equivalent", note)


def _a(smpi: str, note: str) -> SmpiAlgorithm:
    return SmpiAlgorithm(smpi, "approximate", note)


_SEG = "SMPI's port chooses its own segment size"
# Open MPI 5.0 coll/tuned name -> SMPI algorithm; None = SMPI does not implement it.
OPENMPI: Final[dict[str, dict[str, SmpiAlgorithm | None]]] = {
    "barrier": {
        "linear": _p("ompi_basic_linear"), "double_ring": _p("ompi_doublering"),
        "recursive_doubling": _p("ompi_recursivedoubling"), "bruck": _p("ompi_bruck"),
        "two_proc": _p("ompi_two_procs"), "tree": _p("ompi_tree"),
    },
    "bcast": {
        "basic_linear": _e("flattree", "root isends to every rank, then waits (SMPI's ompi "
                                       "selector runs NTSL where Open MPI picks basic_linear)"),
        "chain": None,  # SMPI's ompi selector runs ompi_pipeline (a chain of fanout 1)
        "pipeline": _p("ompi_pipeline", f"{_SEG} (16–128 KiB by message size); Open MPI's "
                                        "forced pipeline is unsegmented"),
        # SMPI 3.32's ompi_split_bintree delivers wrong data at every size and deadlocks
        # at 1 MiB (checked with validate); its small-message fallback, SMP_linear, breaks
        # with one rank per simulated host.
        "split_binary_tree": None,
        "binary_tree": _a("NTSB", "pipelined binary tree, 8 KiB segments (what SMPI's ompi "
                                  "selector runs for binary_tree)"),
        "binomial": _e("binomial_tree", "MPICH-style binomial tree, unsegmented"),
        "knomial": _a("mvapich2_knomial_intra_node", "MVAPICH2's k-nomial tree, radix 4 "
                                                     "(what SMPI's ompi selector runs for "
                                                     "knomial)"),
        "scatter_allgather": _a("scatter_rdb_allgather", "MPICH's binomial scatter + "
                                "recursive-doubling allgather"),
        "scatter_allgather_ring": _a("scatter_LR_allgather", "binomial scatter + logical "
                                     "ring allgather"),
    },
    "gather": {
        "basic_linear": _p("ompi_basic_linear"), "binomial": _p("ompi_binomial"),
        "linear_sync": _p("ompi_linear_sync"),
    },
    "scatter": {
        "basic_linear": _p("ompi_basic_linear"), "binomial": _p("ompi_binomial"),
        "linear_nb": _p("ompi_linear_nb"),
    },
    "reduce": {
        "linear": _p("ompi_basic_linear"),
        "chain": _p("ompi_chain", "fanout P/2 and 64 KiB segments (Open MPI: fanout 4, "
                                  "unsegmented when forced)"),
        "pipeline": _p("ompi_pipeline", f"{_SEG} (1–64 KiB)"),
        "binary": _p("ompi_binary", f"{_SEG} (32 KiB)"),
        "binomial": _p("ompi_binomial", f"{_SEG} (0 or 1 KiB)"),
        "in-order_binary": _p("ompi_in_order_binary"),
        "rabenseifner": _a("scatter_gather", "MPICH's reduce-scatter + gather (Rabenseifner's "
                                             "algorithm); SMPI's own rab refuses MPI_CHAR"),
    },
    "allreduce": {
        "basic_linear": None,
        "nonoverlapping": _e("redbcast", "reduce to rank 0, then bcast (both as selected)"),
        "recursive_doubling": _e("rdb"),
        "ring": _a("lr", "logical ring; falls back to SMPI's default when count < P"),
        "segmented_ring": _p("ompi_ring_segmented"),
        "rabenseifner": _a("rab_rdb", "recursive-halving reduce-scatter + recursive-"
                                      "doubling allgather"),
    },
    "allgather": {
        "linear": _e("GB", "gather to rank 0, then bcast"), "bruck": _e("bruck"),
        "recursive_doubling": _e("rdb"), "ring": _e("ring"),
        "neighbor": _p("ompi_neighborexchange"),
        "two_proc": _e("pair", "pairwise exchange: one sendrecv at 2 processes"),
        "sparbit": None,
    },
    "allgatherv": {
        "default_algorithm": _e("GB", "gatherv to rank 0, then bcast"),
        "bruck": _p("ompi_bruck"), "ring": _e("ring"),
        "neighbor": _p("ompi_neighborexchange"),
        "two_proc": _e("pair", "pairwise exchange: one sendrecv at 2 processes"),
        "sparbit": None,
    },
    "alltoall": {
        "linear": _e("basic_linear", "irecv/isend to everyone, then wait"),
        "pairwise": _e("ring", "step i sends to rank+i and receives from rank-i"),
        "modified_bruck": _a("bruck", "Bruck's algorithm without Open MPI's modifications"),
        "linear_sync": None,
        "two_proc": _e("ring", "one sendrecv at 2 processes"),
    },
    "alltoallv": {
        "basic_linear": _p("ompi_basic_linear"),
        "pairwise": _e("ring", "step i sends to rank+i and receives from rank-i"),
    },
    "reduce_scatter": {
        "non-overlapping": _a("default", "reduce to rank 0 then scatterv; uneven counts "
                                         "switch to SMPI's mpich algorithm"),
        "recursive_halving": _p("ompi_basic_recursivehalving", "wrong results when some "
                                "ranks receive nothing (OSU sizes below P): validate shows "
                                "it"),
        "ring": _p("ompi_ring"), "butterfly": _p("ompi_butterfly"),
    },
    "reduce_scatter_block": {
        "basic_linear": None, "recursive_doubling": None, "recursive_halving": None,
        "butterfly": None,
    },
}

# MPICH 4.x/5.0 MPIR_CVAR_<COLL>_INTRA_ALGORITHM value -> SMPI algorithm.
MPICH: Final[dict[str, dict[str, SmpiAlgorithm | None]]] = {
    "barrier": {"nb": None, "smp": _p("mpich_smp"), "k_dissemination": None, "recexch": None},
    "bcast": {
        "binomial": _p("binomial_tree"), "nb": None, "smp": None,
        "scatter_recursive_doubling_allgather": _p("scatter_rdb_allgather"),
        "scatter_ring_allgather": _p("scatter_LR_allgather"), "pipelined_tree": None,
        "tree": None,
    },
    "gather": {"binomial": _a("ompi_binomial", "Open MPI's binomial gather"), "nb": None},
    "gatherv": {"linear": None, "nb": None},
    "scatter": {"binomial": _a("ompi_binomial", "Open MPI's binomial scatter"), "nb": None},
    "scatterv": {"linear": None, "nb": None},
    "reduce": {"binomial": _p("binomial"), "nb": None, "smp": None,
               "reduce_scatter_gather": _p("scatter_gather")},
    "allreduce": {
        "nb": None, "smp": None, "recursive_doubling": _p("rdb"),
        "reduce_scatter_allgather": _a("rab_rdb", "recursive-halving reduce-scatter + "
                                                  "recursive-doubling allgather"),
        "tree": None, "recexch": None, "ring": _a("lr", "logical ring"),
        "k_reduce_scatter_allgather": None,
    },
    "allgather": {
        "brucks": _e("bruck"), "k_brucks": None, "nb": None,
        "recursive_doubling": _e("rdb"), "ring": _e("ring"), "recexch_doubling": None,
        "recexch_halving": None,
    },
    "allgatherv": {"brucks": _a("ompi_bruck", "Open MPI's Bruck allgatherv"), "nb": None,
                   "recursive_doubling": _p("mpich_rdb"), "ring": _p("mpich_ring")},
    "alltoall": {"brucks": _e("bruck"), "k_brucks": None, "nb": None,
                 "pairwise": _a("ring", "(rank±i) pairs; MPICH uses XOR pairs at 2^k ranks"),
                 "pairwise_sendrecv_replace": None,
                 "scattered": _a("basic_linear", "all isend/irecv at once, no batching")},
    "alltoallv": {"nb": None, "pairwise_sendrecv_replace": None,
                  "scattered": _a("ompi_basic_linear", "all isend/irecv at once")},
    "reduce_scatter": {"nb": None, "noncommutative": _p("mpich_noncomm"),
                       "pairwise": _p("mpich_pair"), "recursive_doubling": _p("mpich_rdb"),
                       "recursive_halving": None},
    "reduce_scatter_block": {"noncommutative": None, "recursive_doubling": None,
                             "pairwise": None, "recursive_halving": None, "nb": None},
}

_TABLES: Final = {"openmpi": OPENMPI, "mpich": MPICH}


def selector(implementation: str) -> str:
    """SMPI's coll-selector that mimics this library's own decisions (the baseline)."""
    if implementation not in SELECTORS:
        raise UserError(f"SimGrid backend: algorithm names of {implementation!r} cannot be "
                        f"mapped to SMPI; valid: {', '.join(SELECTORS)} (use --mpi PREFIX)")
    return SELECTORS[implementation]


def table(implementation: str) -> dict[str, dict[str, SmpiAlgorithm | None]]:
    selector(implementation)  # raises for an unknown library
    return _TABLES[implementation]


def smpi_algorithm(implementation: str, collective: str, name: str) -> SmpiAlgorithm | None:
    return table(implementation).get(collective, {}).get(name)


def simgrid_catalog(base: Catalog) -> Catalog:
    """The base library's algorithms that SMPI implements, forced one launch each."""
    mapping = table(base.implementation)
    algorithms = {
        coll: tuple(replace(a, runtime_switchable=False, segmentable=False) for a in algs
                    if mapping.get(coll, {}).get(a.name) is not None)
        for coll, algs in base.algorithms.items()
    }
    return Catalog(base.implementation, base.version,
                   f"{base.source}, restricted to what SimGrid SMPI implements", algorithms)


def check_algorithm(base: Catalog, collective: str, ref: str | int, where: str) -> None:
    """UserError when `ref` names an algorithm of the base library that SMPI lacks."""
    if isinstance(ref, str) and ref.strip().lower() in (DEFAULT, "all"):
        return
    try:
        alg = base.resolve(collective, ref, where)
    except UserError:
        return  # not a name of this library at all: make_plan reports it with the choices
    if alg.name == DEFAULT or smpi_algorithm(base.implementation, collective, alg.name):
        return
    have = [a.name for a in simgrid_catalog(base).of(collective)]
    raise UserError(
        f"{where}: {base.implementation} {collective} algorithm {alg.name!r} is not "
        f"implemented by SimGrid SMPI; valid: {', '.join([DEFAULT, *have])}"
        f"{did_you_mean(alg.name, have)}")


def mapping_rows(base: Catalog) -> list[dict[str, str]]:
    """One row per collective × algorithm for `collbench algorithms --backend simgrid`."""
    mapping = table(base.implementation)
    rows = []
    for coll in COLLECTIVES:
        if COLLECTIVES[coll].kind is Kind.P2P:
            continue
        switch = coll in SMPI_SWITCHES
        rows.append({"collective": coll, "algorithm": DEFAULT,
                     "smpi": f"{selector(base.implementation)} selector" if switch
                     else "SMPI's only implementation", "relation": "", "note": ""})
        for a in base.of(coll):
            m = mapping.get(coll, {}).get(a.name)
            rows.append({"collective": coll, "algorithm": a.name,
                         "smpi": m.smpi if m else "-",
                         "relation": m.relation if m else "not in SMPI",
                         "note": m.note if m else ""})
    return rows
