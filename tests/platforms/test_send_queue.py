"""[memory] send_queue (issue 25): a sender's non-blocking sends from the rendezvous
threshold on leave one after another, at the socket's bandwidth within a node and the
card's between nodes. Written by `platform calibrate --send-queue`, read back, carried to
SimGrid's loader and to `model predict`: a linear root's receivers then finish in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from collbench.platforms.model import parse_cluster
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import cluster_toml
from tests.simgrid_support import SMALL, needs_smpi, simulated_us, small_platform

SHARING = SMALL + "\n[smpi]\nrendezvous_bytes = 4097\n\n[memory]\nreceiver_copies = true\n" \
                  "socket_bandwidth_mbs = 5000\n"
QUEUE = SHARING + "send_queue = true\n"
SIZE = 65536


def test_the_queue_is_written_per_level_and_survives_a_write() -> None:
    cluster = parse_cluster(QUEUE, "q.toml")
    xml = platform_xml(cluster)
    # within a node the socket's port (5000 MB/s), between nodes the card (inter_node's)
    assert 'id="collbench/send-queue/intra_socket" value="4097:5e+09"' in xml
    assert 'id="collbench/send-queue/inter_socket" value="4097:5e+09"' in xml
    node_bw = cluster.levels.inter_node.bandwidth_mbs if cluster.levels.inter_node else 0
    assert f'id="collbench/send-queue/inter_node" value="4097:{node_bw * 1e6:.9g}"' in xml
    assert "send-queue" not in platform_xml(parse_cluster(SHARING, "s.toml"))
    again = parse_cluster(cluster_toml(cluster, "# q"), "again.toml")
    assert again.memory.send_queue and not parse_cluster(SHARING, "s").memory.send_queue


def test_a_bad_value_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(SHARING + 'send_queue = "often"\n')
    assert main(["platform", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "send_queue" in err[0] and "bad.toml" in err[0]


@needs_smpi
def test_calibrate_writes_it(tmp_path: Path, sim_env: Path) -> None:
    """`--send-queue` sets the term and leaves the fitted levels as they were (a ping-pong
    has one message at a time: it cannot show a queue)."""
    pp = tmp_path / "pp"
    for mapping, us in (("core", (0.2, 0.5, 4.0, 60.0)), ("socket", (0.5, 0.9, 8.0, 110.0))):
        csv = tmp_path / f"{mapping}.csv"
        csv.write_text("size_bytes,avg_us\n" + "".join(
            f"{size},{t}\n" for size, t in zip((8, 1024, 65536, 1048576), us, strict=True)))
        assert main(["ingest", str(csv), "--collective", "latency", "--nprocs", "2",
                     "--mapping", mapping, "--column", "size_bytes=size_bytes", "--column",
                     "avg_us=avg_us", "--mpi", "openmpi", "-o", str(pp)]) == 0
    shape = small_platform(tmp_path, SMALL.replace("nodes = 2", "nodes = 1").split(
        "[levels.inter_node]")[0])
    plain, queued = tmp_path / "plain.toml", tmp_path / "queued.toml"
    base = ["platform", "calibrate", str(pp), "--from", str(shape), "--rendezvous", "4097",
            "--receiver-copies", "--socket-bandwidth", "40000"]
    assert main([*base, "-o", str(plain)]) == 0
    assert main([*base, "--send-queue", "-o", str(queued)]) == 0
    a, b = parse_cluster(plain.read_text(), "p"), parse_cluster(queued.read_text(), "q")
    assert b.memory.send_queue and not a.memory.send_queue
    assert a.levels == b.levels


NO_PORT = SHARING.replace("socket_bandwidth_mbs = 5000\n", "")


def _simulated(tmp: Path, tag: str, text: str) -> tuple[float, float, float]:
    (tmp / tag).mkdir()
    platform = small_platform(tmp / tag, text)
    avg, low, high = (simulated_us(platform, tmp / tag, stat, SIZE, "bcast", stat, "4.1")
                      for stat in ("avg_us", "min_us", "max_us"))
    return avg, low, high


@needs_smpi
def test_a_linear_roots_receivers_finish_in_order(tmp_path: Path, sim_env: Path) -> None:
    """bcast basic_linear (MPI_Isend to each of 7 ranks, 64 KiB). Without a socket port the
    receivers' copies run at once (receiver copies); queued, the transfers leave one after
    another: the first receiver no later, the last over a message (11 µs) later, and
    `model predict` says the same times. With the socket's shared port the six off-socket
    transfers end together; queued, in order: the ranks' average drops."""
    at_once, queued = _simulated(tmp_path, "a", NO_PORT), \
        _simulated(tmp_path, "b", NO_PORT + "send_queue = true\n")
    assert queued[1] <= at_once[1] and queued[2] > at_once[2] + SIZE / 6000.0
    # unqueued, the four transfers to the other node share its card in both (SimGrid
    # fairly, the model in order): the last receiver within 10 %
    assert _model(NO_PORT)[2] == pytest.approx(at_once[2], rel=0.10), at_once
    for mine, theirs in zip(_model(NO_PORT + "send_queue = true\n"), queued, strict=True):
        assert mine == pytest.approx(theirs, rel=0.01), (queued, at_once)
    shared, ordered = _simulated(tmp_path, "c", SHARING), _simulated(tmp_path, "d", QUEUE)
    assert ordered[2] >= shared[2] and ordered[0] < 0.95 * shared[0], (shared, ordered)


