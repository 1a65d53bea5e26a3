"""What runs for each algorithm name under SimGrid: collbench's ports, or SMPI's own.

Open MPI names (the default). Every coll/tuned algorithm of barrier, bcast, gather, scatter,
reduce, allreduce, allgather(v), alltoall(v) and reduce_scatter(_block) runs collbench's
own port (kernel/ports/, proven message for message against Open MPI's monitoring),
compiled into the SimGrid kernel, with the semantics Open MPI gives a forced algorithm
(segment size 0 = unsegmented unless `segsize` is given; fanout 0 = its default fanout or
radix). "default" runs what the fixed decision rules of the simulated Open MPI series
(`run.simgrid.ompi_version`, catalog.ompi_decisions) pick per process count and size;
gatherv and scatterv run coll/basic's linear algorithm (coll/tuned has none).

SMPI's own collectives stay selectable, always named as such: `smpi:<name>` with SMPI's
name (`--cfg=smpi/<collective>:<name>`), e.g. `smpi:ompi_pipeline`, or `smpi:ompi` for
SMPI's selector that mimics Open MPI 3.1.2's decisions. `OPENMPI` says, per Open MPI
algorithm, which SMPI algorithm is closest and how close (checked against SimGrid's
sources, src/smpi/colls/): "port" = SMPI's code is a port of Open MPI's; "equivalent" = the
same communication pattern written independently; "approximate" = the same idea with the
differences the note gives. `collbench algorithms --backend simgrid` shows it.

MPICH names (`--mpi` pointing at an MPICH): there are no ports of MPICH's algorithms, so
each name runs SMPI's counterpart (`MPICH`) and "default" SMPI's `mpich` selector, as
before the ports existed; rows say so (metrics `implementation = "smpi"`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from collbench.catalog import ompi_decisions
from collbench.catalog.algorithms import DEFAULT, Algorithm, Catalog
from collbench.catalog.collectives import COLLECTIVES, Kind
from collbench.catalog.openmpi import SEGMENTED
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
# Open MPI 5.0 coll/tuned name -> the nearest SMPI algorithm; None = SMPI has none.
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

# SimGrid 3.32's own algorithms per collective (`smpirun --cfg=smpi/<coll>:x` lists them),
# without "default" (= the selector) and "automatic" (tries every algorithm at every call).
SMPI_ALGORITHMS: Final[dict[str, tuple[str, ...]]] = {
    "barrier": ("ompi", "ompi_basic_linear", "ompi_two_procs", "ompi_tree", "ompi_bruck",
                "ompi_recursivedoubling", "ompi_doublering", "mpich_smp", "mpich",
                "mvapich2_pair", "mvapich2", "impi"),
    "bcast": ("arrival_pattern_aware", "arrival_pattern_aware_wait", "arrival_scatter",
              "binomial_tree", "flattree", "flattree_pipeline", "NTSB", "NTSL", "NTSL_Isend",
              "scatter_LR_allgather", "scatter_rdb_allgather", "SMP_binary", "SMP_binomial",
              "SMP_linear", "ompi", "ompi_split_bintree", "ompi_pipeline", "mpich", "mvapich2",
              "mvapich2_inter_node", "mvapich2_intra_node", "mvapich2_knomial_intra_node",
              "impi"),
    "gather": ("ompi", "ompi_basic_linear", "ompi_binomial", "ompi_linear_sync", "mpich",
               "mvapich2", "mvapich2_two_level", "impi"),
    "scatter": ("ompi", "ompi_basic_linear", "ompi_linear_nb", "ompi_binomial", "mpich",
                "mvapich2", "mvapich2_two_level_binomial", "mvapich2_two_level_direct", "impi"),
    "reduce": ("arrival_pattern_aware", "binomial", "flat_tree", "NTSL", "scatter_gather",
               "ompi", "ompi_chain", "ompi_pipeline", "ompi_basic_linear",
               "ompi_in_order_binary", "ompi_binary", "ompi_binomial", "mpich", "mvapich2",
               "mvapich2_knomial", "mvapich2_two_level", "impi", "rab"),
    "allreduce": ("lr", "rab1", "rab2", "rab_rdb", "rdb", "smp_binomial",
                  "smp_binomial_pipeline", "smp_rdb", "smp_rsag", "smp_rsag_lr",
                  "smp_rsag_rab", "redbcast", "ompi", "ompi_ring_segmented", "mpich",
                  "mvapich2", "mvapich2_rs", "mvapich2_two_level", "impi", "rab"),
    "allgather": ("2dmesh", "3dmesh", "bruck", "GB", "loosely_lr", "NTSLR", "NTSLR_NB", "pair",
                  "rdb", "rhv", "ring", "SMP_NTS", "smp_simple", "spreading_simple", "ompi",
                  "ompi_neighborexchange", "mvapich2", "mvapich2_smp", "mpich", "impi"),
    "allgatherv": ("GB", "pair", "ring", "ompi", "ompi_neighborexchange", "ompi_bruck", "mpich",
                   "mpich_rdb", "mpich_ring", "mvapich2", "impi"),
    "alltoall": ("2dmesh", "3dmesh", "basic_linear", "bruck", "pair", "pair_rma",
                 "pair_light_barrier", "pair_mpi_barrier", "pair_one_barrier", "rdb", "ring",
                 "ring_light_barrier", "ring_mpi_barrier", "ring_one_barrier", "mvapich2",
                 "mvapich2_scatter_dest", "ompi", "mpich", "impi"),
    "alltoallv": ("bruck", "pair", "pair_light_barrier", "pair_mpi_barrier", "pair_one_barrier",
                  "ring", "ring_light_barrier", "ring_mpi_barrier", "ring_one_barrier", "ompi",
                  "mpich", "ompi_basic_linear", "mvapich2", "impi"),
    "reduce_scatter": ("ompi", "ompi_basic_recursivehalving", "ompi_ring", "ompi_butterfly",
                       "mpich", "mpich_pair", "mpich_rdb", "mpich_noncomm", "mvapich2", "impi"),
}
SMPI_PREFIX: Final = "smpi:"
# "default" under SimGrid for collectives coll/tuned does not serve: coll/basic's linear
# algorithm, what Open MPI runs for them (ported: cbp_gatherv_linear, cbp_scatterv_linear).
COLL_BASIC: Final = ("gatherv", "scatterv")
DEFAULT_OMPI_VERSION: Final = "5.0"


def selector(implementation: str) -> str:
    """SMPI's coll-selector that mimics this library's own decisions."""
    if implementation not in SELECTORS:
        raise UserError(f"SimGrid backend: algorithm names of {implementation!r} cannot be "
                        f"mapped to SMPI; valid: {', '.join(SELECTORS)} (use --mpi PREFIX)")
    return SELECTORS[implementation]


def table(implementation: str) -> dict[str, dict[str, SmpiAlgorithm | None]]:
    selector(implementation)  # raises for an unknown library
    return _TABLES[implementation]


def smpi_algorithm(implementation: str, collective: str, name: str) -> SmpiAlgorithm | None:
    """The SMPI algorithm nearest to a library's algorithm (None: SMPI has none)."""
    return table(implementation).get(collective, {}).get(name)


