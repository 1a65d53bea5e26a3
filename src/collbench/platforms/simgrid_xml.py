"""Cluster description -> SimGrid platform XML (DTD 4.1).

One host per core (one rank per core), so the bandwidth one rank can move is limited per
rank, as a real rank's copies or DMA are. Per node, a zone routed by Floyd over one-hop
routes:
- each core has a "mem" link to its socket's router (intra_socket latency / 2 and
  bandwidth, SPLITDUPLEX): two cores of one socket talk over mem + mem; a root that
  receives from every core of its socket shares its own mem link between them;
- each core has a "dma" link to its socket's gateway (inter_socket latency / 2, bandwidth
  = the larger of inter_socket and inter_node): traffic leaving the socket;
- the sockets' gateways are joined by a "bus" (FATPIPE: inter_socket bandwidth per flow)
  and reach the node's network card over a "pcie" link carrying the rest of the
  inter-node latency.
Nodes hang off switch zones: flat = one switch; fat-tree = leaf switches (one per
`nodes_per_leaf` nodes) under a spine. Each node's "nic" link (inter_node bandwidth,
SPLITDUPLEX: the node's flows share it per direction) joins it to its switch; leaves reach
the spine over "up" links (hop_latency_us each, nodes_per_leaf × bandwidth /
oversubscription, shared). So a two-rank ping-pong takes exactly the level's latency and
bandwidth, while concurrent flows contend where they would on the machine.

The <config> block carries the platform's SimGrid options (eager threshold, [smpi] cfg);
`--cfg` options given on the command line take precedence over it. The per-level
size-dependent factors of a calibrated cluster are properties of the top zone, read by
collbench's platform loader (collbench_platform.cpp, see platforms.loader): SMPI's own
smpi/lat-factor and smpi/bw-factor are one table for all levels.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from collbench.platforms.model import LEVELS, Cluster, Level

SMPI_ENVELOPE = 16  # bytes SMPI adds to every message (factors are looked up with them)
DETACHED_DEFAULT = 65536  # SMPI's default smpi/send-is-detached-thresh
_FAST = "1PBps"  # links that only carry latency: never the bottleneck


def _num(x: float) -> str:
    return f"{x:.9g}"


def factor_value(table: list[tuple[int, float]]) -> str:
    """The loader's `from_bytes:factor;...` (payload bytes, as collbench measures them)."""
    return ";".join(f"{b}:{_num(f)}" for b, f in table)


def node_id(node: int) -> str:
    return f"node{node}"


def host_id(node: int, core: int) -> str:
    """The host of core `core` (0-based within the node, socket by socket)."""
    return f"node{node}-c{core}"


def config_items(cluster: Cluster) -> list[tuple[str, str]]:
    """The <config> props, one per key. SimGrid keeps the first of two props with one key,
    so a key the platform's `[smpi] cfg` sets replaces what collbench derives from
    eager_threshold (e.g. its smpi/send-is-detached-thresh) instead of following it."""
    s = cluster.smpi
    items: dict[str, str] = {}
    if s.eager_threshold:
        items["smpi/async-small-thresh"] = str(s.eager_threshold)
        items["smpi/send-is-detached-thresh"] = str(max(s.eager_threshold, DETACHED_DEFAULT))
    for c in s.cfg:
        key, _, value = c.partition(":")
        items[key] = value
    return list(items.items())


def _link(ident: str, bw_mbs: float | str, latency_us: float, policy: str) -> str:
    bw = bw_mbs if isinstance(bw_mbs, str) else f"{_num(bw_mbs)}MBps"
    return (f'<link id="{ident}" bandwidth="{bw}" latency="{_num(latency_us)}us" '
            f'sharing_policy="{policy}"/>')


def _route(src: str, dst: str, link: str, duplex: bool, extra: str = "") -> str:
    direction = ' direction="UP"' if duplex else ""
    more = f'<link_ctn id="{extra}"/>' if extra else ""
    return f'<route src="{src}" dst="{dst}"><link_ctn id="{link}"{direction}/>{more}</route>'


