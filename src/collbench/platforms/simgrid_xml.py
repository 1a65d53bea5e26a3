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
  inter-node latency; with packages (sockets_per_package), a route between gateways of
  different packages also crosses the "xgmi" link (FATPIPE, inter_package bandwidth, the
  inter_package latency beyond inter_socket's; a flow also crosses the bus).
Nodes hang off switch zones: flat = one switch; fat-tree = leaf switches (one per
`nodes_per_leaf` nodes) under a spine. Each node's "nic" link (inter_node bandwidth,
SPLITDUPLEX: the node's flows share it per direction) joins it to its switch; leaves reach
the spine over "up" links (hop_latency_us each, nodes_per_leaf × bandwidth /
oversubscription, shared). So a two-rank ping-pong takes exactly the level's latency and
bandwidth, while concurrent flows contend where they would on the machine.

[memory] changes the sharing (a single flow, hence the ping-pong, is unchanged):
- receiver_copies: each per-core link is two links, "out" (FATPIPE: every message a core
  sends gets the full bandwidth, as each receiver's copy runs on the receiver's core) and
  "in" (SHARED: what one core receives shares it), routed one way each;
- socket_bandwidth_mbs: each socket's gateway reaches the bus and the node's card over a
  "fabric" link (SPLITDUPLEX at that bandwidth): all traffic leaving a socket shares one
  direction, all traffic entering it the other.

The <config> block carries the platform's SimGrid options (eager threshold, [smpi] cfg);
`--cfg` options given on the command line take precedence over it. The per-level
size-dependent factors of a calibrated cluster are properties of the top zone, read by
collbench's platform loader (collbench_platform.cpp, see platforms.loader): SMPI's own
smpi/lat-factor and smpi/bw-factor are one table for all levels.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from collbench.platforms.model import PLATFORM_LEVELS, Cluster, Level

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
    if s.rendezvous_bytes:  # the sender's side of the protocol switch, said on its own
        items["smpi/send-is-detached-thresh"] = str(s.rendezvous_bytes)
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


def _one_way(src: str, dst: str, links: list[str]) -> str:
    """A route that holds in this direction only (its reverse is declared apart)."""
    ctn = "".join(f'<link_ctn id="{link}"/>' for link in links)
    return f'<route src="{src}" dst="{dst}" symmetrical="NO">{ctn}</route>'


def _core_links(ident: str, bw_mbs: float, latency_us: float, split: bool) -> list[str]:
    """A core's link to a router: one split-duplex link, or (receiver_copies) an "out"
    link every outgoing flow gets in full and an "in" link incoming flows share."""
    if not split:
        return [_link(ident, bw_mbs, latency_us, "SPLITDUPLEX")]
    return [_link(f"{ident}-out", bw_mbs, latency_us, "FATPIPE"),
            _link(f"{ident}-in", bw_mbs, latency_us, "SHARED")]


def _core_routes(host: str, router: str, link: str, split: bool, extra: str = "") -> list[str]:
    if not split:
        return [_route(host, router, link, True, extra)]
    more = [extra] if extra else []
    return [_one_way(host, router, [f"{link}-out", *more]),
            _one_way(router, host, [*more, f"{link}-in"])]


def _gateway_route(src: str, dst: str, links: list[tuple[str, str]]) -> str:
    """Between two routers, both ways: (link, "UP"/"DOWN"/"") in the src -> dst order."""
    ctn = "".join(f'<link_ctn id="{link}"' + (f' direction="{d}"' if d else "") + "/>"
                  for link, d in links)
    return f'<route src="{src}" dst="{dst}">{ctn}</route>'


def _node_zone(cluster: Cluster, n: int, out: list[str]) -> None:
    lv, node = cluster.levels, node_id(n)
    sockets, per_socket = cluster.sockets_per_node, cluster.cores_per_socket
    cores = range(cluster.cores_per_node)
    external = sockets > 1 or cluster.nodes > 1
    xs_lat = lv.inter_socket.latency_us if (lv.inter_socket and sockets > 1) else 0.0
    dma_bw = max(level.bandwidth_mbs for level in (lv.inter_socket, lv.inter_package,
                                                    lv.inter_node)
                 if level is not None) if external else 0.0
    per_package = cluster.sockets_per_package or sockets
    pkg = lv.inter_package if cluster.packages_per_node > 1 else None
    ind = "    "
    out.append(f'  <zone id="{node}" routing="Floyd">')
    out += [f'{ind}<host id="{host_id(n, k)}" speed="1Gf"/>' for k in cores]
    out += [f'{ind}<router id="{node}-s{j}"/>' for j in range(sockets)]
    if external:
        out += [f'{ind}<router id="{node}-x{j}"/>' for j in range(sockets)]
    if cluster.nodes > 1:
        out.append(f'{ind}<router id="{node}-nic"/>')
    mem, split = lv.intra_socket, cluster.memory.receiver_copies
    for k in cores:
        out += [ind + x for x in _core_links(f"{host_id(n, k)}-mem", mem.bandwidth_mbs,
                                             mem.latency_us / 2, split)]
    if external:
        for k in cores:
            out += [ind + x for x in _core_links(f"{host_id(n, k)}-dma", dma_bw, xs_lat / 2,
                                                 split)]
        # Floyd picks the path with fewest links: this second link keeps two cores of one
        # socket on their mem links rather than through the gateway.
        out.append(ind + _link(f"{node}-port", _FAST, 0, "FATPIPE"))
    fabric = cluster.memory.socket_bandwidth_mbs if external else 0.0
    if fabric:
        out += [ind + _link(f"{node}-s{j}-fabric", fabric, 0, "SPLITDUPLEX")
                for j in range(sockets)]
    if lv.inter_socket is not None and sockets > 1:
        out.append(ind + _link(f"{node}-bus", lv.inter_socket.bandwidth_mbs, 0, "FATPIPE"))
    if pkg is not None:  # the package-to-package hop: what inter_package adds
        out.append(ind + _link(f"{node}-xgmi", pkg.bandwidth_mbs, pkg.latency_us - xs_lat,
                               "FATPIPE"))
    if lv.inter_node is not None and cluster.nodes > 1:
        rest = max(lv.inter_node.latency_us - xs_lat, 0.0) / 2
        out.append(ind + _link(f"{node}-pcie", _FAST, rest, "FATPIPE"))
    for k in cores:
        j = k // per_socket
        out += [ind + x for x in _core_routes(host_id(n, k), f"{node}-s{j}",
                                              f"{host_id(n, k)}-mem", split)]
        if external:
            out += [ind + x for x in _core_routes(host_id(n, k), f"{node}-x{j}",
                                                  f"{host_id(n, k)}-dma", split,
                                                  f"{node}-port")]

    def leaving(j: int) -> list[tuple[str, str]]:
        return [(f"{node}-s{j}-fabric", "UP")] if fabric else []

    def entering(j: int) -> list[tuple[str, str]]:
        return [(f"{node}-s{j}-fabric", "DOWN")] if fabric else []

    def across(j: int, i: int) -> list[tuple[str, str]]:
        hop = pkg is not None and j // per_package != i // per_package
        return [(f"{node}-bus", ""), *([(f"{node}-xgmi", "")] if hop else [])]

    if sockets > 1:
        out += [ind + _gateway_route(f"{node}-x{j}", f"{node}-x{i}",
                                     [*leaving(j), *across(j, i), *entering(i)])
                for j in range(sockets) for i in range(j + 1, sockets)]
    if cluster.nodes > 1:
        out += [ind + _gateway_route(f"{node}-x{j}", f"{node}-nic",
                                     [*leaving(j), (f"{node}-pcie", "")])
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


def send_queue_value(cluster: Cluster, name: str) -> str:
    """"from:bytes_per_second" for the loader: from the rendezvous threshold on."""
    start = cluster.smpi.rendezvous_bytes or DETACHED_DEFAULT
    return f"{start}:{cluster.send_queue_mbs(name) * 1e6:.9g}"


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
    if cluster.levels.inter_package is not None and cluster.packages_per_node > 1:
        out.append(f'    <prop id="collbench/sockets_per_package" '
                   f'value="{cluster.sockets_per_package}"/>')
    for name in PLATFORM_LEVELS:
        level = cluster.level(name)
        if level is not None:
            out += [f'    <prop id="collbench/lat-factor/{name}" '
                    f'value="{factor_value(level.lat_factor)}"/>',
                    f'    <prop id="collbench/bw-factor/{name}" '
                    f'value="{factor_value(level.bw_factor)}"/>']
            if level.overheads():  # seconds, for the loader's cost callbacks
                out.append(f'    <prop id="collbench/overhead/{name}" '
                           f'value="{overhead_value(level)}"/>')
            if cluster.memory.send_queue:  # from bytes:bytes per second, for the isend cost
                out.append(f'    <prop id="collbench/send-queue/{name}" '
                           f'value="{send_queue_value(cluster, name)}"/>')
            if level.load_latency_us:  # busy cores:seconds, for the latency callback
                value = ";".join(f"{c}:{us * 1e-6:.9g}" for c, us in level.load_latency_us)
                out.append(f'    <prop id="collbench/load-latency/{name}" value="{value}"/>')
                if cluster.memory.load_bandwidth:  # busy cores:time factor of its bytes
                    value = ";".join(f"{c}:{level.slowdown_at(c):.9g}"
                                     for c, _ in level.load_latency_us)
                    out.append(f'    <prop id="collbench/load-slowdown/{name}" '
                               f'value="{value}"/>')
    for n in range(cluster.nodes):
        _node_zone(cluster, n, out)
    if cluster.nodes > 1:
        _network(cluster, out)
    out += ["  </zone>", "</platform>", ""]
    return "\n".join(out)
