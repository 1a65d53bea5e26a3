"""simulate's ways messages share time: serial (default), overlap, rendezvous, matched."""

from __future__ import annotations

import pytest

from collbench.models.algorithms import detail, simulate
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.schedules import Step
from collbench.models.topology import Topology

A = 2.0  # µs
BW = 1e9  # B/s: 1000 B take 1 µs
MODEL = P2PModel({lv: LevelModel(lv, (Regime(0, A, BW),)) for lv in ("core", "socket",
                                                                     "node")})
TOPO4 = Topology(4)
M = 1000


def root_sends(blocking: bool) -> list[list[Step]]:
    """rank 0 sends M bytes to 1, 2, 3 (isends + waitall, or blocking sends)."""
    sends = [(d, M) for d in (1, 2, 3)]
    root = [Step(sends=(s,)) for s in sends] if blocking else [Step(sends=tuple(sends))]
    return [root, *[[Step(recvs=((0, False),))] for _ in range(3)]]


def test_serial_is_the_default_and_serialises_whole_transfers() -> None:
    times = simulate(root_sends(False), TOPO4, MODEL).times_us
    assert times[1:] == pytest.approx([3, 6, 9])  # γ_k = k: (α + m/β) each


def test_overlap_keeps_latencies_concurrent() -> None:
    times = simulate(root_sends(False), TOPO4, MODEL, overlap=True).times_us
    assert times[1:] == pytest.approx([3, 4, 5])  # bandwidth parts in turn, α once
    assert times[0] == pytest.approx(3)  # the root is done once its bytes have left


def test_matched_shares_the_senders_link() -> None:
    times = simulate(root_sends(False), TOPO4, MODEL, overlap=True, matched=True).times_us
    assert times[1:] == pytest.approx([5, 5, 5])  # fair sharing: all end with the last
    assert times[0] == 0  # eager, detached: the sender does not wait


def test_matched_transfers_wait_for_the_receive() -> None:
    # rank 1 first waits 10 µs worth of a message from rank 2, then receives from 0
    progs = [[Step(sends=((1, M),))],
             [Step(recvs=((2, False),)), Step(recvs=((0, False),))],
             [Step(compute=0, sends=((1, 10_000),))]]
    late = simulate(progs, Topology(3), MODEL, overlap=True, matched=True).times_us
    eager = simulate(progs, Topology(3), MODEL, overlap=True).times_us
    assert late[1] == pytest.approx(12 + 3)  # rank 0's message starts only at 12 µs
    assert eager[1] == pytest.approx(12 + 1)  # already there: only the port time


def test_rendezvous_sender_waits_for_its_receiver() -> None:
    progs = [[Step(sends=((1, M),))],
             [Step(recvs=((2, False),)), Step(recvs=((0, False),))],
             [Step(sends=((1, 10_000),))]]
    rdv = simulate(progs, Topology(3), MODEL, overlap=True, rendezvous=M).times_us
    assert rdv[0] == pytest.approx(rdv[1]) == pytest.approx(12 + 3)
    eager = simulate(progs, Topology(3), MODEL, overlap=True, rendezvous=M + 1).times_us
    assert eager[0] == pytest.approx(1)


def test_exchange_with_rendezvous_does_not_deadlock() -> None:
    # a sendrecv of two ranks (one step each) with rendezvous messages both ways
    progs = [[Step(sends=((1, M),), recvs=((1, False),))],
             [Step(sends=((0, M),), recvs=((0, False),))]]
    t = simulate(progs, Topology(2), MODEL, overlap=True, rendezvous=1, matched=True)
    assert t.times_us == pytest.approx((3, 3))


@pytest.mark.parametrize("algorithm", ["basic_linear", "binomial", "pipeline",
                                       "scatter_allgather_ring", "knomial"])
def test_every_mode_costs_real_schedules(algorithm: str) -> None:
    topo = Topology(12, nodes=2, ppn=6, sockets=2, cores=3, mapping="socket")
    got = {(ov, rdv, mt): detail(MODEL, topo, "bcast", algorithm, 1 << 16, overlap=ov,
                                  rendezvous=rdv, matched=mt).avg_us
           for ov in (False, True) for rdv in (None, 4096) for mt in (False, True)}
    assert all(v > A for v in got.values())
    # overlapping latencies never costs more than serialising them
    assert got[(True, None, False)] <= got[(False, None, False)] + 1e-9
