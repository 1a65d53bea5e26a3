"""Which component Open MPI's "default" is on several nodes, and coll/han's plan there.

4.1 ships coll/han at priority 0, so coll/tuned decides on the whole communicator
(catalog.ompi_decisions). In 5.0 han (priority 35) serves HAN_SERVES on 2 or more nodes: it
splits the communicator into a low communicator per node and an up communicator of one
leader per node (v5.0.x coll_han_*.c) and hands them to coll/tuned (fixed decisions) and
libnbc (its non-blocking up-level calls). ``han_plan`` says which calls run where,
``default_choice`` which component "default" is; models.han costs the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from collbench.catalog.ompi_decisions import Decision, KiB, algorithm_name, decide_osu, series
from collbench.errors import choice_error

# What han runs by default on the whole communicator (mca_coll_han_*_intra_dynamic with no
# rules file: the global level is han, the levels below tuned). allgatherv and the rest are
# left to tuned on the global communicator (coll_han_module.c sets them NULL there).
HAN_SERVES: Final = ("allgather", "allreduce", "barrier", "bcast", "gather", "reduce",
                     "scatter")
# han's default algorithm per collective: "intra" (split into tasks, pipelined over
# segments), except gather (use_simple_algorithm[GATHER] = true) and barrier (only simple).
HAN_ALGORITHM: Final = {"allgather": "intra", "allreduce": "intra", "barrier": "simple",
                        "bcast": "intra", "gather": "simple", "reduce": "intra",
                        "scatter": "intra"}
HAN_SEGSIZE: Final = {"bcast": 64 * KiB, "reduce": 64 * KiB, "allreduce": 64 * KiB}
# Collectives han gives back to the next component when the nodes hold unequal numbers of
# ranks (han_module->are_ppn_imbalanced in coll_han_<coll>.c, v5.0.x). allreduce and
# barrier have no such check: han runs them on the unequal low communicators (measured on
# 5.0.11, 2 emulated hosts, 3 + 2 ranks: bcast and reduce fell back, allreduce did not).
HAN_IMBALANCED_FALLBACK: Final = frozenset({"allgather", "bcast", "gather", "reduce",
                                            "scatter"})
INTRA: Final = "intra_node"  # han's low communicator: the ranks of one node
INTER: Final = "inter_node"  # han's up communicator: one leader per node


@dataclass(frozen=True)
class SubCall:
    """One collective han calls on a sub-communicator, per segment where han pipelines.

    ``size_bytes`` is collbench's size of that call (bytes per rank as OSU counts them: the
    whole buffer for bcast/reduce/allreduce, a rank's block for gather/scatter/allgather).
    The blocking calls of the up communicator go to coll/tuned (libnbc, preferred there,
    has non-blocking ones only); han's non-blocking ones (ibcast, ireduce) are libnbc's."""

    level: str  # INTRA or INTER
    collective: str
    nprocs: int
    component: str  # "tuned" or "libnbc"
    algorithm: str  # tuned's name; libnbc's mapped to the tuned algorithm of the same shape
    size_bytes: int
    segsize: int = 0  # the algorithm's own segments (libnbc's chain), 0: none


@dataclass(frozen=True)
class HanPlan:
    """han's default for one call: ``stages`` run per segment in this order, as a pipeline
    when ``segments`` > 1 (segment i of stage k overlaps segment i+1 of stage k-1);
    ``first`` replaces stage 0 for the first segment (bcast sends it with a blocking bcast)."""

    algorithm: str  # han's: intra, simple
    segsize: int  # bytes, 0: not segmented
    segments: int
    stages: tuple[SubCall, ...]
    first: SubCall | None = None

    def runs(self) -> tuple[SubCall, ...]:
        """The calls that run: with one segment, `first` instead of stage 0."""
        if self.first is None:
            return self.stages
        rest = self.stages if self.segments > 1 else self.stages[1:]
        return (self.first, *rest)

    def describe(self) -> str:
        seg = f", {self.segments} x {self.segsize // KiB} KiB segments" if self.segments > 1 \
            else ""
        parts = [f"{s.level} {s.collective} {s.component} {s.algorithm} np={s.nprocs}"
                 for s in self.runs()]
        return f"han {self.algorithm}{seg}: " + "; ".join(parts)


@dataclass(frozen=True)
class DefaultChoice:
    """What "default" runs: ``component`` "tuned" (then ``decision`` and ``algorithm`` are
    tuned's on the whole communicator) or "han" (then ``han`` says what runs where)."""

    component: str
    algorithm: str
    decision: Decision | None = None
    han: HanPlan | None = None
    why: str = ""


def _libnbc_bcast(nprocs: int) -> str:
    # nbc_ibcast.c, ibcast_skip_dt_decision (default true): linear up to 4, else binomial
    return "basic_linear" if nprocs <= 4 else "binomial"


def _libnbc_reduce(nprocs: int, count: int) -> tuple[str, int]:
    # nbc_ireduce.c with a commutative op: reduce-scatter + gather where count >= the
    # largest power of two below P (and P > 2), binomial for P > 4 or < 64 KiB, else a chain
    # of 8 KiB segments (the tuned shapes: rabenseifner, binomial, pipeline)
    pof2 = 1 << (max(nprocs, 1).bit_length() - 1)  # opal_next_poweroftwo(P) >> 1
    if nprocs > 2 and count >= pof2:
        return "rabenseifner", 0
    if nprocs > 4 or count < 64 * KiB:
        return "binomial", 0
    return "pipeline", 8 * KiB


def _tuned(version: str, level: str, collective: str, nprocs: int, size: int) -> SubCall:
    d = decide_osu(version, collective, nprocs, size)
    return SubCall(level, collective, nprocs, "tuned",
                   algorithm_name(version, collective, d.algorithm_id), size)


def han_plan(version: str, collective: str, nodes: int, ppn: int,
             size_per_rank: int) -> HanPlan:
    """han's default hierarchy for `nodes` nodes of `ppn` ranks each (balanced), with the
    tuned decisions on the sub-communicators (coll_han_<collective>.c, v5.0.x)."""
    if collective not in HAN_SERVES:
        raise choice_error("coll/han default", "collective", collective, HAN_SERVES)
    size = size_per_rank
    seg = HAN_SEGSIZE.get(collective, 0)
    segments = max(1, -(-size // seg)) if seg else 1
    piece = min(size, seg) if seg else size
    stages: list[SubCall] = []
    first = None

    def low(coll: str, nbytes: int) -> None:
        if ppn > 1:  # a one-rank low communicator is coll/self's: nothing moves
            stages.append(_tuned(version, INTRA, coll, ppn, nbytes))

    def up_tuned(coll: str, nbytes: int) -> None:
        stages.append(_tuned(version, INTER, coll, nodes, nbytes))

    if collective == "bcast":
        first = _tuned(version, INTER, "bcast", nodes, piece)
        stages.append(SubCall(INTER, "bcast", nodes, "libnbc", _libnbc_bcast(nodes), piece))
        low("bcast", piece)
    elif collective == "reduce":
        low("reduce", piece)
        alg, s = _libnbc_reduce(nodes, piece)
        stages.append(SubCall(INTER, "reduce", nodes, "libnbc", alg, piece, s))
    elif collective == "allreduce":
        low("reduce", piece)
        alg, s = _libnbc_reduce(nodes, piece)
        stages.append(SubCall(INTER, "reduce", nodes, "libnbc", alg, piece, s))
        stages.append(SubCall(INTER, "bcast", nodes, "libnbc", _libnbc_bcast(nodes), piece))
        low("bcast", piece)
    elif collective == "gather":
        low("gather", size)
        up_tuned("gather", size * ppn)
    elif collective == "scatter":
        up_tuned("scatter", size * ppn)
        low("scatter", size)
    elif collective == "allgather":
        low("gather", size)
        up_tuned("allgather", size * ppn)
        low("bcast", size * ppn * nodes)
    else:  # barrier: low, up, low
        low("barrier", 0)
        up_tuned("barrier", 0)
        low("barrier", 0)
    return HanPlan(HAN_ALGORITHM[collective], seg if segments > 1 else 0, segments,
                   tuple(stages), first)


def default_choice(version: str, collective: str, nprocs: int, size_per_rank: int,
                   nodes: int = 1, ppn: int | None = None,
                   commutative: bool = True) -> DefaultChoice:
    """What "default" runs on a communicator of `nprocs` ranks over `nodes` nodes of at most
    `ppn` ranks (collbench's size). 4.1: coll/han has priority 0, so coll/tuned decides on
    the whole communicator wherever it runs. 5.0: han (priority 35) serves HAN_SERVES on 2
    or more nodes and hands the sub-communicators to tuned; on one node it steps aside, and
    with one rank on every node it switches itself off (the MPI_MAX of the local peers is 1:
    han_module->enabled = false, coll_han_subcomms.c v5.0.10); it falls back to tuned for
    HAN_IMBALANCED_FALLBACK when the nodes hold unequal numbers of ranks and for a
    non-commutative reduction. allreduce and barrier on unequal nodes stay
    han's: the plan is then the fullest node's (`ppn` ranks on the low level)."""
    ppn = ppn or -(-nprocs // max(nodes, 1))
    why = ""
    if series(version) != "5.0":
        why = f"Open MPI {series(version)}: coll/han has priority 0"
    elif nodes < 2:
        why = "one node: coll/han steps aside"
    elif ppn == 1:
        why = "one rank per node: coll/han switches itself off"
    elif collective not in HAN_SERVES:
        why = f"coll/han leaves {collective} to coll/tuned on the whole communicator"
    elif nodes * ppn != nprocs and collective in HAN_IMBALANCED_FALLBACK:
        why = f"unequal ranks per node: coll/han gives {collective} back"
    elif not commutative and collective in ("reduce", "allreduce"):
        why = "non-commutative op: coll/han falls back"
    else:
        plan = han_plan(version, collective, nodes, ppn, size_per_rank)
        return DefaultChoice("han", plan.algorithm, None, plan,
                             f"Open MPI 5.0 on {nodes} nodes: coll/han's hierarchy")
    d = decide_osu(version, collective, nprocs, size_per_rank, commutative)
    return DefaultChoice("tuned", algorithm_name(version, collective, d.algorithm_id), d,
                         None, why)
