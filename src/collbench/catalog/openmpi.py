"""Open MPI coll/tuned algorithms, read from `ompi_info` (with a fallback table)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

from collbench.catalog.algorithms import Algorithm
from collbench.catalog.ompi_info import listing

# Open MPI 5.0.11 (`ompi_info --param coll tuned --level 9`), used when ompi_info fails.
FALLBACK_5_0: Final[dict[str, tuple[str, ...]]] = {
    "allgather": ("linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc",
                  "sparbit"),
    "allgatherv": ("default_algorithm", "bruck", "ring", "neighbor", "two_proc", "sparbit"),
    "allreduce": ("basic_linear", "nonoverlapping", "recursive_doubling", "ring",
                  "segmented_ring", "rabenseifner"),
    "alltoall": ("linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"),
    "alltoallv": ("basic_linear", "pairwise"),
    "barrier": ("linear", "double_ring", "recursive_doubling", "bruck", "two_proc", "tree"),
    "bcast": ("basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree",
              "binomial", "knomial", "scatter_allgather", "scatter_allgather_ring"),
    "gather": ("basic_linear", "binomial", "linear_sync"),
    "reduce": ("linear", "chain", "pipeline", "binary", "binomial", "in-order_binary",
               "rabenseifner"),
    "reduce_scatter": ("non-overlapping", "recursive_halving", "ring", "butterfly"),
    "reduce_scatter_block": ("basic_linear", "recursive_doubling", "recursive_halving",
                             "butterfly"),
    "scatter": ("basic_linear", "binomial", "linear_nb"),
}

# Tunables that coll/tuned reads for a forced algorithm (see research/tuning.md).
SEGMENTED: Final = {"bcast", "reduce", "allreduce", "alltoall", "allgather", "gather"}

_PREFIX = r"^mca:coll:tuned:param:coll_tuned_(\w+?)_algorithm"
_ENUM = re.compile(_PREFIX + r":enumerator:value:(\d+):(\S+)$")
_STATUS = re.compile(_PREFIX + r":status:(\S+)$")


def _unclash(name: str) -> str:
    # allgatherv's algorithm 1 is called "default", which collbench reserves for "the MPI's
    # own choice" (id 0); keep the two apart.
    return "default_algorithm" if name == "default" else name


def parse_ompi_info(text: str) -> dict[str, tuple[Algorithm, ...]]:
    """Algorithms per collective from `ompi_info --param coll tuned --level 9 --parsable`."""
    names: dict[str, dict[int, str]] = {}
    writable: dict[str, bool] = {}
    for line in text.splitlines():
        if not line.lstrip().startswith("mca:coll:tuned:"):  # most of an --all listing
            continue
        if m := _ENUM.match(line.strip()):
            coll, ident, name = m.group(1), int(m.group(2)), m.group(3)
            if ident > 0:
                names.setdefault(coll, {})[ident] = _unclash(name)
        elif m := _STATUS.match(line.strip()):
            writable[m.group(1)] = m.group(2) == "writeable"
    return {
        coll: tuple(
            Algorithm(coll, name, ident, writable.get(coll, False), coll in SEGMENTED)
            for ident, name in sorted(ids.items())
        )
        for coll, ids in sorted(names.items())
    }


def fallback() -> dict[str, tuple[Algorithm, ...]]:
    return {
        coll: tuple(Algorithm(coll, n, i + 1, coll != "allgatherv", coll in SEGMENTED)
                    for i, n in enumerate(names))
        for coll, names in FALLBACK_5_0.items()
    }


def query(ompi_info: Path) -> tuple[dict[str, tuple[Algorithm, ...]], str]:
    """(algorithms, source) — source says whether ompi_info or the fallback table spoke."""
    run = listing(ompi_info)
    parsed = parse_ompi_info(run.text)
    if parsed:
        return parsed, " ".join(run.argv)
    return fallback(), "built-in table for Open MPI 5.0"


# --- coll/libnbc: the non-blocking collectives ------------------------------------------
# Open MPI 5.0.11 (`ompi_info --param coll libnbc --level 9`), used when ompi_info fails.
# libnbc has algorithm choices for these four only (iexscan and iscan too, which collbench
# does not measure); the other non-blocking collectives run libnbc's one algorithm.
LIBNBC_FALLBACK_5_0: Final[dict[str, tuple[str, ...]]] = {
    "iallgather": ("linear", "recursive_doubling"),
    "iallreduce": ("ring", "binomial", "rabenseifner", "recursive_doubling"),
    "ibcast": ("linear", "binomial", "chain", "knomial"),
    "ireduce": ("chain", "binomial", "rabenseifner"),
}
_NBC_PREFIX = r"^mca:coll:libnbc:param:coll_libnbc_(\w+?)_algorithm"
_NBC_ENUM = re.compile(_NBC_PREFIX + r":enumerator:value:(\d+):(\S+)$")
_NBC_STATUS = re.compile(_NBC_PREFIX + r":status:(\S+)$")


def libnbc_mca(collective: str) -> str:
    """The MCA parameter (and MPI_T control variable) forcing a libnbc algorithm."""
    return f"coll_libnbc_{collective}_algorithm"


def parse_libnbc(text: str) -> dict[str, tuple[Algorithm, ...]]:
    """libnbc's algorithms per non-blocking collective, from `ompi_info --param coll libnbc
    --level 9 --parsable`. No segment size or fanout: libnbc reads neither for a forced
    algorithm (ibcast's k-nomial radix is its own MCA parameter,
    coll_libnbc_ibcast_knomial_radix, read-only through MPI_T: sweep it under [mca])."""
    from collbench.catalog.collectives import NONBLOCKING

    names: dict[str, dict[int, str]] = {}
    writable: dict[str, bool] = {}
    for line in text.splitlines():
        if not line.lstrip().startswith("mca:coll:libnbc:"):
            continue
        if m := _NBC_ENUM.match(line.strip()):
            coll, ident, name = m.group(1), int(m.group(2)), m.group(3)
            if ident > 0 and coll in NONBLOCKING:
                names.setdefault(coll, {})[ident] = _unclash(name)
        elif m := _NBC_STATUS.match(line.strip()):
            writable[m.group(1)] = m.group(2) == "writeable"
    return {
        coll: tuple(Algorithm(coll, name, ident, writable.get(coll, False), False)
                    for ident, name in sorted(ids.items()))
        for coll, ids in sorted(names.items())
    }


def libnbc_fallback() -> dict[str, tuple[Algorithm, ...]]:
    return {coll: tuple(Algorithm(coll, n, i + 1, True, False) for i, n in enumerate(names))
            for coll, names in LIBNBC_FALLBACK_5_0.items()}


def query_libnbc(ompi_info: Path) -> tuple[dict[str, tuple[Algorithm, ...]], str]:
    """(libnbc algorithms, source), as `query` for coll/tuned."""
    run = listing(ompi_info)
    parsed = parse_libnbc(run.text)
    if parsed:
        return parsed, " ".join(run.argv)
    return libnbc_fallback(), "built-in libnbc table for Open MPI 5.0"


# --- coll/han's own algorithms (Open MPI 5.0: coll_han_use_<coll>_algorithm) --------------
# Open MPI 5.0.11 (`ompi_info --param coll han --level 9`), used when ompi_info fails; 4.1
# has no such parameter (han's levels only: coll_han_<coll>_low_module, _up_module).
HAN_FALLBACK_5_0: Final[dict[str, tuple[str, ...]]] = {
    "allgather": ("intra", "simple"), "allreduce": ("intra", "simple", "reproducible"),
    "barrier": ("simple",), "bcast": ("intra", "simple"), "gather": ("intra", "simple"),
    "reduce": ("intra", "simple", "reproducible"), "scatter": ("intra", "simple"),
}
_HAN_ENUM = re.compile(r"^mca:coll:han:param:coll_han_use_(\w+?)_algorithm"
                       r":enumerator:value:(\d+):(\S+)$")


def han_mca(collective: str) -> str:
    """The MCA parameter choosing coll/han's algorithm (read once, at MPI_Init)."""
    return f"coll_han_use_{collective}_algorithm"


def parse_han(text: str) -> dict[str, tuple[Algorithm, ...]]:
    """coll/han's algorithms per collective (not its default, id 0), from an `ompi_info
    --param coll han --level 9 --parsable` listing. Set for the whole launch (MPI_T cannot
    reach han's component variables once han has set up a communicator); the segment
    size where han reads one (coll_han_<coll>_segsize: bcast, reduce, allreduce)."""
    from collbench.catalog.components import HAN_SEGMENTED

    names: dict[str, dict[int, str]] = {}
    for line in text.splitlines():
        if m := _HAN_ENUM.match(line.strip()):
            coll, ident, name = m.group(1), int(m.group(2)), m.group(3)
            if ident > 0:
                names.setdefault(coll, {})[ident] = name
    return {coll: tuple(Algorithm(coll, name, ident, False,
                                  coll in HAN_SEGMENTED and name == "intra")
                        for ident, name in sorted(ids.items()))
            for coll, ids in sorted(names.items())}


def han_fallback() -> dict[str, tuple[Algorithm, ...]]:
    from collbench.catalog.components import HAN_SEGMENTED

    return {coll: tuple(Algorithm(coll, n, i + 1, False, coll in HAN_SEGMENTED and n == "intra")
                        for i, n in enumerate(names))
            for coll, names in HAN_FALLBACK_5_0.items()}


def query_han(ompi_info: Path, version: str) -> dict[str, tuple[Algorithm, ...]]:
    """coll/han's algorithms of this Open MPI: ompi_info's, the 5.0 table when it cannot
    say, none before 5.0 (4.1's han has no algorithm choice)."""
    parsed = parse_han(listing(ompi_info).text)
    if parsed:
        return parsed
    return han_fallback() if version.split(".")[0].isdigit() and \
        int(version.split(".")[0]) >= 5 else {}
