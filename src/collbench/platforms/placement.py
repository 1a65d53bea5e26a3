"""Where ranks land on a simulated cluster: `--map-by core|socket|node` as Open MPI does it.

The allocation is the whole cluster, each rank bound to its own core:
- core:   fill a node core by core (socket 0 first), then the next node;
- socket: within a node, round-robin over its sockets (rank 0 socket 0, rank 1 socket 1,
          ...); the next node once this one is full;
- node:   round-robin over the nodes (rank r on node r mod N); on each node, cores in order.
Ranks on one socket talk through its memory (intra_socket level), across sockets of a node
through the socket link (inter_socket), across nodes through the network (inter_node).
"""

from __future__ import annotations

from typing import Final

from collbench.errors import UserError, did_you_mean
from collbench.platforms.model import Cluster
from collbench.platforms.simgrid_xml import host_id

MAPPINGS: Final = ("core", "socket", "node")
# The placement level a 2-rank ping-pong measures under each mapping.
LEVEL_OF_MAPPING: Final = {"core": "intra_socket", "socket": "inter_socket",
                           "node": "inter_node"}


def check_placement(cluster: Cluster, nprocs: int, mapping: str, where: str) -> None:
    if mapping not in MAPPINGS:
        raise UserError(f"{where}: map_by {mapping!r} is not simulated; valid: "
                        f"{', '.join(MAPPINGS)}{did_you_mean(mapping, MAPPINGS)}")
    if nprocs > cluster.cores:
        raise UserError(f"{where}: nprocs {nprocs} exceeds the {cluster.cores} cores of "
                        f"platform {cluster.name} ({cluster.summary()}); valid: 1-"
                        f"{cluster.cores}")


def place(cluster: Cluster, nprocs: int, mapping: str) -> list[tuple[int, int]]:
    """(node, core within the node) of every rank, in rank order; cores are numbered
    socket by socket (core k is on socket k // cores_per_socket)."""
    check_placement(cluster, nprocs, mapping, "placement")
    per_node, per_socket, sockets = (cluster.cores_per_node, cluster.cores_per_socket,
                                     cluster.sockets_per_node)
    out = []
    for r in range(nprocs):
        if mapping == "node":
            out.append((r % cluster.nodes, r // cluster.nodes))
        elif mapping == "socket":
            node, q = divmod(r, per_node)
            out.append((node, (q % sockets) * per_socket + q // sockets))
        else:
            out.append(divmod(r, per_node))
    return out


def nodes_used(cluster: Cluster, nprocs: int, mapping: str) -> int:
    return len({node for node, _ in place(cluster, nprocs, mapping)})


def hostfile(cluster: Cluster, nprocs: int, mapping: str) -> str:
    """smpirun's hostfile: rank r runs on the host of line r (one core per rank)."""
    return "".join(f"{host_id(node, core)}\n" for node, core in place(cluster, nprocs, mapping))
