"""What Open MPI's coll/tuned runs for "default": its fixed decision rules, per version.

With no algorithm forced and no rules file (``coll_tuned_use_dynamic_rules 0``, the
default), coll/tuned picks an algorithm from hard-coded switch points on the communicator
size and a message size (``coll_tuned_decision_fixed.c``). This module holds those switch
points as tables and answers ``decide(version, collective, nprocs, size_bytes)``.

Versions. The fixed rules were rewritten for 4.1.0 from ompi-collectives-tuning data
(averaged over several clusters). The rules are the same in every 4.1.x and 5.0.x release
(4.1.0 to 4.1.8, 5.0.0 to 5.0.11 and the v5.0.x branch): the decision file is byte-identical
across them. Both series pass segment size 0 and fan-in/out 0 to the algorithm. 5.0 added
sparbit to allgather (7) and allgatherv (6), but the fixed rules never pick it. Not covered:
4.0.x and older, where the rules are formulas with per-algorithm segment sizes that call the
algorithms directly. Also not covered are the unreleased v6.0.x branch, which keeps these
thresholds but passes fan-in/out 2 to reduce and allgather, and main, which adds separate
rules for communicators spanning nodes.

Message size. Every collective uses its own input, computed on each rank from that rank's
arguments. ``DECISION_INPUT`` describes them. These are not the sizes a rules file uses:
fixed allgather, alltoall, gather, scatter and reduce_scatter_block work on the per-rank
block, while the dynamic rules multiply it by P (see ``collectives.RulesBytes``).
``decision_bytes`` converts collbench's size (OSU's bytes per rank, as the kernel sends them
with MPI_CHAR) to this input.

Scope. These are the decisions coll/tuned (priority 30) makes on a communicator it serves.
The real 4.1 vs 5.0 difference is which communicator that is. In 4.1, coll/han has
priority 0, so tuned decides on the whole communicator, on one node or many. In 5.0, han
has priority 35. It steps aside on a single node. On several nodes it splits the
communicator and hands tuned the sub-communicators, so look up ppn and the node count there
(catalog.han_plan: which component "default" is, and han's plan).
The decision is the algorithm id handed to coll/tuned's dispatcher. A few algorithms then
fall back inside coll/base: neighbor exchange needs an even P, ring allreduce needs
count >= P, and so on. That fallback is part of running the algorithm, not of the decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from collbench.catalog.openmpi import FALLBACK_5_0
from collbench.errors import UserError, choice_error

KiB: Final = 1024
MiB: Final = 1024 * KiB


@dataclass(frozen=True)
class Decision:
    """The algorithm coll/tuned's fixed rules pick, and the tunables they hand it.

    ``algorithm_id`` is the value of ``coll_tuned_<collective>_algorithm`` that forces the
    same algorithm. ``segsize`` is in bytes; 0 means unsegmented. ``fanout`` is the
    fan-in/out; 0 means the algorithm's own default.
    """

    algorithm_id: int
    segsize: int = 0
    fanout: int = 0


# Algorithm names by id (1, 2, ...): Open MPI 5.0's table (allgatherv's id 1, Open MPI's
# "default" (gatherv + bcast), is called default_algorithm there).
ALGORITHMS: Final[dict[str, tuple[str, ...]]] = FALLBACK_5_0
# Added in 5.0; 4.1 does not have them (the fixed rules pick neither in any version).
_NEW_IN_5_0: Final = {("allgather", "sparbit"), ("allgatherv", "sparbit")}

# The decision input of each collective, as coll/tuned computes it on every rank.
DECISION_INPUT: Final[dict[str, str]] = {
    "allgather": "scount x size(sdtype): the block each rank contributes (rdtype if in place)",
    "allgatherv": "sum(rcounts) x size(sdtype) // P: the mean block per rank, rounded down",
    "allreduce": "count x size(dtype): the whole vector",
    "alltoall": "scount x size(sdtype): the block sent to each peer (rdtype if in place)",
    "alltoallv": "none: P only",
    "barrier": "none: P only",
    "bcast": "count x size(dtype): the whole buffer",
    "gather": "the block of one rank: rcount x size(rdtype) at the root, scount x size(sdtype) "
              "elsewhere",
    "reduce": "count x size(dtype): the whole vector",
    "reduce_scatter": "sum(rcounts) x size(dtype): the whole vector before scattering",
    "reduce_scatter_block": "rcount x size(dtype): the block each rank gets (not x P)",
    "scatter": "the block of one rank: scount x size(sdtype) at the root, rcount x size(rdtype) "
               "elsewhere",
}

# Collectives coll/tuned leaves to other components unless dynamic rules force it.
# On one node the next component with the function is coll/basic (linear algorithms).
NO_FIXED_DECISION: Final[dict[str, str]] = {
    "gatherv": "coll/tuned does not implement it; a lower-priority component runs it",
    "scatterv": "coll/tuned does not implement it; a lower-priority component runs it",
    "alltoallw": "coll/tuned does not implement it; a lower-priority component runs it",
    "scan": "coll/tuned runs it only when dynamic rules force an algorithm; otherwise a "
            "lower-priority component does",
    "exscan": "coll/tuned runs it only when dynamic rules force an algorithm; otherwise a "
              "lower-priority component does",
}

# --------------------------------------------------------------------------------------------
# The switch points. A table maps the smallest communicator size of each row ("from P = 4")
# to a step function over the decision input in bytes, written as
#     algorithm, from_bytes, algorithm, from_bytes, algorithm, ...
# e.g. ("ring", 8, "recursive_doubling") means ring below 8 B and recursive_doubling from 8 B.
# A row applies up to the next row's first P; the last row applies to every larger P.
# A row with a single algorithm does not depend on the size.
# --------------------------------------------------------------------------------------------

Steps = tuple[str | int, ...]
Table = dict[int, Steps]

_ALLREDUCE: Final[Table] = {
    2: ("ring", 8, "recursive_doubling", 4 * KiB, "ring", 8 * KiB, "recursive_doubling",
        16 * KiB, "ring", 64 * KiB, "segmented_ring", 256 * KiB, "rabenseifner"),
    4: ("ring", 16, "recursive_doubling", 8 * KiB, "rabenseifner"),
    8: ("recursive_doubling", 8 * KiB, "rabenseifner"),
    16: ("segmented_ring", 64, "recursive_doubling", 4 * KiB, "rabenseifner"),
    32: ("segmented_ring", 128, "rabenseifner"),
    64: ("recursive_doubling", 256 * KiB, "rabenseifner"),
    128: ("nonoverlapping", 128 * KiB, "recursive_doubling", 256 * KiB, "rabenseifner"),
    256: ("nonoverlapping", 4 * KiB, "rabenseifner"),
    512: ("nonoverlapping", 2 * KiB, "recursive_doubling", 16 * KiB, "rabenseifner"),
    2048: ("nonoverlapping", 2 * KiB, "segmented_ring", 4 * KiB, "recursive_doubling",
           16 * KiB, "rabenseifner"),
    4096: ("nonoverlapping", 2 * KiB, "segmented_ring", 16 * KiB, "recursive_doubling",
           32 * KiB, "rabenseifner"),
}
# Ring, segmented ring and rabenseifner need a commutative op.
_ALLREDUCE_NONCOMMUTATIVE: Final[Table] = {
    2: ("recursive_doubling", 128 * KiB, "basic_linear"),
    4: ("recursive_doubling",),
    8: ("recursive_doubling", 1 * MiB, "nonoverlapping"),
    16: ("recursive_doubling",),
    128: ("nonoverlapping", 128 * KiB, "recursive_doubling", 512 * KiB, "nonoverlapping"),
    256: ("nonoverlapping", 4 * KiB, "recursive_doubling", 512 * KiB, "nonoverlapping"),
    512: ("nonoverlapping", 2 * KiB, "recursive_doubling"),
}

# Row 2 is P == 2 exactly: row 3 starts at 3.
_ALLTOALL: Final[Table] = {
    2: ("pairwise", 2, "two_proc", 4, "pairwise", 16, "two_proc", 64, "pairwise", 256,
        "two_proc", 4 * KiB, "pairwise", 32 * KiB, "linear_sync", 256 * KiB, "two_proc",
        1 * MiB, "pairwise"),
    3: ("linear_sync", 8 * KiB, "linear", 16 * KiB, "linear_sync", 64 * KiB, "linear",
        512 * KiB, "pairwise", 1 * MiB, "linear"),
    8: ("linear_sync", 256 * KiB, "linear"),
    16: ("linear_sync", 4, "modified_bruck", 512, "linear_sync", 8 * KiB, "linear", 32 * KiB,
         "linear_sync", 256 * KiB, "linear", 512 * KiB, "linear_sync"),
    32: ("modified_bruck", 512, "linear", 512 * KiB, "linear_sync"),
    64: ("modified_bruck", 1 * KiB, "linear", 2 * KiB, "linear_sync", 4 * KiB, "linear",
         256 * KiB, "pairwise"),
    128: ("modified_bruck", 1 * KiB, "linear_sync", 2 * KiB, "linear", 256 * KiB, "pairwise"),
    256: ("modified_bruck", 1 * KiB, "linear_sync", 8 * KiB, "linear", 32 * KiB, "pairwise"),
    512: ("modified_bruck", 512, "linear_sync", 8 * KiB, "linear", 16 * KiB, "linear_sync",
          128 * KiB, "linear", 256 * KiB, "pairwise"),
    1024: ("modified_bruck", 512, "linear_sync", 1 * KiB, "linear", 2 * KiB, "linear_sync",
           16 * KiB, "linear", 256 * KiB, "linear_sync"),
    2048: ("modified_bruck", 1 * KiB, "linear_sync", 4 * KiB, "linear", 8 * KiB, "linear_sync",
           128 * KiB, "linear"),
    4096: ("modified_bruck", 2 * KiB, "linear_sync", 8 * KiB, "linear", 16 * KiB,
           "linear_sync", 32 * KiB, "linear", 64 * KiB, "linear_sync"),
}

_ALLTOALLV: Final[Table] = {
    2: ("pairwise",),
    4: ("basic_linear",),
    64: ("pairwise",),
    128: ("basic_linear",),
    256: ("pairwise",),
    1024: ("basic_linear",),
}

_BARRIER: Final[Table] = {
    2: ("recursive_doubling",),
    4: ("linear",),
    8: ("recursive_doubling",),
    64: ("bruck",),
    256: ("tree",),
    512: ("bruck",),
    1024: ("tree",),
    4096: ("bruck",),
}

_BCAST: Final[Table] = {
    2: ("pipeline", 32, "binary_tree", 256, "pipeline", 512, "knomial", 1 * KiB,
        "basic_linear", 32 * KiB, "binary_tree", 128 * KiB, "chain", 256 * KiB, "basic_linear",
        512 * KiB, "binomial", 1 * MiB, "binary_tree"),
    4: ("binary_tree", 64, "binomial", 128, "binary_tree", 2 * KiB, "binomial", 8 * KiB,
        "basic_linear", 1 * MiB, "chain"),
    8: ("knomial", 8, "binary_tree", 64, "knomial", 4 * KiB, "binary_tree", 16 * KiB,
        "binomial", 32 * KiB, "basic_linear"),
    16: ("knomial", 4 * KiB, "binomial", 1 * MiB, "scatter_allgather"),
    32: ("binomial", 2 * KiB, "knomial"),
    64: ("knomial",),
    128: ("binomial", 2, "binary_tree", 16 * KiB, "basic_linear", 32 * KiB, "binary_tree",
          64 * KiB, "knomial"),
    256: ("knomial", 16 * KiB, "split_binary_tree", 32 * KiB, "knomial"),
    1024: ("knomial", 512 * KiB, "scatter_allgather"),
    2048: ("knomial", 256 * KiB, "scatter_allgather"),
    4096: ("knomial", 8 * KiB, "binary_tree", 16 * KiB, "knomial", 256 * KiB,
           "scatter_allgather"),
}

_REDUCE: Final[Table] = {
    2: ("rabenseifner", 8, "binary", 16, "pipeline", 32, "linear", 256 * KiB, "pipeline",
        512 * KiB, "chain", 1 * MiB, "pipeline"),
    4: ("binary", 4 * KiB, "chain", 64 * KiB, "binomial", 256 * KiB, "linear", 512 * KiB,
        "binomial", 1 * MiB, "linear"),
    8: ("binary", 8 * KiB, "binomial"),
    16: ("binary", 4 * KiB, "binomial"),
    32: ("binomial",),
    256: ("binomial", 8 * KiB, "in-order_binary", 16 * KiB, "binomial"),
    512: ("binomial",),
    2048: ("binomial", 512, "in-order_binary", 1 * KiB, "binomial", 8 * KiB,
           "in-order_binary", 16 * KiB, "binomial"),
    4096: ("binomial", 16, "in-order_binary", 32, "binomial", 1 * KiB, "in-order_binary",
           2 * KiB, "binomial", 8 * KiB, "in-order_binary", 16 * KiB, "binomial"),
}
# Only linear and in-order binary keep the operand order.
_REDUCE_NONCOMMUTATIVE: Final[Table] = {
    2: ("in-order_binary", 8, "linear"),
    4: ("linear",),
    8: ("in-order_binary", 1 * KiB, "linear", 8 * KiB, "in-order_binary", 16 * KiB, "linear",
        256 * KiB, "in-order_binary"),
    16: ("in-order_binary",),
    128: ("in-order_binary", 512, "linear", 1 * KiB, "in-order_binary"),
    256: ("in-order_binary",),
}

_REDUCE_SCATTER: Final[Table] = {
    2: ("ring", 64 * KiB, "butterfly", 128 * KiB, "ring"),
    4: ("non-overlapping", 8, "recursive_halving", 256 * KiB, "ring"),
    8: ("recursive_halving", 256 * KiB, "ring"),
    32: ("non-overlapping", 64, "recursive_halving", 2 * KiB, "butterfly", 512 * KiB, "ring"),
    64: ("non-overlapping", 256, "recursive_halving", 512, "butterfly", 2 * KiB,
         "recursive_halving", 4 * KiB, "butterfly"),
    128: ("non-overlapping", 256, "recursive_halving", 512, "butterfly"),
    256: ("non-overlapping", 256, "recursive_halving", 1 * KiB, "butterfly"),
    512: ("non-overlapping", 512, "recursive_halving", 2 * KiB, "butterfly", 8 * KiB,
          "recursive_halving", 16 * KiB, "butterfly"),
    1024: ("non-overlapping", 512, "recursive_halving", 4 * KiB, "butterfly", 16 * KiB,
           "recursive_halving", 32 * KiB, "butterfly"),
    2048: ("non-overlapping", 512, "recursive_halving", 4 * KiB, "butterfly"),
    4096: ("non-overlapping", 1 * KiB, "recursive_halving", 8 * KiB, "butterfly"),
}
_REDUCE_SCATTER_NONCOMMUTATIVE: Final[Table] = {2: ("non-overlapping",)}

_REDUCE_SCATTER_BLOCK: Final[Table] = {
    2: ("recursive_doubling", 4, "butterfly", 8, "recursive_halving", 16, "butterfly", 128,
        "recursive_halving", 256, "butterfly", 4 * KiB, "recursive_halving", 8 * KiB,
        "butterfly", 128 * KiB, "basic_linear"),
    4: ("recursive_halving", 8, "recursive_doubling", 32, "butterfly", 256,
        "recursive_halving", 8 * KiB, "butterfly", 16 * KiB, "recursive_halving", 1 * MiB,
        "basic_linear"),
    8: ("basic_linear", 4, "recursive_halving", 32, "butterfly", 128, "recursive_halving",
        512 * KiB, "basic_linear", 4 * MiB, "butterfly"),
    16: ("basic_linear", 32, "recursive_halving", 512 * KiB, "basic_linear", 2 * MiB,
         "recursive_halving", 4 * MiB, "butterfly"),
    32: ("recursive_halving", 4, "basic_linear", 16, "butterfly", 64 * KiB, "basic_linear",
         256 * KiB, "butterfly"),
}
_REDUCE_SCATTER_BLOCK_NONCOMMUTATIVE: Final[Table] = {2: ("basic_linear",)}

# Row 2 is P == 2 exactly: row 3 starts at 3.
_ALLGATHER: Final[Table] = {
    2: ("two_proc",),
    3: ("recursive_doubling",),
    32: ("recursive_doubling", 1 * KiB, "neighbor", 64 * KiB, "ring"),
    64: ("recursive_doubling", 512, "neighbor", 64 * KiB, "ring"),
    128: ("recursive_doubling", 512, "neighbor", 128 * KiB, "ring", 512 * KiB, "neighbor",
          1 * MiB, "ring"),
    256: ("recursive_doubling", 32, "bruck", 128, "recursive_doubling", 1 * KiB, "neighbor",
          128 * KiB, "ring", 512 * KiB, "neighbor", 1 * MiB, "ring"),
    512: ("recursive_doubling", 64, "bruck", 256, "recursive_doubling", 2 * KiB, "neighbor"),
    1024: ("recursive_doubling", 4, "bruck", 8, "recursive_doubling", 16, "bruck", 32,
           "recursive_doubling", 256, "bruck", 512, "recursive_doubling", 4 * KiB, "neighbor"),
    2048: ("bruck", 32, "recursive_doubling", 128, "bruck", 512, "recursive_doubling", 4 * KiB,
           "neighbor"),
    4096: ("recursive_doubling", 2, "bruck", 8, "recursive_doubling", 16, "bruck", 512,
           "recursive_doubling", 4 * KiB, "neighbor"),
}

# Row 2 is P == 2 exactly: row 3 starts at 3.
_ALLGATHERV: Final[Table] = {
    2: ("ring", 2 * KiB, "two_proc", 4 * KiB, "ring", 8 * KiB, "two_proc"),
    3: ("default_algorithm", 256, "neighbor", 4 * KiB, "ring", 8 * KiB, "neighbor", 16 * KiB,
        "bruck", 256 * KiB, "neighbor"),
    8: ("default_algorithm", 1 * KiB, "bruck"),
    16: ("default_algorithm", 128, "bruck", 256 * KiB, "ring"),
    32: ("default_algorithm", 256, "bruck", 8 * KiB, "ring"),
    64: ("default_algorithm", 256, "bruck", 4 * KiB, "ring"),
    128: ("bruck", 1 * KiB, "neighbor", 64 * KiB, "ring"),
    256: ("bruck", 1 * KiB, "ring"),
    512: ("bruck", 512, "default_algorithm", 1 * KiB, "bruck", 4 * KiB, "neighbor", 1 * MiB,
          "ring"),
    1024: ("bruck", 4 * KiB, "neighbor"),
}

_GATHER: Final[Table] = {
    2: ("linear_sync", 2, "basic_linear", 4, "binomial", 32 * KiB, "basic_linear", 64 * KiB,
        "binomial", 128 * KiB, "linear_sync"),
    4: ("binomial", 1 * KiB, "basic_linear", 8 * KiB, "binomial", 32 * KiB, "basic_linear",
        256 * KiB, "linear_sync"),
    8: ("binomial",),
    256: ("binomial", 2 * KiB, "basic_linear", 8 * KiB, "binomial"),
    512: ("binomial",),
}

_SCATTER: Final[Table] = {
    2: ("linear_nb", 2, "basic_linear", 128 * KiB, "linear_nb", 256 * KiB, "basic_linear"),
    4: ("binomial", 2 * KiB, "basic_linear", 4 * KiB, "binomial", 8 * KiB, "basic_linear",
        32 * KiB, "linear_nb", 1 * MiB, "basic_linear"),
    8: ("binomial", 16 * KiB, "linear_nb", 1 * MiB, "basic_linear"),
    16: ("binomial", 16 * KiB, "basic_linear", 32 * KiB, "linear_nb"),
    32: ("binomial", 512, "linear_nb", 8 * KiB, "binomial", 16 * KiB, "linear_nb"),
    64: ("binomial", 512, "linear_nb"),
}


@dataclass(frozen=True)
class _Rules:
    """One collective's fixed rules: tables for commutative and non-commutative ops."""

    commutative: Table
    noncommutative: Table | None = None  # None: the op does not matter


