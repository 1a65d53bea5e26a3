"""MPICH's collective selection ("csel"): the MPIR table compiled into the library, and
what it picks for a call, walked as MPICH's csel.c does (the first child whose condition
holds). Read by `tune --mpich` (tune/mpich.py, which writes a file from this table) and
by `diff-mpi` (analyse/mpidiff.py, which compares two versions' tables)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from collbench.catalog.collectives import rules_bytes
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError

AVG_SIZE: Final = ("bcast", "reduce", "allreduce")  # csel defines avg_msg_size only for these
MAX_DEPTH: Final = 64  # bound on a csel tree walk (a malformed table cannot loop)


def libraries(mpi: MpiInstall) -> list[Path]:
    libdir = mpi.bindir.parent / "lib"
    return sorted(libdir.glob("libmpi.so*")) + sorted(libdir.glob("libmpich.so*"))


def builtin_table(mpi: MpiInstall) -> tuple[dict[str, Any], set[str]]:
    """(MPICH's compiled-in MPIR csel table, every container name the library knows)."""
    for lib in libraries(mpi):
        try:
            data = lib.read_bytes()
        except OSError:
            continue
        names = {m.group(1).decode() for m in
                 re.finditer(rb"algorithm=(MPIR_\w+)", data)}
        for m in re.finditer(rb'\{"collective=', data):
            end = data.find(b"\0", m.start())
            try:
                table = json.loads(data[m.start():end])
            except ValueError:
                continue
            if b'"algorithm=MPIR_' in data[m.start():end]:
                return table, names
    raise UserError(f"{mpi.bindir.parent}: no MPICH library with a built-in collective "
                    "selection table found (looked at lib/libmpi.so*); the JSON file must "
                    "contain MPICH's defaults, so collbench needs them")


def csel_bytes(coll: str, size: int, nprocs: int) -> int:
    """What csel compares: avg = count*typesize; total: per collective (csel.c)."""
    if coll in AVG_SIZE:
        return size
    if coll == "alltoallv":
        return size * nprocs  # csel sums sendcounts; Open MPI's rules count 0
    return rules_bytes(coll, size, nprocs)


_COND: Final = re.compile(r"^(\w+)(<=|<|=)(\w+)$")


def _holds(key: str, facts: Mapping[str, int | str]) -> bool:
    """One csel condition (csel.c): `comm_size<8`, `avg_msg_size<=12288`, `count<pow2`,
    `comm_size=pow2`, `is_commutative=yes`, `x=any`. An unknown one never holds."""
    m = _COND.match(key)
    if m is None:
        return False
    name, op, value = m.groups()
    if value == "any":
        return True
    fact = facts.get(name)
    if fact is None:
        return False
    if isinstance(fact, str):
        return op == "=" and fact == value
    if value == "pow2":  # `comm_size=pow2`: a power of two; `count<pow2`: below P's pof2
        if op == "=":
            return fact > 0 and fact & (fact - 1) == 0
        n = int(facts["comm_size"])
        return fact < 1 << (n.bit_length() - 1)
    if not value.isdigit():
        return False
    bound = int(value)
    return fact < bound if op == "<" else fact <= bound if op == "<=" else fact == bound


def decide(table: Mapping[str, Any], collective: str, nprocs: int, size: int,
                 nodes: int = 1) -> str:
    """MPIR's default for the kernel's call (MPI_CHAR, MPI_SUM, not in place, ranks packed
    per node). comm_hierarchy is `parent` when the communicator spans nodes with ranks
    sharing one (MPICH then builds node sub-communicators), else it is not."""
    node = table.get(f"collective={collective}")
    if not isinstance(node, dict):
        raise UserError(f"MPICH has no built-in selection for {collective}")
    nbytes = csel_bytes(collective, size, nprocs)
    ppn = -(-nprocs // nodes)
    facts: dict[str, int | str] = {
        "comm_type": "intra", "comm_size": nprocs, "avg_msg_size": nbytes,
        "total_msg_size": nbytes, "count": size, "is_commutative": "yes",
        "is_op_built_in": "yes", "is_sendbuf_inplace": "no", "is_block_regular": "yes",
        "is_node_consecutive": "yes",
        "comm_hierarchy": "parent" if nodes > 1 and ppn > 1 else "flat"}
    for _ in range(MAX_DEPTH):
        for key in node:
            if key.startswith("algorithm="):
                return _short(collective, key.split("=", 1)[1])
        nxt = next((c for k, c in node.items() if isinstance(c, dict) and _holds(k, facts)),
                   None)
        if nxt is None:
            return "?"
        node = nxt
    return "?"


def _short(collective: str, container: str) -> str:
    """MPIR_Bcast_intra_binomial -> binomial (collbench's MPICH names, catalog/mpich.py)."""
    m = re.match(rf"MPIR_{collective.capitalize()}_(?:intra|allcomm)_(\w+)$", container)
    return m.group(1) if m else container
