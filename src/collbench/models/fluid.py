"""Cost a program as flows that share links: a fluid, event-driven simulation.

`algorithms.simulate` costs each message on its own. When several messages cross one link
at once, they share its bandwidth; on SimGrid's platforms (platforms/simgrid_xml.py) that
is what made the p95 error (docs/models.md, "How accurate"). This module replays the
per-rank programs in time order and shares bandwidth as SimGrid's network model does:

- links, from the placement (`links`): each rank has a link to the cores of its socket
  (capacity β_core) and one to everything off its socket (the larger of β_socket and
  β_node, simgrid_xml's "dma" link), one per direction; each node has a network card per
  direction (β_node); the bus between a node's sockets bounds each flow (β_socket) but is
  not shared. A message crosses its sender's and receiver's links and, between nodes,
  both nodes' cards;
- a transfer starts once its send and its receive are both posted (SMPI matches them
  first), waits its level's latency α, then moves its bytes at the rate max-min fair
  sharing gives it on every link it crosses, never above its level's bandwidth β(b) (so
  a message alone costs exactly its ping-pong α + b/β); each flow's share is weighted by
  1/penalty with penalty = α + S·Σ 1/capacity over its links (SimGrid's CM02 weighting,
  network/weight-S = S, 8775 for SMPI's model);
- sends below `rendezvous` bytes are detached (their sender does not wait); larger ones,
  and synchronous ones (Step.sync), keep their sender until the bytes have arrived
  (smpi/send-is-detached-thresh);
- a step ends when its receives and waiting sends are done, plus γ·b per reduced byte;
  receives a step posts ahead (Step.posts: an irecv waited for by a later step) match
  and start their transfer from then on.

Link capacities are the levels' last-regime bandwidths; a flow's own bound is its level's
bandwidth at its size. Term counts ride along each rank's critical path as in `simulate`;
a shared transfer counts the bytes it would have moved alone in the time it took.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from collbench.models.p2p import LEVELS, P2PModel
from collbench.models.steps import Program
from collbench.models.topology import Topology

TERMS_N: Final = 9  # the layout of algorithms.TERMS
SMPI_WEIGHT_S: Final = 8775.0  # SimGrid's network/weight-S default for the SMPI model (B)
_EPS: Final = 1e-12

_Val = tuple[float, tuple[float, ...]]
_ZERO: Final = (0.0,) * TERMS_N
Link = tuple[str, int, int]  # (kind, rank or node, direction 0 = out, 1 = in)


@dataclass
class _Flow:
    src: int
    dst: int
    nbytes: int
    level: str
    links: tuple[Link, ...]
    bound: float  # bytes/µs
    weight: float
    start: _Val
    rendezvous: bool
    index: int  # its place on the (src, dst) channel: the receive it matched
    remaining: float = 0.0
    rate: float = 0.0
    began: float = 0.0  # when its bandwidth phase began


@dataclass
class _Rank:
    pc: int = 0
    pending: int = 0
    done: _Val = (0.0, _ZERO)
    reduce_bytes: list[tuple[float, int]] = field(default_factory=list)  # (arrival, bytes)


def _add(v: _Val, dt: float, terms: tuple[float, ...]) -> _Val:
    return v[0] + dt, tuple(a + b for a, b in zip(v[1], terms, strict=True))


def _vmax(a: _Val, b: _Val) -> _Val:
    return b if b[0] > a[0] else a


def capacities(model: P2PModel) -> dict[str, float]:
    """Link capacity (bytes/µs) per link kind: the levels' last-regime bandwidths."""
    bw = {lvl: model.levels[lvl].regimes[-1].beta_bytes_per_s * 1e-6
          for lvl in LEVELS if lvl in model.levels}
    off = [bw[lvl] for lvl in ("socket", "node") if lvl in bw]
    return {"mem": bw.get("core", max(bw.values())),
            "dma": max(off) if off else max(bw.values()),
            "nic": bw.get("node", max(bw.values()))}


def links(topology: Topology, src: int, dst: int) -> tuple[Link, ...]:
    """The shared links a message from src to dst crosses (module docstring)."""
    level = topology.level(src, dst)
    if level == "core":
        return (("mem", src, 0), ("mem", dst, 1))
    if level == "socket":
        return (("dma", src, 0), ("dma", dst, 1))
    a, b = topology.place(src).node, topology.place(dst).node
    return (("dma", src, 0), ("nic", a, 0), ("nic", b, 1), ("dma", dst, 1))