# Open MPI 4.1.0 .. 4.1.8 and 5.0.0 .. 5.0.11 share these rules.
_RULES_4_1_TO_5_0: Final[dict[str, _Rules]] = {
    "allgather": _Rules(_ALLGATHER),
    "allgatherv": _Rules(_ALLGATHERV),
    "allreduce": _Rules(_ALLREDUCE, _ALLREDUCE_NONCOMMUTATIVE),
    "alltoall": _Rules(_ALLTOALL),
    "alltoallv": _Rules(_ALLTOALLV),
    "barrier": _Rules(_BARRIER),
    "bcast": _Rules(_BCAST),
    "gather": _Rules(_GATHER),
    "reduce": _Rules(_REDUCE, _REDUCE_NONCOMMUTATIVE),
    "reduce_scatter": _Rules(_REDUCE_SCATTER, _REDUCE_SCATTER_NONCOMMUTATIVE),
    "reduce_scatter_block": _Rules(_REDUCE_SCATTER_BLOCK, _REDUCE_SCATTER_BLOCK_NONCOMMUTATIVE),
    "scatter": _Rules(_SCATTER),
}

# "major.minor" -> rules. Every patch release of a series uses the series' rules.
RULES: Final[dict[str, dict[str, _Rules]]] = {
    "4.1": _RULES_4_1_TO_5_0,
    "5.0": _RULES_4_1_TO_5_0,
}
KNOWN_VERSIONS: Final = tuple(RULES)
COLLECTIVES: Final = tuple(sorted(_RULES_4_1_TO_5_0))

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.\d+)?(?:[a-z]+\d*)?$")