def is_smpi(name: str) -> bool:
    """Whether an algorithm name asks for SMPI's own implementation (`smpi:<name>`)."""
    return name.startswith(SMPI_PREFIX)


def ported(version: str) -> dict[str, tuple[Algorithm, ...]]:
    """Open MPI's coll/tuned algorithms of this series, each run by collbench's port.

    Names and ids are coll/tuned's (catalog.ompi_decisions.ALGORITHMS, the ports' ids);
    algorithms the series does not have (sparbit before 5.0) are left out. Segment size and
    fanout are accepted where Open MPI reads them for a forced algorithm (catalog.openmpi).
    """
    out: dict[str, tuple[Algorithm, ...]] = {}
    for coll, names in ompi_decisions.ALGORITHMS.items():
        algs = []
        for ident, name in enumerate(names, start=1):
            try:
                ompi_decisions.algorithm_name(version, coll, ident)
            except UserError:
                continue  # not in this series
            algs.append(Algorithm(coll, name, ident, False, coll in SEGMENTED))
        out[coll] = tuple(algs)
    return out


@dataclass(frozen=True)
class SimgridCatalog(Catalog):
    """The algorithms a simulation can run: the ports (Open MPI names) or SMPI's
    counterparts (MPICH names), and SMPI's own as `smpi:<name>` (never part of "all")."""

    ompi_version: str | None = None  # the Open MPI series the ports simulate; None: MPICH
    smpi: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: SMPI_ALGORITHMS)

    def components_why_not(self) -> str | None:
        return ("SimGrid runs collbench's ports of coll/tuned's algorithms, not Open MPI's "
                "component selection")

    def resolve(self, collective: str, ref: str | int, where: str) -> Algorithm:
        if isinstance(ref, str) and is_smpi(ref.strip().lower()):
            return self.smpi_choice(collective, ref.strip()[len(SMPI_PREFIX):], where)
        try:
            return super().resolve(collective, ref, where)
        except UserError as e:
            own = [n for n in self.smpi.get(collective, ())
                   if isinstance(ref, str) and n.lower() == ref.strip().lower()]
            hint = (f" ({ref!r} is SMPI's own algorithm: write {SMPI_PREFIX}{own[0]})" if own
                    else f"; SMPI's own: {SMPI_PREFIX}<name> (collbench algorithms "
                         f"--backend simgrid {collective})"
                    if collective in self.smpi
                    else " (under SimGrid it runs SMPI's own implementation)"
                    if not has_port(collective) else "")
            raise UserError(f"{e}{hint}") from None

    def smpi_choice(self, collective: str, name: str, where: str) -> Algorithm:
        """SMPI's own algorithm `name` (any case), forced with --cfg=smpi/<coll>:<name>."""
        have = self.smpi.get(collective, ())
        if not have:
            raise UserError(f"{where}: SMPI cannot force a {collective} algorithm (SimGrid "
                            f"has no smpi/{collective} option); valid: {DEFAULT}")
        for known in have:
            if known.lower() == name.lower():
                return Algorithm(collective, f"{SMPI_PREFIX}{known}", None, False, False)
        names = [f"{SMPI_PREFIX}{n}" for n in have]
        raise UserError(f"{where}: {SMPI_PREFIX + name!r} is not one of SMPI's {collective} "
                        f"algorithms; valid: {', '.join(names)}"
                        f"{did_you_mean(SMPI_PREFIX + name, names)}")

    def runs_port(self, algorithm: str) -> bool:
        """Whether this algorithm name runs collbench's port (else SMPI's code)."""
        return self.ompi_version is not None and not is_smpi(algorithm)


