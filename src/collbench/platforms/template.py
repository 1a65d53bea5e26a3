"""`collbench platform new`: a commented cluster description to fill in, and its writer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collbench.platforms.model import PLATFORM_LEVELS, Cluster


@dataclass(frozen=True)
class Shape:
    name: str = "mycluster"
    nodes: int = 2
    sockets: int = 2
    cores: int = 12
    topology: str = "flat"
    nodes_per_leaf: int = 16
    sockets_per_package: int | None = None  # None: one package per node


# Per-level numbers of the template: ORFEO THIN's published ping-pongs (a real cluster's
# order of magnitude), to be replaced by `collbench platform calibrate` or your own.
_LEVELS = {"intra_socket": (0.22, 6450.0), "inter_socket": (0.54, 5680.0),
           "inter_node": (1.07, 12176.0)}

_HEADER = """\
# collbench cluster description: what `collbench run --backend simgrid --platform FILE`
# simulates. Check it with `collbench platform show FILE`; see docs/simgrid.md.
#
# Per-level numbers are what a two-rank ping-pong measures at that level (osu_latency's
# one-way latency in µs, bandwidth in MB/s = 1e6 bytes/s). Fill them from measurements:
#   collbench run probe.toml -o results/probe      # latency at map_by core/socket/node
#   collbench platform calibrate results/probe -o {name}.toml --from {name}.toml
"""


def _fmt(value: Any, exact: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        return _float(value, exact)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_fmt(v, exact) for v in value) + "]"
    return str(value)


def new_template(shape: Shape) -> str:
    """A commented description that `parse_cluster` accepts as it is."""
    lat = {k: v[0] for k, v in _LEVELS.items()}
    bw = {k: v[1] for k, v in _LEVELS.items()}
    c = "" if shape.topology == "fat-tree" else "# "  # fat-tree keys commented out if flat
    return _HEADER.format(name=shape.name) + f"""
name = "{shape.name}"
description = "{shape.nodes} nodes x {shape.sockets} sockets x {shape.cores} cores"
source = "template numbers (ORFEO THIN's published ping-pongs): replace with yours"
nodes = {shape.nodes}
sockets_per_node = {shape.sockets}
cores_per_socket = {shape.cores}
{_packages(shape)}
# `collbench platform calibrate` also writes, per level, size-dependent corrections
# lat_factor / bw_factor = [[from_bytes, factor], ...] (latency × lat_factor, bandwidth ×
# bw_factor for messages of at least from_bytes) so the simulated ping-pong follows the
# measured one where a straight latency + size / bandwidth line does not; with
# --load-barrier, load_latency_us = [[busy_cores, extra_us], ...] on inter_socket: the
# latency a message gains when that many cores of the node run a rank (a collective's
# load, which a ping-pong's two cores cannot show; docs/simgrid.md, "Load").

[levels.intra_socket]   # two ranks on one socket (mpirun --map-by core, 2 ranks)
latency_us = {lat['intra_socket']}
bandwidth_mbs = {bw['intra_socket']:g}

[levels.inter_socket]   # two sockets of one node (--map-by socket, 2 ranks)
latency_us = {lat['inter_socket']}
bandwidth_mbs = {bw['inter_socket']:g}

[levels.inter_node]     # two nodes (--map-by node, 2 ranks)
latency_us = {lat['inter_node']}
bandwidth_mbs = {bw['inter_node']:g}

[topology]
# "flat": every node on one switch; "fat-tree": leaf switches under one spine
kind = "{shape.topology}"
{c}nodes_per_leaf = {shape.nodes_per_leaf}  # fat-tree: nodes under one leaf switch
{c}oversubscription = 1.0  # fat-tree: leaf down/up bandwidth (1 = full bisection)
{c}hop_latency_us = 0.1    # fat-tree: added per leaf-spine hop, each way

