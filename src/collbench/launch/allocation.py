"""The Slurm allocation collbench runs inside (salloc/sbatch), read from its environment.

Inside an allocation the local backend's mpirun places ranks on the allocation's nodes by
itself (Open MPI's ras/slurm and plm/slurm, MPICH's Hydra bootstrap): collbench adds no
host options that would fight that; it only needs the node list (provenance) and the
slots per node (to plan oversubscription and to record how many nodes a launch used).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collbench.plan import Launch


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list ("n[1-3,07],gpu01") as names, in order."""
    hosts: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text + ","):
        depth += {"[": 1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:  # commas inside brackets separate ranges, not hosts
            part = text[start:i].strip()
            hosts.extend(_expand_one(part) if part else [])
            start = i + 1
    return hosts


def _expand_one(pattern: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", pattern)
    if m is None:
        return [pattern]
    head, tail = pattern[:m.start()], pattern[m.end():]
    out = []
    for item in m.group(1).split(","):
        lo, _, hi = item.partition("-")
        if not hi:
            out += [head + lo + rest for rest in _expand_one(tail)]
            continue
        width = len(lo)  # zero padding is kept: n[01-03] -> n01 n02 n03
        for i in range(int(lo), int(hi) + 1):
            out += [f"{head}{i:0{width}d}{rest}" for rest in _expand_one(tail)]
    return out


def expand_counts(text: str) -> list[int]:
    """SLURM_TASKS_PER_NODE / SLURM_JOB_CPUS_PER_NODE ("2(x3),1") as one count per node."""
    counts: list[int] = []
    for item in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", item)
        if m:
            counts += [int(m.group(1))] * int(m.group(2) or 1)
    return counts


@dataclass(frozen=True)
class Allocation:
    job_id: str
    nodes: tuple[str, ...]
    slots: tuple[int, ...]  # tasks (else CPUs) Slurm gave each node, as mpirun counts slots

    @property
    def total_slots(self) -> int:
        return sum(self.slots)

    def nodes_used(self, nprocs: int, mapping: str) -> int:
        """How many of the nodes mpirun puts `nprocs` ranks on: round-robin for
        --map-by node, else filling each node's slots in order."""
        if not self.nodes:
            return 1
        if mapping.split(":")[0] == "node":
            return max(1, min(len(self.nodes), nprocs))
        filled = 0
        for used, slots in enumerate(self.slots, start=1):
            filled += slots
            if filled >= nprocs:
                return used
        return len(self.nodes)


def current(environ: Mapping[str, str] | None = None) -> Allocation | None:
    """The allocation this process runs in (SLURM_JOB_ID set), else None."""
    env = os.environ if environ is None else environ
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    nodes = tuple(expand_hostlist(env.get("SLURM_JOB_NODELIST", env.get("SLURM_NODELIST", ""))))
    slots = expand_counts(env.get("SLURM_TASKS_PER_NODE", "")) or expand_counts(
        env.get("SLURM_JOB_CPUS_PER_NODE", ""))
    if len(slots) != len(nodes):
        slots = [1] * len(nodes)
    return Allocation(job, nodes, tuple(slots))


def nodes_for(launch: Launch, alloc: Allocation | None) -> int:
    return 1 if alloc is None else alloc.nodes_used(launch.nprocs, launch.mapping)