def _share(active: list[_Flow], cap: dict[str, float]) -> None:
    """Weighted max-min fair rates (progressive filling) of the flows in their bandwidth
    phase; each flow also bounded by its own level bandwidth."""
    left: dict[Link, float] = {}
    members: dict[Link, list[_Flow]] = {}
    for f in active:
        f.rate = -1.0
        for ln in f.links:
            left.setdefault(ln, cap[ln[0]])
            members.setdefault(ln, []).append(f)
    free = set(range(len(active)))
    index = {id(f): i for i, f in enumerate(active)}
    while free:
        best = min(active[i].bound / active[i].weight for i in free)
        for ln, fs in members.items():
            w = sum(f.weight for f in fs if f.rate < 0)
            if w > 0:
                best = min(best, left[ln] / w)
        fixed = [i for i in free if active[i].bound / active[i].weight <= best * (1 + 1e-9)]
        for ln, fs in members.items():
            w = sum(f.weight for f in fs if f.rate < 0)
            if w > 0 and left[ln] / w <= best * (1 + 1e-9):
                fixed += [index[id(f)] for f in fs if f.rate < 0]
        for i in set(fixed):
            f = active[i]
            f.rate = min(best * f.weight, f.bound)
            free.discard(i)
            for ln in f.links:
                left[ln] = max(left[ln] - f.rate, 0.0)