def series(version: str) -> str:
    """'5.0.11' (or 'v5.0.11', '5.0', '5.0.0rc3') -> '5.0', if rules are known for it."""
    m = _VERSION.match(version.strip())
    if not m:
        raise UserError(f"Open MPI version {version!r} is not a version such as 5.0.11; "
                        f"valid: {', '.join(KNOWN_VERSIONS)}")
    key = f"{int(m.group(1))}.{int(m.group(2))}"
    if key not in RULES:
        raise UserError(f"Open MPI {key}: no decision rules known; "
                        f"valid: {', '.join(KNOWN_VERSIONS)}")
    return key


def _rules(version: str, collective: str) -> _Rules:
    table = RULES[series(version)]
    if collective in NO_FIXED_DECISION:
        raise UserError(f"Open MPI {series(version)} {collective}: no fixed decision "
                        f"({NO_FIXED_DECISION[collective]})")
    if collective not in table:
        raise choice_error(f"Open MPI {series(version)} fixed decision", "collective",
                           collective, table)
    return table[collective]


def has_fixed_decision(version: str, collective: str) -> bool:
    """Whether coll/tuned's fixed rules choose this collective's algorithm in this version."""
    return collective in RULES[series(version)]


def _step(steps: Steps, size_bytes: int) -> str:
    chosen = steps[0]
    for i in range(1, len(steps), 2):
        if size_bytes < int(steps[i]):
            break
        chosen = steps[i + 1]
    return str(chosen)


