"""A Selection as an Intel MPI JSON tuning file (read through `I_MPI_TUNING=<file>`).

The format is the tree Intel's mpitune writes (Developer Guide, "MPI Tuning"):

    {"coll=Bcast": {"ppn=2": {"comm_size=2": {"comm_id=-1": {
        "msg_size=16": {"BCAST=1": {}}, "msg_size=-1": {"BCAST=12": {}}}}}}}

How 2021.18.1 reads it, found by experiment (a preset that cannot run at 2 ranks aborts the
job under I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK=1, so which preset the file chose shows;
tests/tune/test_impi_tuning.py): at each level (ppn, comm_size, msg_size) the first key in
file order whose value is at least the call's applies, -1 matches anything, and when no key
does, the last one applies. msg_size is the message in bytes (count x type size: 16 B takes
"msg_size=16", 17 B the next key), also for allreduce. So collbench writes every level
ascending, with -1 last.

A file never says 0 where the default won: under I_MPI_TUNING, 0 is Intel MPI's generic
choice, not its tuned default, so tune/impi_standin.py first replaces those ranges with the
preset that runs what the default runs (by trace).

Only one node is written: a Selection holds what was measured per process count, and on one
node ppn is the process count.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.impi import FALLBACK_VAR, PRESET, TUNING_VAR
from collbench.errors import UserError
from collbench.tune.select import Choice, Selection

# Intel's names in the file (MPI_<Name> without the prefix), verified for Bcast and
# Allreduce by experiment; the others follow the same spelling.
COLL_NAMES: Final = {
    "allgather": "Allgather", "allgatherv": "Allgatherv", "allreduce": "Allreduce",
    "alltoall": "Alltoall", "alltoallv": "Alltoallv", "barrier": "Barrier",
    "bcast": "Bcast", "gather": "Gather", "gatherv": "Gatherv", "reduce": "Reduce",
    "reduce_scatter": "Reduce_scatter", "reduce_scatter_block": "Reduce_scatter_block",
    "scatter": "Scatter", "scatterv": "Scatterv"}
ANY: Final = -1
DEFAULT_ID: Final = 0  # I_MPI_ADJUST_<COLL>=0; in a file, Intel's generic choice


@dataclass(frozen=True)
class WrittenJson:
    text: str
    tuned: tuple[str, ...]  # collectives the file decides
    notes: tuple[str, ...]


def preset_id(choice: Choice) -> int:
    """`preset12` -> 12; default -> 0 (Intel's own choice as a variable; in a file, its
    generic choice, so build never writes it)."""
    if choice.algorithm == DEFAULT:
        return DEFAULT_ID
    if choice.algorithm_id is not None and choice.algorithm_id > 0:
        return choice.algorithm_id
    text = choice.algorithm.removeprefix(PRESET)
    if not text.isdigit():
        raise UserError(f"tune --impi: {choice.algorithm!r} is not an Intel MPI preset; "
                        "valid: default, preset1, preset2, ...")
    return int(text)


def _msg_sizes(coll: str, choices: Sequence[Choice]) -> dict[str, Any]:
    """Choices (each from its threshold up) as Intel's upper bounds: a choice covers up to
    the next one's threshold - 1; the last covers the rest (-1)."""
    var = coll.upper()
    out: dict[str, Any] = {}
    for here, nxt in zip(choices, [*choices[1:], None], strict=True):
        bound = ANY if nxt is None else nxt.threshold - 1
        if bound == ANY or bound >= 0:
            out[f"msg_size={bound}"] = {f"{var}={preset_id(here)}": {}}
    return out


def build(selection: Selection, source: str) -> WrittenJson:
    if selection.mpi != "impi":
        raise UserError(f"tune --impi: {source} measured {selection.mpi} "
                        f"{selection.mpi_version}; valid: a results folder of Intel MPI")
    tree: dict[str, Any] = {}
    notes: list[str] = []
    by_coll: dict[str, list[tuple[int, tuple[Choice, ...]]]] = {}
    for (coll, nprocs), choices in sorted(selection.tables.items()):
        if coll not in COLL_NAMES:
            notes.append(f"{coll}: Intel MPI's tuning file has no entry for it; left out")
            continue
        by_coll.setdefault(coll, []).append((nprocs, choices))
    for coll, tables in by_coll.items():
        if all(c.algorithm == DEFAULT for _, cs in tables for c in cs):
            continue  # nothing to change: Intel's own tuning stays in charge
        kept = next(((n, c.threshold) for n, cs in tables for c in cs
                     if c.algorithm == DEFAULT), None)
        if kept is not None:
            # rules verify --impi, 2021.18.1: bcast 8 KiB at 2 ranks runs binomial under a
            # file's 0, scatter + recursive doubling without the file
            raise UserError(f"tune --impi: {coll} np={kept[0]} from {kept[1]} B keeps Intel "
                            "MPI's default, which a file cannot name (its 0 is Intel's "
                            "generic choice, not its tuned default); valid: a selection "
                            "resolved by tune.impi_standin.resolve (the preset that runs "
                            "what the default runs)")
        comm: dict[str, Any] = {}
        for i, (nprocs, choices) in enumerate(tables):
            key = ANY if i == len(tables) - 1 else nprocs
            comm[f"comm_size={key}"] = {"comm_id=-1": _msg_sizes(coll, choices)}
        ppn = {f"ppn={ANY}": comm}
        tree[f"coll={COLL_NAMES[coll]}"] = ppn
    return WrittenJson(json.dumps(tree, indent=1) + "\n", tuple(
        c for c in COLL_NAMES if f"coll={COLL_NAMES[c]}" in tree), tuple(notes))


def activation(path: Path) -> list[tuple[str, str]]:
    """What a job sets to run the file."""
    return [(TUNING_VAR, str(path.resolve()))]


def proof_env(path: Path) -> list[tuple[str, str]]:
    """The file, and the switch that makes a chosen preset that cannot run fail loudly."""
    return [*activation(path), (FALLBACK_VAR, "1")]