def _model(text: str, size: int = SIZE) -> tuple[float, float, float]:
    from collbench.models.networks import NETWORKS
    from collbench.models.platform import from_cluster
    from collbench.models.predict import predict_point, topology

    model, shape = from_cluster(parse_cluster(text, "m.toml"))
    return predict_point(model, topology(8, 2, 4, "core", shape, "model"), "bcast",
                         "basic_linear", size, net=NETWORKS["mpi"])


def test_model_predict_queues_the_same_way() -> None:
    """Without a socket port, the model's root sends its seven 64 KiB messages at once
    (receiver copies); queued, they leave one after another at the levels' bandwidths
    (6000 MB/s within the socket, 5000 across, 12000 between nodes): the last receiver
    over a message later, the ranks' average later too."""
    (avg0, _, max0), (avg1, _, max1) = _model(NO_PORT), _model(NO_PORT + "send_queue = true\n")
    assert max1 > max0 + SIZE / 6000.0 and avg1 > avg0
    # below the rendezvous threshold nothing queues
    assert _model(SHARING, 4096) == _model(QUEUE, 4096)


def test_the_card_is_shared_by_a_nodes_transfers() -> None:
    """Four 64 KiB transfers from one root to the other node's ranks at once: each alone
    takes 64 KiB / 12000 MB/s; through one card they take four times that in all."""
    from dataclasses import replace

    from collbench.models.networks import NETWORKS
    from collbench.models.platform import from_cluster
    from collbench.models.predict import predict_point, topology

    model, shape = from_cluster(parse_cluster(NO_PORT, "m.toml"))
    assert model.sharing is not None and model.sharing.card_bytes_per_us == 12000
    alone = replace(model, sharing=replace(model.sharing, card_bytes_per_us=0.0))
    topo = topology(8, 2, 4, "core", shape, "model")
    (_, _, free), (_, _, shared) = (predict_point(m, topo, "scatter", "linear_nb", SIZE,
                                                  net=NETWORKS["mpi"]) for m in (alone, model))
    assert shared > free and shared >= 0.99 * 4 * SIZE / 12000.0
    # one node: no card
    one, _ = from_cluster(parse_cluster(NO_PORT.replace("nodes = 2", "nodes = 1")
                                                .split("[levels.inter_node]")[0], "one"))
    assert one.sharing is not None and one.sharing.card_bytes_per_us == 0.0