def _row(table: Table, nprocs: int) -> Steps:
    first = min(table)
    return table[max((p for p in table if p <= nprocs), default=first)]


def decide(version: str, collective: str, nprocs: int, size_bytes: int,
           commutative: bool = True) -> Decision:
    """What "default" runs in this Open MPI version (coll/tuned, fixed rules).

    ``size_bytes`` is the decision input of DECISION_INPUT, not OSU's size. Use
    ``decision_bytes`` (or ``decide_osu``) to convert. It is ignored for barrier and
    alltoallv. ``commutative`` matters for allreduce, reduce, reduce_scatter and
    reduce_scatter_block only.
    """
    rules = _rules(version, collective)
    if nprocs < 2:
        raise UserError(f"{collective} on {nprocs} process(es): coll/tuned serves communicators "
                        "of 2 or more processes (coll/self runs 1)")
    if size_bytes < 0:
        raise UserError(f"{collective}: message size {size_bytes} is negative")
    table = rules.commutative if commutative or rules.noncommutative is None \
        else rules.noncommutative
    name = _step(_row(table, nprocs), size_bytes)
    return Decision(ALGORITHMS[collective].index(name) + 1, 0, 0)


def algorithm_name(version: str, collective: str, algorithm_id: int) -> str:
    """The name of a coll/tuned algorithm id, as collbench spells it."""
    _rules(version, collective)
    names = ALGORITHMS[collective]
    name = names[algorithm_id - 1] if 1 <= algorithm_id <= len(names) else ""
    if not name or (series(version) == "4.1" and (collective, name) in _NEW_IN_5_0):
        raise UserError(f"Open MPI {series(version)} {collective}: no algorithm {algorithm_id}")
    return name


