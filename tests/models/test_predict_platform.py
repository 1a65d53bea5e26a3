"""model predict from a platform (models.platform): the SimGrid platform's own parameters,
read once by platforms.model, cost the schedules."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.models.algorithms import detail
from collbench.models.platform import from_cluster, read_platform
from collbench.models.topology import Topology
from collbench.platforms.model import Cluster, parse_cluster
from collbench.store import Store

PLATFORM = """
name = "two-level"
nodes = 1
sockets_per_node = 2
cores_per_socket = 8
[levels.intra_socket]
latency_us = 0.5
bandwidth_mbs = 10000
lat_factor = [[0, 0.5], [4096, 1.5]]
bw_factor = [[0, 1.0], [65536, 0.8]]
send_overhead_us = 0.2
recv_overhead_us = 0.05
overhead_per_size = [[0, 0.2, 0.05], [4096, 1.0, 0.1], [4097, 0.2, 0.05]]
[levels.inter_socket]
latency_us = 1.0
bandwidth_mbs = 5000
[memory]
receiver_copies = {copies}
socket_bandwidth_mbs = {socket_bw}
"""


def cluster(copies: bool = False, socket_bw: float = 0.0) -> Cluster:
    return parse_cluster(PLATFORM.format(copies=str(copies).lower(), socket_bw=socket_bw),
                         "two-level.toml")


def simgrid_pingpong(c: Cluster, level: str, m: int) -> float:
    """One-way time SimGrid charges a lone message: factors by the table entry in force,
    overheads interpolated (what collbench_platform.cpp does)."""
    lv = c.level(level)
    assert lv is not None
    lf = [f for s, f in lv.lat_factor if s <= m][-1]
    bf = [f for s, f in lv.bw_factor if s <= m][-1]
    o_s, o_r = lv.overhead_at(m)
    return o_s + lv.latency_us * lf + m / (lv.bandwidth_mbs * bf) + o_r


@pytest.mark.parametrize("m", [1, 100, 2048, 4096, 4097, 65536, 1 << 20])
def test_a_lone_message_costs_what_the_platform_charges(m: int) -> None:
    c = cluster()
    model, shape = from_cluster(c)
    assert (shape.sockets, shape.cores_per_socket) == (2, 8)
    for mapping, level in (("core", "intra_socket"), ("socket", "inter_socket")):
        topo = Topology(2, 1, 2, 2, 8, mapping)
        pred = detail(model, topo, "bcast", "basic_linear", m, overlap=True, rendezvous=4096)
        assert math.isclose(pred.times_us[1], simgrid_pingpong(c, level, m), rel_tol=1e-9)


def test_overheads_serialise_a_roots_sends() -> None:
    """Eager sends overlap their latency, not the sender's overhead: 7 sends of 100 B from
    one root take at least 7 o_s, which the same network without overheads does not."""
    model, _ = from_cluster(cluster())
    topo = Topology(8, 1, 8, 2, 8, "core")
    o_s = cluster().levels.intra_socket.overhead_at(100)[0]
    with_o = detail(model, topo, "bcast", "basic_linear", 100, overlap=True, rendezvous=4096)
    assert with_o.max_us >= 7 * o_s
    bare = from_cluster(parse_cluster(
        "\n".join(line for line in PLATFORM.format(copies="false", socket_bw=0).splitlines()
                  if "overhead" not in line), "bare.toml"))[0]
    without = detail(bare, topo, "bcast", "basic_linear", 100, overlap=True, rendezvous=4096)
    assert without.max_us < 7 * o_s < with_o.max_us


def test_memory_sharing_of_a_rendezvous_fan_out() -> None:
    """A root's 7 rendezvous transfers of 1 MiB on one socket: queued on its port when the
    sender copies (about 7 transfers' bytes), side by side when the receivers do; off the
    socket, the socket's shared bandwidth bounds them."""
    m, topo = 1 << 20, Topology(8, 1, 8, 2, 8, "core")
    one = simgrid_pingpong(cluster(), "intra_socket", m)
    queued = detail(from_cluster(cluster(copies=False))[0], topo, "bcast", "basic_linear",
                    m, overlap=True, rendezvous=4096).max_us
    apart = detail(from_cluster(cluster(copies=True))[0], topo, "bcast", "basic_linear", m,
                   overlap=True, rendezvous=4096).max_us
    assert queued > 6 * (one - 1.0) and apart < 1.5 * one
    spread = Topology(8, 1, 8, 2, 8, "socket")  # ranks 1, 3, 5, 7 on the other socket
    rate = 2000.0  # MB/s = B/µs, below one transfer's 5000
    bounded = detail(from_cluster(cluster(copies=True, socket_bw=rate))[0], spread, "bcast",
                     "basic_linear", m, overlap=True, rendezvous=4096).max_us
    assert bounded >= 4 * m / rate


def test_model_predict_platform_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "pred"
    assert main(["model", "predict", "--platform", "orfeo-epyc", "--collective", "bcast",
                 "--algorithms", "basic_linear,binomial", "--nprocs", "8", "--sizes", "4,64K",
                 "--openmpi", "4.1", "-o", str(out)]) == 0
    rows = Store(out).connect().execute(
        "SELECT algorithm, size_bytes, avg_us FROM measurements ORDER BY 1, 2").fetchall()
    assert len(rows) == 4 and all(r[2] > 0 for r in rows)
    model, _ = read_platform("orfeo-epyc")
    assert model.source["platform"] == "orfeo-epyc"
    capsys.readouterr()
    for argv in (["model", "predict", "--collective", "bcast", "--nprocs", "4"],
                 ["model", "predict", str(tmp_path / "x.p2p.toml"), "--platform", "orfeo-epyc",
                  "--collective", "bcast", "--nprocs", "4"]):
        assert main([*argv, "-o", str(tmp_path / "no")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--platform" in err[0]
    assert main(["model", "predict", "--platform", "no-such", "--collective", "bcast",
                 "--nprocs", "4", "-o", str(tmp_path / "no")]) == 2
    assert "valid:" in capsys.readouterr().err