[smpi]
# Messages below eager_threshold go without waiting for their receive (MPI's eager limit,
# e.g. 8192); 0 = SMPI's default. Above 0, SMPI 3.32 can deadlock on algorithms that send
# one peer messages on both sides of the threshold (docs/simgrid.md).
eager_threshold = 0
cfg = []                # more SimGrid options for this platform, "key:value"
"""


def _packages(shape: Shape) -> str:
    """The package key and level, when the node's sockets are grouped into packages."""
    if shape.sockets_per_package is None:
        return ""
    xs_lat, xs_bw = _LEVELS["inter_socket"]
    return f"""sockets_per_package = {shape.sockets_per_package}  # consecutive sockets per package

[levels.inter_package]  # two sockets in different packages of one node (--map-by package)
latency_us = {xs_lat}
bandwidth_mbs = {xs_bw:g}
"""


def cluster_toml(cluster: Cluster, header: str = "",
                 calibration: Mapping[str, Any] | None = None, exact: bool = False) -> str:
    """A description as TOML (used by calibrate), comments in `header` kept on top;
    `exact`: every float as Python spells it (it reads back bit for bit), not six digits."""
    out = [header.rstrip(), ""] if header else []
    for key in ("name", "description", "source", "nodes", "sockets_per_node",
                "cores_per_socket", "sockets_per_package"):
        if getattr(cluster, key) is not None:
            out.append(f"{key} = {_fmt(getattr(cluster, key), exact)}")
    for level in PLATFORM_LEVELS:
        lv = cluster.level(level)
        if lv is not None:
            out += ["", f"[levels.{level}]", f"latency_us = {_float(lv.latency_us, exact)}",
                    f"bandwidth_mbs = {_float(lv.bandwidth_mbs, exact)}"]
            if lv.calibrated():
                out += [f"lat_factor = {_pairs(lv.lat_factor, exact)}",
                        f"bw_factor = {_pairs(lv.bw_factor, exact)}"]
            if lv.overheads():
                out += [f"send_overhead_us = {_float(lv.send_overhead_us, exact)}",
                        f"recv_overhead_us = {_float(lv.recv_overhead_us, exact)}"]
            if lv.overhead_per_size:
                out.append("overhead_per_size = [" + ", ".join(
                    f"[{b}, {_float(s, exact)}, {_float(r, exact)}]"
                    for b, s, r in lv.overhead_per_size) + "]")
            if lv.load_latency_us:
                out.append("load_latency_us = [" + ", ".join(
                    f"[{c}, {_float(us, exact)}]" for c, us in lv.load_latency_us) + "]")
    t = cluster.topology
    out += ["", "[topology]", f"kind = {_fmt(t.kind)}"]
    if t.kind == "fat-tree":
        out += [f"nodes_per_leaf = {t.nodes_per_leaf}",
                f"oversubscription = {_fmt(float(t.oversubscription), exact)}",
                f"hop_latency_us = {_fmt(float(t.hop_latency_us), exact)}"]
    s = cluster.smpi
    out += ["", "[smpi]", f"eager_threshold = {s.eager_threshold}",
            *([f"rendezvous_bytes = {s.rendezvous_bytes}"] if s.rendezvous_bytes else []),
            f"cfg = {_fmt(list(s.cfg))}"]
    m = cluster.memory
    if m != type(m)():  # written only when it differs from the default (no sharing terms)
        out += ["", "[memory]", f"receiver_copies = {_fmt(m.receiver_copies)}",
                f"socket_bandwidth_mbs = {_float(m.socket_bandwidth_mbs, exact)}",
                *(["load_bandwidth = true"] if m.load_bandwidth else []),
                *(["send_queue = true"] if m.send_queue else [])]
    cal = dict(calibration or cluster.calibration)
    if cal:
        out += ["", "[calibration]"] + [f"{k} = {_fmt(v, exact)}" for k, v in cal.items()]
    return "\n".join(out) + "\n"


def _float(value: float, exact: bool = False) -> str:
    """Six significant digits (or repr's shortest exact form), always a TOML float (1.0,
    not 1)."""
    text = repr(float(value)) if exact else f"{value:.6g}"
    return text if any(c in text for c in ".en") else text + ".0"


def _pairs(table: list[tuple[int, float]], exact: bool = False) -> str:
    return "[" + ", ".join(f"[{b}, {_float(f, exact)}]" for b, f in table) + "]"