def simulate_shared(progs: Program, topology: Topology, model: P2PModel,
                    rendezvous: int | None = None, weight_s: float = SMPI_WEIGHT_S,
                    marks: Sequence[int] | None = None) -> tuple[list[_Val], list[_Val]]:
    """Per rank, (time µs, term counts) at its end, and when it started step marks[r]
    (0 for all by default: the start)."""
    p = len(progs)
    cap = capacities(model)
    gamma = model.gamma_us_per_byte
    level_index = {lvl: i for i, lvl in enumerate(LEVELS)}
    ranks = [_Rank() for _ in range(p)]
    sends: dict[tuple[int, int], list[tuple[_Val, int, bool]]] = {}
    recvs: dict[tuple[int, int], list[_Val]] = {}
    matched: dict[tuple[int, int], int] = {}
    early: dict[tuple[int, int], deque[int]] = {}  # receives posted ahead, not waited for
    want: dict[tuple[int, int, int], bool] = {}  # receives a step waits for -> reduce?
    arrived: dict[tuple[int, int, int], tuple[_Val, int]] = {}  # posted ahead, in already
    latency: list[tuple[float, int, _Flow]] = []  # (time its bandwidth phase begins, ...)
    timers: list[tuple[float, int, int]] = []  # (time, seq, rank): a step's reduction ends
    active: list[_Flow] = []
    seq = itertools.count()
    now = 0.0
    mark = list(marks) if marks is not None else [0] * p
    started: list[_Val | None] = [None] * p
    busy_on = Counter(topology.place(r).node for r in range(p))  # for a load term

    def flow_of(src: int, dst: int, nbytes: int, start: _Val, rdv: bool, k: int) -> _Flow:
        level = topology.level(src, dst)
        lm = model.level(topology.link_level(src, dst))  # counted under level
        route = links(topology, src, dst)
        busy = busy_on[topology.place(src).node]
        alpha = lm.alpha_us(nbytes) + lm.load_us(busy)
        bound = lm.regime(nbytes).beta_bytes_per_s * 1e-6 / lm.slowdown(busy)
        penalty = alpha * 1e-6 + weight_s * sum(1e-6 / cap[ln[0]] for ln in route)
        if level == "socket":  # the bus: not shared, but on the route
            penalty += weight_s * 1e-6 / bound
        d = [0.0] * TERMS_N
        d[level_index[level]] = 1.0
        d[7] = alpha
        return _Flow(src, dst, nbytes, level, route, bound, 1.0 / penalty if penalty > 0
                     else 1.0, _add(start, alpha, tuple(d)), rdv, k, float(nbytes))

    def try_match(src: int, dst: int) -> None:
        k = matched.get((src, dst), 0)
        s, r = sends.get((src, dst), []), recvs.get((src, dst), [])
        while k < len(s) and k < len(r):
            sval, nbytes, rdv = s[k]
            f = flow_of(src, dst, nbytes, _vmax(sval, r[k]), rdv, k)
            heapq.heappush(latency, (f.start[0], next(seq), f))
            k += 1
        matched[(src, dst)] = k

    def finish_step(r: int) -> None:
        """The step's receives are in: reduce what arrived (in arrival order, overlapping
        later arrivals), then its compute; then the next step."""
        rk = ranks[r]
        cpu_t, reduced = 0.0, 0
        for at, nbytes in sorted(rk.reduce_bytes):
            cpu_t = max(cpu_t, at) + gamma * nbytes
            reduced += nbytes
        step = progs[r][rk.pc]
        end_t = max(rk.done[0], cpu_t) + gamma * step.compute
        d = [0.0] * TERMS_N
        d[6] = float(reduced + step.compute)
        cpu = (end_t, tuple(a + b for a, b in zip(rk.done[1], d, strict=True)))
        rk.done, rk.reduce_bytes = cpu, []
        rk.pc += 1
        if cpu[0] > now + _EPS:
            heapq.heappush(timers, (cpu[0], next(seq), r))
        else:
            start_step(r)

    def start_step(r: int) -> None:
        rk = ranks[r]
        while rk.pc < len(progs[r]):
            if started[r] is None and rk.pc >= mark[r]:
                started[r] = rk.done
            st = progs[r][rk.pc]
            for dst, nbytes in st.sends:
                rdv = st.sync or (rendezvous is not None and nbytes >= rendezvous)
                rk.pending += rdv
                sends.setdefault((r, dst), []).append((rk.done, nbytes, rdv))
                try_match(r, dst)
            for src in st.posts:
                early.setdefault((src, r), deque()).append(post(src, r, rk.done))
            for src, red in st.recvs:
                ahead = early.get((src, r))
                k = ahead.popleft() if ahead else post(src, r, rk.done)
                got = arrived.pop((src, r, k), None)
                if got is None:
                    want[(src, r, k)] = red
                    rk.pending += 1
                    continue
                rk.done = _vmax(rk.done, got[0])
                if red:
                    rk.reduce_bytes.append((got[0][0], got[1]))
            if rk.pending:
                return
            if st.compute or rk.reduce_bytes:
                finish_step(r)
                return
            rk.pc += 1

    def post(src: int, dst: int, at: _Val) -> int:
        """Post a receive on the channel; its index there."""
        chan = recvs.setdefault((src, dst), [])
        chan.append(at)
        try_match(src, dst)
        return len(chan) - 1

    def complete(f: _Flow, at: _Val) -> None:
        key = (f.src, f.dst, f.index)
        if key not in want:  # posted ahead: the step that waits for it takes it
            arrived[key] = (at, f.nbytes)
        for r, waited in ((f.dst, key in want), (f.src, f.rendezvous)):
            if not waited:
                continue
            rk = ranks[r]
            rk.done = _vmax(rk.done, at)
            if r == f.dst and want.pop(key):
                rk.reduce_bytes.append((at[0], f.nbytes))
            rk.pending -= 1
            if rk.pending == 0:
                finish_step(r)

    for r in range(p):
        start_step(r)
    while latency or active or timers:
        if active:
            _share(active, cap)
        t_next = min([latency[0][0]] if latency else [], default=float("inf"))
        if timers:
            t_next = min(t_next, timers[0][0])
        for f in active:
            t_next = min(t_next, now + f.remaining / f.rate if f.rate > 0 else float("inf"))
        for f in active:
            f.remaining -= f.rate * (t_next - now)
        now = t_next
        done = [f for f in active if f.remaining <= max(f.nbytes, 1) * 1e-9]
        active = [f for f in active if f.remaining > max(f.nbytes, 1) * 1e-9]
        while latency and latency[0][0] <= now + _EPS:
            _, _, f = heapq.heappop(latency)
            f.began = now
            (done if f.nbytes == 0 else active).append(f)
        for f in sorted(done, key=lambda g: (g.src, g.dst)):
            spent = now - f.began
            d = [0.0] * TERMS_N
            d[3 + level_index[f.level]] = spent * f.bound
            d[8] = spent
            complete(f, _add(f.start, spent, tuple(d)))
        while timers and timers[0][0] <= now + _EPS:
            _, _, r = heapq.heappop(timers)
            start_step(r)
    stuck = [r for r in range(p) if ranks[r].pc < len(progs[r])]
    if stuck:
        raise RuntimeError(f"schedule deadlocks: ranks {stuck[:8]} wait forever")
    return [rk.done for rk in ranks], [v if v is not None else rk.done
                                       for v, rk in zip(started, ranks, strict=True)]

