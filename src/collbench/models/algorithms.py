"""Per-algorithm cost models of Open MPI 5.0 coll/tuned collectives.

Each algorithm's program (`schedules.program`: which rank sends what to whom, in which
order) is costed with a point-to-point model at each hop's placement level:

- a message of b bytes between ranks at level l costs t_l(b) = α_l(b) + b/β_l(b) (the
  piecewise Hockney model of `p2p`), and arrives t_l(b) after it leaves;
- a rank's sends leave one after another (its send port is busy t_l(b) per message), so
  the k-th concurrent send of one rank arrives after k transfers (γ_k = k, as in
  Pjesivac-Grbovic et al.);
- a rank's receives complete one after another too: each takes t_l(b) of its receive port,
  and never before the message arrives (so a root receiving P-1 messages pays (P-1)·t);
  sends and receives overlap (full duplex), which is what makes pipelines pipeline;
- a step (one blocking call, or isends/irecvs + waitall) ends when all its messages are
  done; the next step starts then, so data dependencies follow program order;
- a receive with a reduction adds γ·b on the rank's CPU (γ from the p2p model, default 0);
- segmented algorithms are programs over segments, so pipelining falls out of the above.

This is a LogGP-like synchronous-dependency model: per step the maximum over concurrent
messages, per rank sequential sends accumulate. It does not model links shared between
ranks (models/fluid.py does, for SimGrid: `detail(..., shared=True)`), eager/rendezvous
handshakes beyond what the p2p regimes carry, or local copies.

OSU reports the average over ranks of each rank's time; `predict` returns that ("avg") by
default, or the slowest ("max") or fastest ("min") rank.

The simulation also counts, along the path that makes each rank's time, how many latency
terms and how many bytes it crossed at each level: `models.fitted` fits their coefficients
to measurements (Nuriyev & Lastovetsky's fitted mode).
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from collbench.errors import UserError
from collbench.models.fluid import simulate_shared
from collbench.models.p2p import LEVELS, P2PModel, Sharing
from collbench.models.schedules import ALGORITHMS, Params, Program, program
from collbench.models.topology import Topology

# term vector layout
TERMS: Final = ("alpha_core", "alpha_socket", "alpha_node", "bytes_core", "bytes_socket",
                "bytes_node", "reduce_bytes", "latency_us", "bandwidth_us")
_N: Final = len(TERMS)
_ZERO: Final = (0.0,) * _N
Stat = Literal["avg", "max", "min"]

__all__ = [
    "ALGORITHMS",
    "SERIAL",
    "TERMS",
    "Params",
    "Prediction",
    "Sends",
    "detail",
    "predict",
    "simulate",
]


@dataclass(frozen=True)
class Prediction:
    """Per-rank completion times (µs) and the term counts along each rank's critical path."""

    times_us: tuple[float, ...]
    terms: tuple[tuple[float, ...], ...]

    @property
    def avg_us(self) -> float:
        return float(sum(self.times_us) / len(self.times_us))

    @property
    def max_us(self) -> float:
        return max(self.times_us)

    @property
    def min_us(self) -> float:
        return min(self.times_us)

    def stat(self, stat: Stat) -> float:
        return {"avg": self.avg_us, "max": self.max_us, "min": self.min_us}[stat]

    def stat_terms(self, stat: Stat) -> tuple[float, ...]:
        """Term counts behind stat(): averaged over ranks for avg, else the rank's own."""
        if stat == "avg":
            n = len(self.terms)
            return tuple(sum(t[i] for t in self.terms) / n for i in range(_N))
        pick = max if stat == "max" else min
        rank = pick(range(len(self.times_us)), key=lambda r: self.times_us[r])
        return self.terms[rank]


_Val = tuple[float, tuple[float, ...]]


def _add(v: _Val, dt: float, dterms: tuple[float, ...]) -> _Val:
    return v[0] + dt, tuple(a + b for a, b in zip(v[1], dterms, strict=True))


def _vmax(a: _Val, b: _Val) -> _Val:
    return b if b[0] > a[0] else a


class Sends(NamedTuple):
    """How messages share time: simulate's overlap, rendezvous and matched; `shared`:
    flows share links, costed by models.fluid instead."""

    overlap: bool = False
    rendezvous: int | None = None
    matched: bool = False
    shared: bool = False


SERIAL: Final = Sends()
EAGER_MATCHED: Final = -1  # message id of an eager message whose transfer waits for the match


