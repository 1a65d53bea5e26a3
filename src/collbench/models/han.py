"""Open MPI 5.0's coll/han hierarchy as a model: "default" on 2 or more nodes.

han (coll_han_<collective>.c, v5.0.x) splits the communicator into a low communicator per
node and an up communicator of one leader per node, and runs coll/tuned's fixed decisions
(and libnbc's, for its non-blocking up-level calls) on them: `han_plan.han_plan`
says which calls run where. Here each call is costed with the per-algorithm models
(models.algorithms) on its own sub-communicator's placement, and the calls are composed
as han issues them:

- one segment (or an unsegmented collective): the calls run one after the other;
- bcast, reduce and allreduce split the buffer into 64 KiB segments and pipeline them:
  segment i of a stage overlaps segment i+1 of the stage before, so with stage times
  s_1..s_k per segment and n segments, T = s_1 + ... + s_k + (n - 1) max(s_k); bcast's
  first segment goes up with a blocking bcast instead of libnbc's ibcast.

A stage's time is its slowest rank's (the next stage waits for it); the prediction's
average and fastest rank differ from the slowest by the last stage's spread. Not modelled:
the last segment being shorter than the others, the overlap of the two up-level calls of
allreduce (they are taken as one stage each) and han's local copies (gather, allgather).
"""

from __future__ import annotations

from collections.abc import Callable

from collbench.catalog.han_plan import INTER, HanPlan, SubCall
from collbench.models.topology import Topology

# (call, its sub-communicator's placement) -> (avg, min, max) µs over its ranks
Cost = Callable[[SubCall, Topology], tuple[float, float, float]]


def sub_topologies(topo: Topology) -> tuple[Topology, Topology]:
    """(low: the ranks of the first node, up: one leader per node), seated as `topo` seats
    them: a node's ranks fill its cores in order (by socket under --map-by socket)."""
    ppn = sum(1 for p in topo.places if p.node == topo.places[0].node)
    nodes = len({p.node for p in topo.places})
    cores = topo.cores or -(-ppn // topo.sockets)
    low = Topology(ppn, 1, ppn, topo.sockets, cores,
                   "socket" if topo.mapping == "socket" else "core", topo.sockets_per_package)
    up = Topology(nodes, nodes, 1, topo.sockets, cores, "node")
    return low, up


def compose(plan: HanPlan, topo: Topology, cost: Cost) -> tuple[float, float, float]:
    """(avg over ranks, min, max) µs of han's plan on `topo` (module docstring)."""
    low, up = sub_topologies(topo)

    def one(call: SubCall) -> tuple[float, float, float]:
        return cost(call, up if call.level == INTER else low)

    stages = [one(s) for s in plan.stages]
    if not stages:
        return 0.0, 0.0, 0.0
    slowest = [s[2] for s in stages]
    if plan.first is not None:
        head = one(plan.first)[2]
        body = head + sum(slowest[1:]) if plan.segments == 1 else \
            head + sum(slowest[1:]) + (plan.segments - 1) * max(slowest)
    else:
        body = sum(slowest) + (plan.segments - 1) * max(slowest)
    last = stages[-1]
    if plan.first is not None and plan.segments == 1 and len(stages) == 1:
        last = one(plan.first)
    before = body - last[2]
    return before + last[0], before + last[1], body
