"""Where ranks sit: nodes × sockets × cores, filled as Open MPI's `--map-by` fills them.

- core:   rank r goes to the next free core: a socket fills before the next socket, a node
          (up to ppn ranks) before the next node (block placement);
- socket: within a node, ranks round-robin over its sockets (rank 0 socket 0, rank 1 socket
          1, ...), each socket's cores in order; the next node once ppn ranks sit on this one;
- node:   ranks round-robin over the nodes (rank r on node r mod nodes, skipping full nodes);
          on each node, cores in order.

The level of a pair of ranks is where their messages travel:
core = same socket (shared cache/memory), socket = same node other socket, node = other node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from collbench.errors import UserError

LEVELS: Final = ("core", "socket", "node")
MAPPINGS: Final = ("core", "socket", "node")


@dataclass(frozen=True)
class Place:
    """One rank's seat: node index, socket within the node, core within the socket."""

    node: int
    socket: int
    core: int


@dataclass(frozen=True)
class Topology:
    """nprocs ranks on `nodes` nodes with at most `ppn` ranks each, mapped by `mapping`."""

    nprocs: int
    nodes: int = 1
    ppn: int | None = None  # None: nprocs / nodes rounded up
    sockets: int = 1  # per node
    cores: int | None = None  # per socket; None: enough for ppn
    mapping: str = "core"
    # Sockets per package (processor), consecutive; None: one package. Only the cost of a
    # message looks at packages (link_level); its level stays "socket" (explain, monitoring).
    sockets_per_package: int | None = None
    places: tuple[Place, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("nprocs", "nodes", "sockets"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"topology: {name}: {value!r} is not valid; valid: an "
                                "integer >= 1")
        if self.mapping not in MAPPINGS:
            raise UserError(f"topology: mapping: {self.mapping!r} is not valid; valid: "
                            f"{', '.join(MAPPINGS)}")
        ppn = self.ppn if self.ppn is not None else -(-self.nprocs // self.nodes)
        if not isinstance(ppn, int) or isinstance(ppn, bool) or ppn < 1:
            raise UserError(f"topology: ppn: {self.ppn!r} is not valid; valid: an integer >= 1")
        cores = self.cores if self.cores is not None else -(-ppn // self.sockets)
        if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
            raise UserError(f"topology: cores: {self.cores!r} is not valid; valid: an "
                            "integer >= 1 (cores per socket)")
        if ppn > self.sockets * cores:
            raise UserError(f"topology: ppn: {ppn} exceeds {self.sockets} sockets × {cores} "
                            f"cores per node; valid: 1-{self.sockets * cores}")
        if self.nprocs > self.nodes * ppn:
            raise UserError(f"topology: nprocs: {self.nprocs} exceeds {self.nodes} nodes × "
                            f"{ppn} ppn; valid: 1-{self.nodes * ppn}")
        object.__setattr__(self, "ppn", ppn)
        object.__setattr__(self, "cores", cores)
        object.__setattr__(self, "places", tuple(_place_all(
            self.nprocs, self.nodes, ppn, self.sockets, cores, self.mapping)))

    def place(self, rank: int) -> Place:
        return self.places[rank]

    def level(self, a: int, b: int) -> str:
        """core (same socket), socket (same node, other socket) or node (other node)."""
        pa, pb = self.places[a], self.places[b]
        if pa.node != pb.node:
            return "node"
        return "core" if pa.socket == pb.socket else "socket"

    def link_level(self, a: int, b: int) -> str:
        """The level whose p2p model prices a message from a to b: level(), except "package"
        for two sockets of one node in different packages (P2PModel.level falls back to
        "socket" when a model has no package level)."""
        level, per = self.level(a, b), self.sockets_per_package
        if level == "socket" and per and \
                self.places[a].socket // per != self.places[b].socket // per:
            return "package"
        return level

    def levels_used(self) -> set[str]:
        """The levels at least one pair of ranks talks over."""
        out: set[str] = set()
        if len({p.node for p in self.places}) > 1:
            out.add("node")
        per_node: dict[int, set[int]] = {}
        per_socket: dict[tuple[int, int], int] = {}
        for p in self.places:
            per_node.setdefault(p.node, set()).add(p.socket)
            per_socket[(p.node, p.socket)] = per_socket.get((p.node, p.socket), 0) + 1
        if any(len(s) > 1 for s in per_node.values()):
            out.add("socket")
        if any(n > 1 for n in per_socket.values()):
            out.add("core")
        return out


def _place_all(nprocs: int, nodes: int, ppn: int, sockets: int, cores: int,
               mapping: str) -> list[Place]:
    # Fill order of the seats of one node: socket-major (core mapping, node mapping) or
    # round-robin over sockets (socket mapping); only the first ppn seats are used.
    if mapping == "socket":
        seats = [(s, c) for c in range(cores) for s in range(sockets)]
    else:
        seats = [(s, c) for s in range(sockets) for c in range(cores)]
    used = [0] * nodes
    out: list[Place] = []
    node = 0
    for r in range(nprocs):
        if mapping == "node":
            node = r % nodes
            while used[node] >= ppn:  # a full node is skipped
                node = (node + 1) % nodes
        else:
            while used[node] >= ppn:
                node += 1
        socket, core = seats[used[node]]
        used[node] += 1
        out.append(Place(node, socket, core))
    return out