def simulate(progs: Program, topology: Topology, model: P2PModel,
             overlap: bool = False, rendezvous: int | None = None,
             matched: bool = False, marks: Sequence[int] | None = None) -> Prediction:
    """Cost a program on a topology with a p2p model (rules in the module docstring).

    overlap=True: a message occupies its sender's and receiver's ports only for its
    bandwidth part (b/β); its latency α overlaps with the next messages (LogGP's L, with
    o = 0 and g = b·G), and a send completes for its sender once its bytes have left. This
    is how SimGrid's SMPI (and eager sends in real MPIs) behave; the default serialises
    whole transfers (γ_k = k).

    rendezvous=B: messages of B bytes or more use a rendezvous protocol: the transfer starts
    once the receiver has posted its receive (its step has started) and the sender is ready,
    and the sender's step waits until it has arrived (SMPI: smpi/send-is-detached-thresh,
    64 KiB; Open MPI's sm BTL: btl_sm_eager_limit, 4 KiB). None: every message is eager.

    matched=True: eager messages too start their transfer only once the receive is posted
    (SimGrid matches both sides before a communication starts); their sender does not
    wait for them; the messages one step sends over one level share the sender's link
    fairly, so they all end when the last would (SimGrid's max-min sharing, equal sizes).

    marks: per rank, the step from which its time counts (default 0: the whole program).

    A platform's model (models.platform) adds what its parameters say: each message's
    overheads, o_s on its sender before it leaves and o_r on its receiver after it arrives;
    the latency its level gains by the ranks on the sender's node (load_latency_us) and, with
    [memory] load_bandwidth, the factor its bytes take then (slowdown_at); the
    [memory] sharing: unless the receiver copies, one sender's rendezvous transfers
    queue on its port (their bandwidth parts one after another), and every transfer leaving
    a socket, and every one entering it, takes its bytes / the socket's bandwidth of that
    socket's capacity (reserved in the order the transfers are costed); with send_queue,
    a sender's rendezvous transfers leave its card, or its socket, one after another at
    the queue's rate, booked in send order (the sender does not wait); every transfer
    leaving a node, and every one entering it, takes its bytes / the inter-node bandwidth
    of that node's card."""
    p = len(progs)
    if p != topology.nprocs:
        raise UserError(f"simulate: program has {p} ranks but the topology {topology.nprocs}; "
                        "valid: the same nprocs")
    gamma = model.gamma_us_per_byte
    level_index = {lvl: i for i, lvl in enumerate(LEVELS)}
    cost_cache: dict[tuple[str, int, int], tuple[float, tuple[float, ...]]] = {}
    busy_on = Counter(topology.place(r).node for r in range(p))  # for a load term
    sharing = model.sharing or Sharing()
    queue_rdv = model.sharing is not None and overlap and not matched \
        and not sharing.receiver_copies
    rport: list[_Val] = [(0.0, _ZERO)] * p  # when a sender's port is free (rendezvous)
    qfree: dict[tuple[int, bool], float] = {}  # (sender, card?): when its queue is empty
    socket_free: dict[tuple[int, int, int], float] = {}  # (out|in, node, socket|-1) -> time

    def overhead(src: int, dst: int, nbytes: int, which: int) -> _Val:
        """o_s (which 0) or o_r (1) of one message, as a latency term."""
        o = model.level(topology.link_level(src, dst)).overhead_us(nbytes)[which]
        d = [0.0] * _N
        d[7] = o
        return o, tuple(d)

    def occupy(src: int, dst: int, nbytes: int, begin: float, end: _Val) -> _Val:
        """`end` of a transfer that began at `begin`, no earlier than its bytes pass the
        sending and the receiving socket's shared bandwidth (off-socket transfers) and the
        sending and the receiving node's card (off-node ones)."""
        level = topology.level(src, dst)
        if nbytes == 0 or level == "core":
            return end
        ports: list[tuple[tuple[int, int, int], float]] = []
        for way, rank in ((0, src), (1, dst)):
            seat = topology.place(rank)
            if sharing.socket_bytes_per_us > 0:
                ports.append(((way, seat.node, seat.socket), sharing.socket_bytes_per_us))
            if sharing.card_bytes_per_us > 0 and level == "node":  # socket -1: the card
                ports.append(((way, seat.node, -1), sharing.card_bytes_per_us))
        out = end
        for key, rate in ports:
            done = max(socket_free.get(key, 0.0), begin) + nbytes / rate
            socket_free[key] = done
            if done > out[0]:
                d = [0.0] * _N
                d[8] = done - out[0]
                out = _add(out, done - out[0], tuple(d))
        return out

    def cost(src: int, dst: int, nbytes: int) -> tuple[float, tuple[float, ...]]:
        lvl, link = topology.level(src, dst), topology.link_level(src, dst)
        busy = busy_on[topology.place(src).node]
        key = (link, nbytes, busy)
        if key not in cost_cache:
            lm = model.level(link)  # priced by its link; counted under its level
            a = lm.alpha_us(nbytes) + lm.load_us(busy)
            bw = lm.bandwidth_part_us(nbytes) * lm.slowdown(busy)
            d = [0.0] * _N
            i = level_index[lvl]
            d[i] = 1.0
            d[3 + i] = float(nbytes)
            d[7], d[8] = a, bw
            cost_cache[key] = (a + bw, tuple(d))
        return cost_cache[key]

    def split(c: float, d: tuple[float, ...]) -> tuple[tuple[float, tuple[float, ...]],
                                                       tuple[float, tuple[float, ...]]]:
        """(latency part, bandwidth part) of one transfer's cost and terms."""
        da = tuple(v if i < 3 or i == 7 else 0.0 for i, v in enumerate(d))
        db = tuple(v if 3 <= i < 6 or i == 8 else 0.0 for i, v in enumerate(d))
        return (d[7], da), (d[8], db)

    def shared(src: int, sends: Sequence[tuple[int, int]]) -> dict[str, _Val]:
        """Bandwidth time per level of one step's sends when they share the sender's link
        fairly (they all end when the last would): the sum of their bandwidth parts."""
        out: dict[str, _Val] = {}
        for dst, nbytes in sends:
            _, (cb, db) = split(*cost(src, dst, nbytes))
            out[topology.level(src, dst)] = _add(out.get(topology.level(src, dst),
                                                         (0.0, _ZERO)), cb, db)
        return out

    def reduce_terms(nbytes: int) -> tuple[float, tuple[float, ...]]:
        d = [0.0] * _N
        d[6] = float(nbytes)
        return gamma * nbytes, tuple(d)

    # chan[(src, dst)]: messages in send order: (arrival, bytes, None) for an eager message;
    # (time the sender is ready, bytes, id) for a rendezvous one, whose transfer starts once
    # the receiver has posted its receive; ack[id] is then its arrival, which the sender
    # waits for.
    chan: dict[tuple[int, int], list[tuple[_Val, int, int | None, _Val | None]]] = {}
    used: dict[tuple[int, int], int] = {}
    ack: dict[int, _Val] = {}
    ids = itertools.count()
    pc = [0] * p
    end: list[_Val] = [(0.0, _ZERO)] * p
    posted = [False] * p
    sent: list[_Val] = [(0.0, _ZERO)] * p
    waiting: list[list[int]] = [[] for _ in range(p)]  # rendezvous sends of the step
    received: list[_Val | None] = [None] * p  # the step's receives, once done
    queue = deque(range(p))
    queued = [True] * p
    mark = list(marks) if marks is not None else [0] * p
    started: list[_Val] = list(end)
    ahead: dict[tuple[int, int], deque[_Val]] = {}  # when receives posted ahead were posted
    receives: dict[tuple[int, int], list[_Val]] = {}  # when each receive was posted

    def acknowledge(src: int, dst: int) -> None:
        """A rendezvous message whose receive was posted ahead moves without waiting for
        the receiver's step: its arrival is known once both sides are."""
        posts = receives.get((src, dst), [])
        for k, (val, nbytes, msg, share) in enumerate(chan.get((src, dst), [])[:len(posts)]):
            if msg is None or msg == EAGER_MATCHED or msg in ack:
                continue
            ack[msg] = transfer(src, dst, nbytes, _vmax(val, posts[k]), share)
            wake(src)

    def in_queue(src: int, dst: int, nbytes: int, ready: _Val) -> _Val:
        """When a rendezvous transfer may leave: `ready`, no earlier than the sender's
        earlier rendezvous bytes through the same port (the node's card, or the rest) have
        left (the platform's send_queue, booked in send order as SimGrid's loader books
        it; the sender itself does not wait)."""
        link = topology.link_level(src, dst)
        rate = sharing.queue_bytes_per_us.get(link, 0.0)
        if rate <= 0 or rendezvous is None or nbytes < rendezvous:
            return ready
        port = (src, link == "node")
        begin = max(ready[0], qfree.get(port, 0.0))
        qfree[port] = begin + nbytes / rate
        d = [0.0] * _N
        d[8] = begin - ready[0]
        return _add(ready, begin - ready[0], tuple(d))

    def transfer(src: int, dst: int, nbytes: int, ready: _Val, share: _Val | None) -> _Val:
        """When a transfer that waited for both sides (ready) arrives."""
        c, d = cost(src, dst, nbytes)
        if share is not None:  # the sender's link is shared by its flows
            (ca, da), _ = split(c, d)
            c, d = ca + share[0], tuple(x + y for x, y in zip(da, share[1], strict=True))
        elif queue_rdv:
            ready = _vmax(ready, rport[src])
            _, (cb, db) = split(c, d)
            rport[src] = _add(ready, cb, db)
        return occupy(src, dst, nbytes, ready[0], _add(ready, c, d))

    def wake(rank: int) -> None:
        if not queued[rank]:
            queued[rank] = True
            queue.append(rank)

    while queue:
        r = queue.popleft()
        queued[r] = False
        steps = progs[r]
        while pc[r] < len(steps):
            st = steps[pc[r]]
            start = end[r]
            if not posted[r]:
                cur = start
                shares = shared(r, st.sends) if matched else {}
                for dst, nbytes in st.sends:
                    share = shares.get(topology.level(r, dst))
                    cur = _add(cur, *overhead(r, dst, nbytes, 0))
                    if st.sync or (rendezvous is not None and nbytes >= rendezvous):
                        mid = next(ids)
                        waiting[r].append(mid)
                        chan.setdefault((r, dst), []).append(
                            (in_queue(r, dst, nbytes, cur), nbytes, mid, share))
                        acknowledge(r, dst)
                        wake(dst)
                        continue
                    c, d = cost(r, dst, nbytes)
                    if matched:  # the transfer starts when the receive is posted
                        chan.setdefault((r, dst), []).append((cur, nbytes, EAGER_MATCHED,
                                                              share))
                    elif overlap:
                        (ca, da), (cb, db) = split(c, d)
                        begin, cur = cur[0], _add(cur, cb, db)
                        chan.setdefault((r, dst), []).append((
                            occupy(r, dst, nbytes, begin, _add(cur, ca, da)), nbytes, None,
                            None))
                    else:
                        begin, cur = cur[0], _add(cur, c, d)
                        chan.setdefault((r, dst), []).append((
                            occupy(r, dst, nbytes, begin, cur), nbytes, None, None))
                    wake(dst)
                sent[r] = cur
                posted[r] = True
                for src in st.posts:  # irecvs waited for by a later step
                    ahead.setdefault((src, r), deque()).append(start)
                    receives.setdefault((src, r), []).append(start)
                    acknowledge(src, r)
            if received[r] is None:
                need: dict[int, int] = {}
                for src, _red in st.recvs:
                    need[src] = need.get(src, 0) + 1
                if any(len(chan.get((src, r), ())) - used.get((src, r), 0) < k
                       for src, k in need.items()):
                    break  # wait for senders
                arrivals: list[tuple[_Val, int, int, bool, _Val | None]] = []
                taken: dict[int, int] = {}
                for src, red in st.recvs:
                    k = used.get((src, r), 0) + taken.get(src, 0)
                    val, nbytes, msg, share = chan[(src, r)][k]
                    early = ahead.get((src, r))
                    at = early.popleft() if early else None  # posted by an earlier step
                    if at is None:
                        receives.setdefault((src, r), []).append(start)
                    taken[src] = taken.get(src, 0) + 1
                    if msg is not None:  # both sides ready, then the transfer
                        val = ack[msg] if msg in ack else transfer(
                            src, r, nbytes, _vmax(val, start if at is None else at), share)
                        if msg != EAGER_MATCHED and msg not in ack:
                            ack[msg] = val
                            wake(src)
                    arrivals.append((val, nbytes, src, red, at))
                for src, k in taken.items():
                    used[(src, r)] = used.get((src, r), 0) + k
                arrivals.sort(key=lambda a: a[0][0])
                port = start
                cpu = start
                for val, nbytes, src, red, at in arrivals:
                    c, d = cost(src, r, nbytes)
                    if overlap:
                        _, (c, d) = split(c, d)
                    # a receive posted ahead has had the port since then
                    port = _vmax(val, _add(port, c, d)) if at is None else \
                        _vmax(port, _vmax(val, _add(at, c, d)))
                    port = _add(port, *overhead(src, r, nbytes, 1))
                    if red:
                        rc, rd = reduce_terms(nbytes)
                        cpu = _add(_vmax(cpu, port), rc, rd)
                received[r] = _vmax(port, cpu)
            if any(mid not in ack for mid in waiting[r]):
                break  # a rendezvous send waits for its receiver
            got = received[r]
            assert got is not None
            done = _vmax(sent[r], got)
            for mid in waiting[r]:
                done = _vmax(done, ack[mid])
            if st.compute:
                rc, rd = reduce_terms(st.compute)
                done = _add(done, rc, rd)
            end[r] = done
            pc[r] += 1
            if pc[r] == mark[r]:
                started[r] = done
            posted[r] = False
            received[r] = None
            waiting[r] = []
    stuck = [r for r in range(p) if pc[r] < len(progs[r])]
    if stuck:
        raise RuntimeError(f"schedule deadlocks: ranks {stuck[:8]} wait forever")
    return _elapsed(end, started)


