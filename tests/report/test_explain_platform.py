"""report.explain with a platform's model (models.platform): its per-message overheads are a
term of their own beside latency and bandwidth."""

from __future__ import annotations

from collbench.models.accuracy import Key
from collbench.models.platform import from_cluster
from collbench.platforms.model import parse_cluster
from collbench.report.explain import explain

PLATFORM = """
name = "overheads"
nodes = 1
sockets_per_node = 1
cores_per_socket = 8
[levels.intra_socket]
latency_us = 1.0
bandwidth_mbs = 10000
send_overhead_us = 0.6
recv_overhead_us = 0.1
"""


def test_a_linear_roots_overheads_dominate_small_messages() -> None:
    model, shape = from_cluster(parse_cluster(PLATFORM, "overheads.toml"))
    whys, notes = explain(model, [Key("bcast", "basic_linear", 8, "core", s)
                                  for s in (8, 1 << 20)], shape)
    assert notes == []
    small, large = whys
    assert small.messages["core"] >= 1
    # 0.7 µs of overheads against 1 µs of latency per message: the latency still leads at
    # 8 B, with the overheads the second term; 1 MiB is the bandwidth's
    assert small.dominant == "intra-socket latency"
    assert 0.35 < small.share < 0.65  # 1 / (1 + 0.7): without the overhead term, ~1
    assert large.dominant == "intra-socket bandwidth"