def simgrid_catalog(base: Catalog, ompi_version: str | None = None) -> SimgridCatalog:
    """What a simulation can run, for the names of the library in `base`.

    Open MPI names: the ports of the `ompi_version` series (default 5.0), whatever Open MPI
    is installed here. MPICH names: the algorithms SMPI has a counterpart for.
    """
    if base.implementation == "openmpi":
        version = ompi_decisions.series(ompi_version or DEFAULT_OMPI_VERSION)
        return SimgridCatalog(
            "openmpi", version, f"collbench's ports of Open MPI {version} coll/tuned "
            "(kernel/ports)", ported(version), ompi_version=version)
    if ompi_version is not None:
        raise UserError(f"run.simgrid.ompi_version: the algorithm names are "
                        f"{base.implementation} {base.version}'s (--mpi), and the ports "
                        "simulate Open MPI; remove ompi_version, or use Open MPI's names")
    mapping = table(base.implementation)
    algorithms = {
        coll: tuple(replace(a, runtime_switchable=False, segmentable=False) for a in algs
                    if mapping.get(coll, {}).get(a.name) is not None)
        for coll, algs in base.algorithms.items()
    }
    return SimgridCatalog(base.implementation, base.version,
                          f"{base.source}, restricted to what SimGrid SMPI implements",
                          algorithms)


def default_decisions(version: str, collective: str, nprocs: int,
                      size_bytes: int) -> tuple[int, int, str]:
    """(algorithm id, fanout, name) that "default" runs under the ports, for the kernel's
    ports table: the fixed rules of `version` (id 0 = no coll/tuned id: coll/basic's
    linear gatherv/scatterv, and coll/self on one process, where the kernel runs SMPI's
    local copy)."""
    if nprocs < 2:
        return 0, 0, "self"
    if collective in COLL_BASIC:
        return 0, 0, "basic_linear"
    d = ompi_decisions.decide_osu(version, collective, nprocs, size_bytes)
    name = ompi_decisions.algorithm_name(version, collective, d.algorithm_id)
    # The rules hand a chain fan-out 0, which coll/base turns into 1 (a pipeline).
    fanout = 1 if name == "chain" else d.fanout
    return d.algorithm_id, fanout, name