def _elapsed(end: Sequence[_Val], start: Sequence[_Val]) -> Prediction:
    """Each rank's time and term counts from its start to its end."""
    return Prediction(tuple(e[0] - s[0] for e, s in zip(end, start, strict=True)),
                      tuple(tuple(a - b for a, b in zip(e[1], s[1], strict=True))
                            for e, s in zip(end, start, strict=True)))


def _params(segsize: int, fanout: int | None, radix: int | None, dtype_size: int, root: int,
            max_requests: int, inner: dict[str, str] | None) -> Params:
    pr = Params(segsize=segsize, dtype_size=dtype_size, root=root, max_requests=max_requests)
    if fanout is not None:
        pr.fanout = fanout
    if radix is not None:
        pr.radix = radix
    if inner:
        pr.inner.update(inner)
    return pr


def predict(p2p_model: P2PModel, topology: Topology, collective: str, algorithm: str,
            size: int, *, segsize: int = 0, fanout: int | None = None,
            radix: int | None = None, dtype_size: int = 1, root: int = 0,
            max_requests: int = 0, inner: dict[str, str] | None = None,
            stat: Stat = "avg", overlap: bool = False,
            rendezvous: int | None = None, matched: bool = False,
            shared: bool = False, barrier: str | None = None) -> float:
    """Predicted latency (µs) of `algorithm` for `collective` with `size` bytes per rank as
    OSU counts them; OSU's "Avg Latency" by default (stat="max" for the slowest rank)."""
    return detail(p2p_model, topology, collective, algorithm, size, segsize=segsize,
                  fanout=fanout, radix=radix, dtype_size=dtype_size, root=root,
                  max_requests=max_requests, inner=inner, overlap=overlap,
                  rendezvous=rendezvous, matched=matched, shared=shared,
                  barrier=barrier).stat(stat)


