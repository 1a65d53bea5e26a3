"""models.fluid: flows sharing links as SimGrid shares them (the `smpi` network)."""

from __future__ import annotations

import pytest

from collbench.models.algorithms import detail
from collbench.models.fluid import capacities, links, simulate_shared
from collbench.models.networks import network
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.predict import predict_point
from collbench.models.schedules import Step, program
from collbench.models.topology import Topology

A = {"core": 0.2, "socket": 0.5, "node": 1.0}  # µs
BW = {"core": 1e9, "socket": 1e9, "node": 2e9}  # B/s: 1000 B take 1 µs on core
MODEL = P2PModel({lv: LevelModel(lv, (Regime(0, A[lv], BW[lv]),)) for lv in A})
M = 1000
# 2 nodes × 2 sockets × 2 cores, one rank per core: ranks 0-1 socket 0, 2-3 socket 1 of
# node 0; 4-7 on node 1
TOPO = Topology(8, nodes=2, ppn=4, sockets=2, cores=2, mapping="core")


def times(progs: list[list[Step]], topo: Topology = TOPO, rendezvous: int | None = None,
          weight_s: float = 0.0) -> list[float]:
    ends, starts = simulate_shared(progs, topo, MODEL, rendezvous, weight_s)
    return [e[0] - s[0] for e, s in zip(ends, starts, strict=True)]


def pair(src: int, dst: int, nbytes: int, p: int = 8, sync: bool = False) -> list[list[Step]]:
    progs: list[list[Step]] = [[] for _ in range(p)]
    progs[src] = [Step(sends=((dst, nbytes),), sync=sync)]
    progs[dst] = [Step(recvs=((src, False),))]
    return progs


@pytest.mark.parametrize(("dst", "level"), [(1, "core"), (2, "socket"), (4, "node")])
def test_a_message_alone_costs_its_ping_pong(dst: int, level: str) -> None:
    got = times(pair(0, dst, M))
    assert got[dst] == pytest.approx(A[level] + M * 1e6 / BW[level])
    assert got[0] == 0  # detached: the sender does not wait


def test_rendezvous_and_synchronous_senders_wait() -> None:
    assert times(pair(0, 1, M), rendezvous=M)[0] == pytest.approx(A["core"] + 1.0)
    assert times(pair(0, 1, 0, sync=True))[0] == pytest.approx(A["core"])


def test_one_link_shared_by_concurrent_flows() -> None:
    """The root's three blocking eager sends all start at once (the receives are posted)
    and share its link: all end when 3M would have crossed it alone."""
    progs: list[list[Step]] = [[Step(sends=((d, M),)) for d in (1, 2, 3)]]
    progs += [[Step(recvs=((0, False),))] for _ in range(3)]
    topo = Topology(4, sockets=1)
    assert times(progs, topo)[1:] == pytest.approx([A["core"] + 3.0] * 3)


def test_flows_on_different_links_do_not_share() -> None:
    """0 -> 1 (its socket link) and 0 -> 2 (off-socket link) run side by side."""
    progs: list[list[Step]] = [[Step(sends=((1, M), (2, M)))], [Step(recvs=((0, False),))],
                               [Step(recvs=((0, False),))]]
    progs += [[] for _ in range(5)]
    got = times(progs)
    assert got[1] == pytest.approx(A["core"] + 1.0)
    assert got[2] == pytest.approx(A["socket"] + 1.0)


def test_a_nodes_card_is_shared_by_its_ranks() -> None:
    """0 -> 4 and 1 -> 5 leave node 0 through one card: each at half its bandwidth."""
    progs: list[list[Step]] = [[] for _ in range(8)]
    progs[0], progs[1] = [Step(sends=((4, M),))], [Step(sends=((5, M),))]
    progs[4], progs[5] = [Step(recvs=((0, False),))], [Step(recvs=((1, False),))]
    alone = A["node"] + M * 1e6 / BW["node"]
    assert times(progs)[4:6] == pytest.approx([alone + M * 1e6 / BW["node"]] * 2)
    assert links(TOPO, 0, 4) == (("dma", 0, 0), ("nic", 0, 0), ("nic", 1, 1), ("dma", 4, 1))
    assert capacities(MODEL) == {"mem": 1e3, "dma": 2e3, "nic": 2e3}  # bytes/µs