# coll/han 5.0's default hierarchies ported for any number of nodes and any layout
# (kernel/ports/cbp_han.c, proven message for message on two and five hosts by
# tests/kernel/test_ports_han.py; cbp_han_applies steps aside only where han does: one node
# or one rank per node) and han's name for each (its
# default gather is "simple": use_simple_gather is on; "simple" is its only barrier, which
# also separates the timed iterations of the default points han serves).
HAN_PORTS: Final = {"bcast": "intra", "reduce": "intra", "allreduce": "intra",
                    "gather": "simple", "scatter": "intra", "allgather": "intra",
                    "barrier": "simple"}


def han_lines(version: str, collectives: list[str], nodes: int, divisor: int,
              modulus: int) -> list[str]:
    """The ports table's `han` lines: a simulated Open MPI 5.0 whose ranks span `nodes` >= 2
    nodes runs coll/han (priority 35 over tuned's 30; 4.1 ships it at 0) for the default
    points of its ported collectives (give "barrier" for the barrier between iterations);
    rank r is on node (r // divisor) % modulus."""
    if ompi_decisions.series(version) != "5.0" or nodes < 2:
        return []
    return [f"han {c} {divisor} {modulus} {HAN_PORTS[c]}"
            for c in dict.fromkeys(collectives) if c in HAN_PORTS]


def has_port(collective: str) -> bool:
    """Whether the SimGrid kernel runs this (blocking) collective through the ports."""
    return collective in ompi_decisions.ALGORITHMS or collective in COLL_BASIC


def mapping_rows(catalog: SimgridCatalog) -> list[dict[str, str]]:
    """One row per collective × algorithm for `collbench algorithms --backend simgrid`:
    what runs (a port or SMPI's code), and SMPI's nearest algorithm (`smpi:<name>`)."""
    impl = catalog.implementation
    mapping = table(impl)
    rows = []
    for coll in COLLECTIVES:
        if COLLECTIVES[coll].kind is Kind.P2P:
            continue
        switch = coll in SMPI_SWITCHES
        if catalog.ompi_version:
            runs = ("smpi: its own implementation" if not has_port(coll)
                    else "port: coll/basic linear" if coll in COLL_BASIC
                    else f"port: Open MPI {catalog.ompi_version} fixed rules")
            rows.append({"collective": coll, "algorithm": DEFAULT, "id": "0", "runs": runs,
                         "smpi": f"{SMPI_PREFIX}ompi" if switch else "-",
                         "relation": "approximate" if switch else "",
                         "note": "SMPI's ompi selector follows Open MPI 3.1.2's rules"
                         if switch else ""})
        else:
            rows.append({"collective": coll, "algorithm": DEFAULT, "id": "",
                         "runs": f"smpi: {selector(impl)} selector" if switch
                         else "smpi: its only implementation", "smpi": "", "relation": "",
                         "note": ""})
        named: set[str] = {"ompi"} if catalog.ompi_version and switch else set()
        for a in catalog.of(coll):
            m = mapping.get(coll, {}).get(a.name)
            if m:
                named.add(m.smpi)
            rows.append({"collective": coll, "algorithm": a.name,
                         "id": "" if a.id is None else str(a.id),
                         "runs": "port" if catalog.runs_port(a.name)
                         else f"smpi: {m.smpi if m else '-'}",
                         "smpi": f"{SMPI_PREFIX}{m.smpi}" if m else "-",
                         "relation": m.relation if m else "not in SMPI",
                         "note": m.note if m else ""})
        for name in catalog.smpi.get(coll, ()):
            if name not in named:
                rows.append({"collective": coll, "algorithm": f"{SMPI_PREFIX}{name}",
                             "id": "", "runs": "smpi", "smpi": "", "relation": "SMPI only",
                             "note": ""})
    return rows
