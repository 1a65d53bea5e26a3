"""A platform (platforms.model.Cluster, the file SimGrid runs on) as the models' p2p model:
the same parameters drive `run --backend simgrid` and `model predict --platform`.

The platform is read once, by platforms.model.load_cluster; nothing here parses it. Per
level (intra_socket -> core, inter_socket -> socket, inter_package -> package, inter_node ->
node; a platform without inter_package prices messages between packages as inter_socket):

- network time t(m) = latency_us · lat_factor(m) + m / (bandwidth_mbs · bw_factor(m)): one
  Hockney regime per entry of the factor tables (a table entry applies from its size on,
  as the platform loader looks it up), so a message alone costs what SimGrid charges it;
- per-message CPU overheads (o_s, o_r) by size, interpolated by the platform's own
  Level.overhead_at: the sender spends o_s before a message leaves, the receiver o_r after
  it arrives (what the loader's SMPI cost callbacks charge); with them, a ping-pong is
  o_s + t(m) + o_r, the measured one-way time the platform was calibrated to;
- load_latency_us: the latency a message gains when that many cores of its sender's node
  run a rank (the loader's latency callback; a ping-pong's two cores gain nothing), and
  with [memory] load_bandwidth the factor its bytes take then (Level.slowdown_at);
- [memory]: whether the receiver makes a rendezvous copy (one sender's transfers do not
  queue on its port) and the bandwidth every transfer leaving, or entering, a socket shares
  (models.Sharing).

The machine's shape (sockets per node, cores per socket) comes with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from collbench.models.p2p import LevelModel, P2PModel, Regime, Sharing
from collbench.models.predict import Shape
from collbench.platforms.model import Cluster, Level, load_cluster

# platform level -> the models' level
LEVELS: Final = {"intra_socket": "core", "inter_socket": "socket", "inter_package": "package",
                  "inter_node": "node"}


def _at(table: list[tuple[int, float]], size: int) -> float:
    factor = table[0][1]
    for start, value in table:
        if size < start:
            break
        factor = value
    return factor


def level_model(name: str, level: Level, load_bandwidth: bool = False) -> LevelModel:
    """One level's regimes (one per factor-table entry), overheads and load terms
    (`load_bandwidth`: [memory] load_bandwidth, its bytes slow down with the load too)."""
    starts = sorted({s for s, _ in (*level.lat_factor, *level.bw_factor)})
    regimes = tuple(Regime(s, level.latency_us * _at(level.lat_factor, s),
                           level.bandwidth_mbs * 1e6 * _at(level.bw_factor, s))
                    for s in starts)
    return LevelModel(name, regimes, overheads=level if level.overheads() else None,
                      load=level if level.load_latency_us else None,
                      slow=level if level.load_latency_us and load_bandwidth else None)


def from_cluster(cluster: Cluster, source: str = "") -> tuple[P2PModel, Shape]:
    """The p2p model and machine shape of a platform."""
    memory = cluster.memory
    levels = {LEVELS[name]: level_model(LEVELS[name], lv, memory.load_bandwidth)
              for name in LEVELS if (lv := cluster.level(name)) is not None}
    queue = {LEVELS[name]: cluster.send_queue_mbs(name) for name in LEVELS
             if memory.send_queue and cluster.level(name) is not None}
    card = cluster.levels.inter_node
    sharing = Sharing(memory.receiver_copies, memory.socket_bandwidth_mbs,  # MB/s = B/µs
                      queue, card.bandwidth_mbs if card is not None and cluster.nodes > 1
                      else 0.0)
    return (P2PModel(levels, 0.0, {"origin": "platform", "platform": cluster.name,
                                   **({"file": source} if source else {})}, sharing,
                     cluster.smpi.rendezvous_bytes or None),
            Shape(cluster.sockets_per_node, cluster.cores_per_socket,
                  cluster.sockets_per_package if cluster.packages_per_node > 1 else None))


def read_platform(ref: str | Path) -> tuple[P2PModel, Shape]:
    """from_cluster of a built-in platform name or a platform TOML (one-line errors)."""
    cluster, _, path = load_cluster(ref)
    return from_cluster(cluster, str(path))