def test_weights_favour_the_shorter_route() -> None:
    """SimGrid's weighting: a flow's share goes as 1/(latency + S·Σ 1/capacity), so of two
    flows on one off-socket link the one to the other socket (shorter route) gets more
    than the one to the other node; with S = 0 (CM02) latency alone decides, which
    favours the short route more than SMPI's S = 8775 does."""
    bw = {"core": 1e9, "socket": 2e9, "node": 2e9}
    model = P2PModel({lv: LevelModel(lv, (Regime(0, A[lv], bw[lv]),)) for lv in A})
    progs: list[list[Step]] = [[] for _ in range(8)]
    progs[0] = [Step(sends=((2, 10 * M), (4, 10 * M)))]  # long enough to overlap
    progs[2], progs[4] = [Step(recvs=((0, False),))], [Step(recvs=((0, False),))]

    def run(weight_s: float) -> list[float]:
        return [e[0] for e in simulate_shared(progs, TOPO, model, None, weight_s)[0]]

    latency_only, weighted = run(0.0), run(8775.0)
    assert weighted[2] < weighted[4]
    assert latency_only[2] < weighted[2] - 0.5
    # the link is never idle while both wait: the last byte leaves at the same time
    assert max(weighted) == pytest.approx(max(latency_only), rel=1e-6)


def test_a_receive_posted_ahead_starts_its_transfer() -> None:
    """Rank 0 posts the receive from 1 ahead, waits for 2, then for 1: both messages
    travel at once (α), not one after the other (2α)."""
    ahead: list[list[Step]] = [[Step(recvs=((2, False),), posts=(1,)),
                                Step(recvs=((1, False),))],
                               [Step(sends=((0, 0),))], [Step(sends=((0, 0),))]]
    late: list[list[Step]] = [[Step(recvs=((2, False),)), Step(recvs=((1, False),))],
                              *ahead[1:]]
    topo = Topology(3, sockets=1)
    assert times(ahead, topo)[0] == pytest.approx(A["core"])
    assert times(late, topo)[0] == pytest.approx(2 * A["core"])


def test_deadlock_is_reported() -> None:
    progs: list[list[Step]] = [[Step(recvs=((1, False),))], [Step(recvs=((0, False),))]]
    with pytest.raises(RuntimeError, match="deadlocks"):
        simulate_shared(progs, Topology(2), MODEL)


def test_osu_loop_counts_the_barrier_skew() -> None:
    """gather basic_linear at 4 ranks: Open MPI's barrier there (linear) releases rank 0
    first (its 0-byte release messages), so the others' blocks reach it a latency later:
    4 α, not 3 (what SimGrid measures on orfeo-thin: 0.895 µs for a 1 B gather, a
    ping-pong being 0.2238 µs)."""
    topo = Topology(4, sockets=1)
    plain = detail(MODEL, topo, "gather", "basic_linear", 1, rendezvous=65536, shared=True)
    loop = detail(MODEL, topo, "gather", "basic_linear", 1, rendezvous=65536, shared=True,
                  barrier="linear")
    one = A["core"] + 1e6 / BW["core"]
    assert plain.max_us == pytest.approx(3 * one)
    assert loop.max_us == pytest.approx(A["core"] + 3 * one)


def test_recursive_doubling_barrier_releases_with_synchronous_sends() -> None:
    progs = program("barrier", "recursive_doubling", 3, 0)
    assert any(st.sync for st in progs[0])  # rank 0 releases rank 2
    assert not any(st.sync for st in progs[1])


def test_smpi_network_uses_the_fluid_model() -> None:
    net = network("smpi")
    assert net.shared and net.loop
    avg, lo, hi = predict_point(MODEL, Topology(4, sockets=1), "scatter", "basic_linear",
                                M, net=net)
    assert lo == 0 and hi > 3.0  # the root's three sends share its link
    assert avg == pytest.approx(3 * hi / 4)  # the root is done at once, the others with hi