def decision_bytes(version: str, collective: str, nprocs: int, size_per_rank: int) -> int:
    """The decision input for collbench's size (OSU's bytes per rank, MPI_CHAR).

    The collbench kernel (like OSU) calls bcast, reduce and allreduce with count = size.
    gather, scatter, allgather and alltoall get blocks of size per rank, and allgatherv and
    alltoallv get equal counts of size. reduce_scatter gets recvcounts that add up to size.
    reduce_scatter_block gets recvcount = size // P. Under the fixed rules that gives:
    reduce_scatter_block: size // P, barrier and alltoallv: 0 (unused), everything else: size.
    """
    _rules(version, collective)
    if collective == "reduce_scatter_block":
        return size_per_rank // nprocs
    if collective in ("barrier", "alltoallv"):
        return 0
    return size_per_rank


def decide_osu(version: str, collective: str, nprocs: int, size_per_rank: int,
               commutative: bool = True) -> Decision:
    """``decide`` for collbench's size (OSU's bytes per rank, as the kernel calls the MPI)."""
    return decide(version, collective, nprocs,
                  decision_bytes(version, collective, nprocs, size_per_rank), commutative)


def thresholds(version: str, collective: str, nprocs: int,
               commutative: bool = True) -> tuple[int, ...]:
    """The sizes (decision input, bytes) where the choice changes at this P, ascending."""
    rules = _rules(version, collective)
    table = rules.commutative if commutative or rules.noncommutative is None \
        else rules.noncommutative
    return tuple(int(s) for s in _row(table, nprocs)[1::2])