def _node_zone(cluster: Cluster, n: int, out: list[str]) -> None:
    lv, node = cluster.levels, node_id(n)
    sockets, per_socket = cluster.sockets_per_node, cluster.cores_per_socket
    cores = range(cluster.cores_per_node)
    external = sockets > 1 or cluster.nodes > 1
    xs_lat = lv.inter_socket.latency_us if (lv.inter_socket and sockets > 1) else 0.0
    dma_bw = max(level.bandwidth_mbs for level in (lv.inter_socket, lv.inter_node)
                 if level is not None) if external else 0.0
    ind = "    "
    out.append(f'  <zone id="{node}" routing="Floyd">')
    out += [f'{ind}<host id="{host_id(n, k)}" speed="1Gf"/>' for k in cores]
    out += [f'{ind}<router id="{node}-s{j}"/>' for j in range(sockets)]
    if external:
        out += [f'{ind}<router id="{node}-x{j}"/>' for j in range(sockets)]
    if cluster.nodes > 1:
        out.append(f'{ind}<router id="{node}-nic"/>')
    mem = lv.intra_socket
    out += [ind + _link(f"{host_id(n, k)}-mem", mem.bandwidth_mbs, mem.latency_us / 2,
                        "SPLITDUPLEX") for k in cores]
    if external:
        out += [ind + _link(f"{host_id(n, k)}-dma", dma_bw, xs_lat / 2, "SPLITDUPLEX")
                for k in cores]
        # Floyd picks the path with fewest links: this second link keeps two cores of one
        # socket on their mem links rather than through the gateway.
        out.append(ind + _link(f"{node}-port", _FAST, 0, "FATPIPE"))
    if lv.inter_socket is not None and sockets > 1:
        out.append(ind + _link(f"{node}-bus", lv.inter_socket.bandwidth_mbs, 0, "FATPIPE"))
    if lv.inter_node is not None and cluster.nodes > 1:
        rest = max(lv.inter_node.latency_us - xs_lat, 0.0) / 2
        out.append(ind + _link(f"{node}-pcie", _FAST, rest, "FATPIPE"))
    for k in cores:
        j = k // per_socket
        out.append(ind + _route(host_id(n, k), f"{node}-s{j}", f"{host_id(n, k)}-mem", True))
        if external:
            out.append(ind + _route(host_id(n, k), f"{node}-x{j}", f"{host_id(n, k)}-dma",
                                    True, f"{node}-port"))
    if sockets > 1:
        out += [ind + _route(f"{node}-x{j}", f"{node}-x{i}", f"{node}-bus", False)
                for j in range(sockets) for i in range(j + 1, sockets)]
    if cluster.nodes > 1:
        out += [ind + _route(f"{node}-x{j}", f"{node}-nic", f"{node}-pcie", False)
                for j in range(sockets)]
    out.append("  </zone>")


def _switch(ident: str) -> str:
    return f'  <zone id="{ident}" routing="Full"><router id="{ident}-r"/></zone>'


def _zone_route(src: str, dst: str, gw_src: str, links: str) -> str:
    return (f'  <zoneRoute src="{src}" dst="{dst}" gw_src="{gw_src}" gw_dst="{dst}-r">'
            f"{links}</zoneRoute>")


def _network(cluster: Cluster, out: list[str]) -> None:
    topo, nic = cluster.topology, cluster.levels.inter_node
    assert nic is not None  # checked by Cluster
    per_leaf = (topo.nodes_per_leaf or cluster.nodes) if topo.kind == "fat-tree" \
        else cluster.nodes
    leaves = -(-cluster.nodes // per_leaf)
    names = ["switch"] if topo.kind == "flat" else [f"leaf{k}" for k in range(leaves)]
    out += [_switch(name) for name in names]
    if topo.kind == "fat-tree":
        out.append(_switch("spine"))
    out.append("  " + _link("fabric", _FAST, 0, "FATPIPE"))
    out += ["  " + _link(f"{node_id(n)}-nic", nic.bandwidth_mbs, 0, "SPLITDUPLEX")
            for n in range(cluster.nodes)]
    if topo.kind == "fat-tree":
        up_bw = per_leaf * nic.bandwidth_mbs / topo.oversubscription
        out += ["  " + _link(f"leaf{k}-up", up_bw, topo.hop_latency_us, "SPLITDUPLEX")
                for k in range(leaves)]
    for n in range(cluster.nodes):
        links = f'<link_ctn id="{node_id(n)}-nic" direction="UP"/><link_ctn id="fabric"/>'
        out.append(_zone_route(node_id(n), names[n // per_leaf], f"{node_id(n)}-nic", links))
    if topo.kind == "fat-tree":
        out += [_zone_route(f"leaf{k}", "spine", f"leaf{k}-r",
                            f'<link_ctn id="leaf{k}-up" direction="UP"/>')
                for k in range(leaves)]


def overhead_value(level: Level) -> str:
    """"send:recv" seconds, or "from:send:recv;..." for size-dependent overheads."""
    rows = level.overhead_per_size
    if not rows:
        return f"{level.send_overhead_us * 1e-6:.9g}:{level.recv_overhead_us * 1e-6:.9g}"
    return ";".join(f"{size}:{s * 1e-6:.9g}:{r * 1e-6:.9g}" for size, s, r in rows)


def platform_xml(cluster: Cluster) -> str:
    """The SimGrid platform file for this cluster (deterministic: same input, same bytes)."""
    out = ["<?xml version='1.0'?>",
           '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">',
           f"<!-- generated by collbench from cluster {cluster.name}: {cluster.summary()} -->",
           '<platform version="4.1">']
    items = config_items(cluster)
    if items:
        out += ["  <config>", *(f"    <prop id={quoteattr(k)} value={quoteattr(v)}/>"
                                for k, v in items), "  </config>"]
    out += [f'  <zone id="cluster-{cluster.name}" routing="Floyd">',
            f'    <prop id="collbench/cores_per_socket" value="{cluster.cores_per_socket}"/>']
    for name in LEVELS:
        level = cluster.level(name)
        if level is not None:
            out += [f'    <prop id="collbench/lat-factor/{name}" '
                    f'value="{factor_value(level.lat_factor)}"/>',
                    f'    <prop id="collbench/bw-factor/{name}" '
                    f'value="{factor_value(level.bw_factor)}"/>']
            if level.overheads():  # seconds, for the loader's cost callbacks
                out.append(f'    <prop id="collbench/overhead/{name}" '
                           f'value="{overhead_value(level)}"/>')
    for n in range(cluster.nodes):
        _node_zone(cluster, n, out)
    if cluster.nodes > 1:
        _network(cluster, out)
    out += ["  </zone>", "</platform>", ""]
    return "\n".join(out)
