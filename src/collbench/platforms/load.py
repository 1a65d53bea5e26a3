"""The load term of a platform: latency a message gains when every core of its node is busy.

A ping-pong keeps two cores of a node busy; a collective keeps all of them busy, and on a
many-core node (AMD EPYC: the cache lines of a message between two CCXs go through the IO
die) a message then takes longer than the ping-pong says. No ping-pong can show it; a
barrier can (all ranks exchange 0-byte messages in rounds, nothing else): `platform
calibrate --load-barrier NPROCS=US` takes osu_barrier's time at a few process counts of
`--map-by core` runs and fits, per count of busy cores of a node, the extra latency of the
`inter_socket` level that makes the simulated barrier (Open MPI's tuned default, collbench's
ports) take that time. The statistic: osu_barrier times barriers back to back, so every
rank's mean is the same period and its min_us is its avg_us; collbench's kernel puts an
untimed barrier after each timed one (as for every collective), so its fastest rank gains
the skew the untimed barrier leaves, while the mean over ranks (avg_us) is still the period
of one barrier: the simulated avg_us is fitted to osu_barrier's min_us. Fitted by the secant
rule on the simulation (the simulated time grows with the extra latency), then made
non-decreasing in the busy cores (more load never speeds a message up); written to the
level's `load_latency_us` table, which the loader and `model predict` read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from collbench.errors import UserError
from collbench.platforms.model import COUNT, MAX_CORES, OVERHEAD, Cluster, Level

LEVEL: Final = "inter_socket"  # the level whose messages cross the loaded fabric
START_US: Final = 0.1  # the secant's second point (µs of extra latency)
ROUNDS: Final = 4
TIMES: Final = (1e-3, 1e6)  # a barrier's time, µs

BarrierTimes = dict[int, float]  # nprocs -> barrier min_us
SimulateBarrier = Callable[[Cluster, list[int]], BarrierTimes]


def parse_barrier(items: list[str], where: str = "--load-barrier") -> BarrierTimes:
    """NPROCS=US items (one line naming the bad one otherwise)."""
    out: BarrierTimes = {}
    for item in items:
        n_text, sep, us_text = item.partition("=")
        try:
            n, us = int(n_text), float(us_text)
        except ValueError:
            n, us = 0, float("nan")
        if not sep or not COUNT.holds(n) or n < 3 or not TIMES[0] <= us <= TIMES[1]:
            raise UserError(f"{where}: {item!r} is not valid; valid: NPROCS=US with NPROCS "
                            f"3 to {MAX_CORES} and US the barrier's min_us from "
                            f"{TIMES[0]:g} to {TIMES[1]:g}, e.g. 32=2.7")
        out[n] = us
    return out


def with_load(cluster: Cluster, rows: list[tuple[int, float]]) -> Cluster:
    """`cluster` with these load rows on inter_socket, and on inter_package when it has one
    (a message between packages crosses the same loaded fabric on its way)."""
    update = {}
    for name in (LEVEL, "inter_package"):
        level = cluster.level(name)
        if level is not None:
            update[name] = Level.model_validate({**level.model_dump(), "load_latency_us": rows})
    assert LEVEL in update
    return cluster.model_copy(update={"levels": cluster.levels.model_copy(update=update)})


def _monotone(values: list[float]) -> list[float]:
    """The closest non-decreasing sequence (least squares: pool adjacent violators)."""
    blocks: list[list[float]] = []  # [sum, count]
    for v in values:
        blocks.append([v, 1.0])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    return [b[0] / b[1] for b in blocks for _ in range(int(b[1]))]


def _rows(extra: Mapping[int, float], monotone: bool = True) -> list[tuple[int, float]]:
    """[[2, 0], [busy, extra], ...]: 0 at a ping-pong's two busy cores; `monotone`:
    non-decreasing in the busy cores (during the fit each count is fitted on its own)."""
    busy = sorted(extra)
    values = [min(max(extra[b], 0.0), OVERHEAD.high) for b in busy]
    if monotone:
        values = _monotone(values)
    return [(2, 0.0), *((b, round(v, 6)) for b, v in zip(busy, values, strict=True))]


def fit_load(cluster: Cluster, barrier: BarrierTimes, simulate: SimulateBarrier,
             notes: list[str]) -> tuple[Cluster, BarrierTimes]:
    """`cluster` with the fitted load term, and the barrier it then simulates."""
    if cluster.level(LEVEL) is None or cluster.sockets_per_node < 2:
        raise UserError(f"--load-barrier: the platform has no {LEVEL} level; valid: a "
                        "platform with 2 or more sockets per node")
    per_node = cluster.cores_per_node
    busy = {n: min(n, per_node) for n in barrier}  # --map-by core fills a node first
    fit = {n: t for n, t in barrier.items() if n <= per_node}
    if not fit:
        raise UserError(f"--load-barrier: no process count up to {per_node} (one node); "
                        "valid: NPROCS of a barrier within one node")
    counts = sorted(barrier)
    x0 = {n: 0.0 for n in fit}
    y0 = simulate(with_load(cluster, []), counts)
    x1 = {n: START_US for n in fit}
    y1 = simulate(with_load(cluster, _rows({busy[n]: x1[n] for n in fit}, False)), counts)
    for _ in range(ROUNDS - 1):
        nxt = {}
        for n in fit:
            slope = (y1[n] - y0[n]) / (x1[n] - x0[n]) if x1[n] != x0[n] else 0.0
            nxt[n] = x1[n] + (fit[n] - y1[n]) / slope if slope > 0 else x1[n]
        x0, y0 = x1, y1
        x1 = {n: max(v, 0.0) for n, v in nxt.items()}
        y1 = simulate(with_load(cluster, _rows({busy[n]: x1[n] for n in fit}, False)), counts)
    rows = _rows({busy[n]: x1[n] for n in fit})
    result = with_load(cluster, rows)
    simulated = simulate(result, counts)
    notes.append(f"load: {LEVEL} latency + " + ", ".join(
        f"{us:.3g} µs at {b} busy cores" for b, us in rows[1:])
        + "; barrier (µs, osu_barrier's min_us measured / avg_us simulated) "
        + ", ".join(f"{n} ranks {barrier[n]:.3g} / {simulated[n]:.3g}"
                    + ("" if n in fit else " (check)") for n in counts))
    return result, simulated