def detail(p2p_model: P2PModel, topology: Topology, collective: str, algorithm: str,
           size: int, *, segsize: int = 0, fanout: int | None = None,
           radix: int | None = None, dtype_size: int = 1, root: int = 0,
           max_requests: int = 0, inner: dict[str, str] | None = None,
           overlap: bool = False, rendezvous: int | None = None,
           matched: bool = False, shared: bool = False,
           barrier: str | None = None) -> Prediction:
    """The full Prediction behind `predict` (per-rank times and term counts); shared=True
    costs it with flows sharing links (models.fluid: SimGrid's matched transfers).

    barrier: the algorithm of the barrier OSU's loop runs between iterations (timed from
    each rank's exit of it, so the skew it leaves counts, as in a measurement): the
    program runs as barrier, coll, barrier, coll and the last coll is timed (the first
    pair brings the ranks to the skew of a steady loop). None: all ranks start at 0."""
    pr = _params(segsize, fanout, radix, dtype_size, root, max_requests, inner)
    progs = program(collective, algorithm, topology.nprocs, size, pr)
    marks: list[int] | None = None
    if barrier is not None:  # OSU's loop: ... coll, barrier, [coll]; time the last coll
        sync = program("barrier", barrier, topology.nprocs, 0)
        marks = [2 * len(s) + len(c) for s, c in zip(sync, progs, strict=True)]
        progs = [s + c + s + c for s, c in zip(sync, progs, strict=True)]
    if len(progs) != topology.nprocs:
        raise UserError(f"simulate: program has {len(progs)} ranks but the topology "
                        f"{topology.nprocs}; valid: the same nprocs")
    if shared:
        ends, starts = simulate_shared(progs, topology, p2p_model, rendezvous, marks=marks)
        return _elapsed(ends, starts)
    return simulate(progs, topology, p2p_model, overlap, rendezvous, matched, marks)
