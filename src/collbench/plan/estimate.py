"""Wall time of a launch, for `plan`'s estimate and the live ETA (progress.py).

Real MPI: start-up, a fixed cost per point (the kernel's communicator, forcing, barriers,
the row written) and (warm-up + iterations) × the point's modelled time (Point.work_seconds);
ranks beyond the cores wait for a time slice at every step. SimGrid: the wall time is the
simulator's, not the simulated one: start-up, a cost per simulated rank, and (warm-up +
iterations) × the messages one iteration sends (ranks, size, the collective's shape and
its segments) × a cost per message. The constants were fitted on an idle machine (least
squares of the log ratio over the examples, the one-liner and campaigns that isolate each
term: benchmarks/bench_estimate.py, docs/performance.md, "Honest time"); other work on the
machine is busy_factor's, and the live ETA then corrects the estimate by the speed it
measures.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final, Protocol

from collbench.catalog.collectives import COLLECTIVES, Kind

# Backends whose wall time is the simulator's (analyse.stability.SIMULATED: a sibling layer).
SIMULATED: Final = frozenset({"simgrid"})
# collbench's own start before the first launch: Python, ompi_info, the kernel's build
# check, placement trials. Idle fit (with ALPHA_S, BETA_BYTES_PER_S of plan/model.py):
# 1.56 s, 0.14 s per launch, 0.01 ms per point, 0.43 µs, 10.4 GB/s, 8× oversubscribed;
# 14 campaigns within 0.76-1.38 of the rounded figures below.
CAMPAIGN_S: Final = 1.5
STARTUP_S: Final = 0.15  # mpirun, MPI_Init and MPI_Finalize of a local launch (^ofi)
POINT_OVERHEAD_S: Final = 2e-5  # per point, beside its iterations
# np=4 on 2 cores: every message waits for its peer's time slice (small messages 7×,
# 1 MiB 3× the np=2 time; one factor for both).
OVERSUBSCRIBED_SLOWDOWN: Final = 8.0
SIM_STARTUP_S: Final = 0.15  # smpirun, the platform, the kernel's set-up
# Start-up grows with the square of the ranks (SMPI's set-up of every rank and
# communicator). SIM_RANK2_S and SIM_MESSAGE_S: least squares on the four SimGrid examples
# on an idle machine (load 1.0-1.7 on 2 cores: actual / estimate 0.72-1.21;
# docs/performance.md, "Honest time"); a loaded machine is busy_factor's.
SIM_RANK2_S: Final = 5e-5
SIM_MESSAGE_S: Final = 16e-6  # per simulated message of an iteration
SIM_SEGMENT: Final = 32 << 10  # bytes per segment when the point leaves it to the MPI
# SimGrid re-solves the bandwidth sharing of every message in flight whenever one starts or
# ends, so a schedule that posts them all at once costs more per message: beyond this many,
# in proportion (fitted on SMPI's iallgather and ialltoall at 48 ranks, P(P-1) = 2,256 at
# once: 244 s and 140 s for 84 calls each at a load of about 4, 1.5 and 0.9 × this estimate
# with busy_factor).
SIM_IN_FLIGHT: Final = 64
RUNNABLE_SAMPLES: Final = 5  # machine_load: samples of the runnable count ...
RUNNABLE_GAP_S: Final = 0.01  # ... this far apart (50 ms in all, once per process)


class LaunchLike(Protocol):
    """What `describe` reads of a plan's launch (plan.model.Launch)."""

    @property
    def nprocs(self) -> int: ...
    @property
    def oversubscribe(self) -> bool: ...
    @property
    def points(self) -> Sequence[PointLike]: ...


class PointLike(Protocol):
    """What the model reads of a plan's point (plan.model.Point)."""

    @property
    def collective(self) -> str: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def segsize(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def iterations(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def test_calls(self) -> int | None: ...
    @property
    def hide_steps(self) -> int: ...
    def work_seconds(self, nprocs: int) -> float: ...
    def relative_compute_seconds(self, nprocs: int) -> float: ...


@functools.cache
def machine_load() -> tuple[float, int]:
    """(the processes other than this one that want a core now, the cores this process may
    use), read once per process: before the first launch it is other work's, and the live
    ETA then stays consistent. The kernel's count of runnable tasks (/proc/loadavg's fourth
    field), the median of a few samples, not the load average: that lags a minute behind
    and still counts collbench's own last command (measured: beside 2 busy loops it read
    2.0, the local examples ran 2.1-3.0× the idle estimate). Without that file, the 1-minute
    load average less this process."""
    cores = max(1, len(os.sched_getaffinity(0)))
    counts: list[int] = []
    for _ in range(RUNNABLE_SAMPLES):
        try:
            field = Path("/proc/loadavg").read_text().split()[3]
            counts.append(int(field.split("/")[0]) - 1)  # this process is running
        except (OSError, ValueError, IndexError):  # not Linux: the load average
            break
        time.sleep(RUNNABLE_GAP_S)
    if counts:
        return max(0.0, float(statistics.median(counts))), cores
    try:
        load = os.getloadavg()[0] - 1
    except OSError:  # no load average either: as if idle
        load = 0.0
    return max(0.0, load), cores


def busy_factor(ranks: int) -> float:
    """How much slower `ranks` busy processes run beside the machine's other runnable work:
    each gets cores / (others + ranks) of a core when they are more than the cores
    (measured on 2 cores, local examples and the one-liner beside 2 and 4 busy loops:
    1.5-3.0× and 1.1-1.8× the idle estimate, i.e. 0.75-1.5 and 0.4-0.6 of these factors).
    SimGrid and collbench itself run as one process: ranks = 1 there."""
    others, cores = machine_load()
    return max(1.0, (others + min(ranks, cores)) / cores)


def campaign_seconds() -> float:
    """collbench's own start before the first launch: one process, slowed like SimGrid's."""
    return CAMPAIGN_S * busy_factor(1)


def launch_seconds(nprocs: int, oversubscribe: bool, points: Sequence[PointLike],
                   simulated: bool, startup_s: float | None = None) -> float:
    """Modelled wall time of one launch (start-up included)."""
    if simulated:  # one process, however many simulated ranks
        start = SIM_STARTUP_S + SIM_RANK2_S * nprocs**2 if startup_s is None else startup_s
        return start * busy_factor(1) + sum(point_seconds(p, nprocs, True) for p in points)
    work = sum(point_seconds(p, nprocs, False) for p in points)  # busy_factor included
    slow = OVERSUBSCRIBED_SLOWDOWN if oversubscribe else 1.0
    return (STARTUP_S if startup_s is None else startup_s) * busy_factor(nprocs) + work * slow


def point_seconds(point: PointLike, nprocs: int, simulated: bool) -> float:
    """Modelled wall time of one point (without the launch's start-up)."""
    if not simulated:
        # compute sized to a measured time is slowed twice (Point.relative_compute_seconds;
        # measured beside 2 busy loops: the non-blocking example 2.4× the estimate without)
        slow = busy_factor(nprocs)
        return (POINT_OVERHEAD_S + point.work_seconds(nprocs)
                + point.relative_compute_seconds(nprocs) * (slow - 1)) * slow
    return (point.iterations + point.warmup) * sim_loops(point) * weighted(point, nprocs) \
        * SIM_MESSAGE_S * busy_factor(1)


def sim_loops(point: PointLike) -> int:
    """Timed loops of a point under SimGrid: a non-blocking point's pure and overlapped
    runs; the kernel skips the hide_steps sweep under SMPI (overlap is not modelled)."""
    return 1 if point.test_calls is None else 2


def messages(point: PointLike, nprocs: int) -> int:
    """Messages one iteration sends: the collective's (by its shape: a tree or a pipeline
    for the rooted ones, a log-step exchange for the all-to-some, P² for all-to-all), each
    large one cut in segments, plus OSU's barrier between iterations. Non-blocking ones are
    SMPI's linear schedules, unsegmented."""
    p = max(nprocs, 2)
    steps = math.ceil(math.log2(p))
    coll = COLLECTIVES.get(point.collective)
    if coll is None or coll.kind is Kind.P2P:
        return 2
    segment = point.segsize or SIM_SEGMENT
    segments = max(1, math.ceil(point.size_bytes / segment))
    barrier = p * steps
    if coll.nonblocking:  # SMPI's own schedules (smpi_nbc_impl.cpp): linear, one message each
        return _smpi_nonblocking(point.collective, p) + barrier
    if coll.kind is Kind.SYNC:
        return barrier
    name = point.collective.removeprefix("i")
    if name.startswith("alltoall") or "ring" in point.algorithm:
        return p * (p - 1) * segments + barrier
    if coll.kind is Kind.ROOTED or name == "reduce":
        return (p - 1) * segments + barrier  # a tree, a pipeline or a star of segments
    return p * steps * segments + barrier  # allreduce, allgather, ...: log-step exchanges


def weighted(point: PointLike, nprocs: int) -> float:
    """messages(), those of a non-blocking call (all posted at once) counted
    in-flight / SIM_IN_FLIGHT times each when more than SIM_IN_FLIGHT are in flight."""
    coll = COLLECTIVES.get(point.collective)
    if coll is None or not coll.nonblocking:
        return messages(point, nprocs)
    p = max(nprocs, 2)
    at_once = _smpi_nonblocking(point.collective, p)
    return messages(point, nprocs) + at_once * (max(1.0, at_once / SIM_IN_FLIGHT) - 1)


def _smpi_nonblocking(collective: str, p: int) -> int:
    """Messages of one call of SMPI's non-blocking collective: the rooted ones a star from
    or to the root, ibarrier a star both ways, the scans every pair once, the others every
    ordered pair (iallgather, ialltoall, iallreduce, ireduce_scatter post all at once)."""
    if collective == "ibarrier":
        return 2 * (p - 1)
    if COLLECTIVES[collective].kind is Kind.ROOTED or collective == "ireduce":
        return p - 1
    if collective in ("iscan", "iexscan"):
        return p * (p - 1) // 2
    return p * (p - 1)


def describe(launches: Sequence[LaunchLike], simulated: bool) -> str:
    """How the estimate was made, with its terms, for `plan`: what the total is made of
    (the sum of launch_seconds over the launches, plus CAMPAIGN_S)."""
    points = [p for la in launches for p in la.points]
    runs = sum((p.iterations + p.warmup) * (sim_loops(p) if simulated else 1) for p in points)
    if simulated:
        sent = sum((p.iterations + p.warmup) * messages(p, la.nprocs) * sim_loops(p)
                   for la in launches for p in la.points)
        heavy = sum((p.iterations + p.warmup) * weighted(p, la.nprocs) * sim_loops(p)
                    for la in launches for p in la.points)
        crowd = "" if heavy == sent else (
            f"; {heavy:,.0f} weighted: over {SIM_IN_FLIGHT} in flight at once, each costs "
            f"in-flight/{SIM_IN_FLIGHT}")
        start = sum(SIM_STARTUP_S + SIM_RANK2_S * la.nprocs**2 for la in launches)
        return (f"the simulator's wall time: collbench's start {CAMPAIGN_S:g} s + "
                f"{_launches(len(launches))} {start:.1f} s ({SIM_STARTUP_S:g} s + "
                f"{SIM_RANK2_S * 1e6:g} µs × ranks²) + {len(points)} points × warm-up and "
                f"iterations ({runs:,} in all) × the messages each iteration simulates "
                f"(by ranks, size, collective and segments: {sent:,} in all{crowd}) × "
                f"{SIM_MESSAGE_S * 1e6:g} µs each{_loaded([1])}")
    over = sum(1 for la in launches if la.oversubscribe)
    work = sum(p.work_seconds(la.nprocs) for la in launches for p in la.points)
    text = (f"collbench's start {CAMPAIGN_S:g} s + {_launches(len(launches))} × "
            f"{STARTUP_S:g} s + {len(points)} points × ({POINT_OVERHEAD_S * 1e3:g} ms + "
            f"warm-up and iterations ({runs:,} in all) × the point's modelled time: "
            f"α·⌈log2 P⌉ + bytes/β, {work:.1f} s in all)")
    if over:
        text += (f", × {OVERSUBSCRIBED_SLOWDOWN:g} in the {over} launches with more ranks "
                 "than cores")
    twice = any(p.relative_compute_seconds(la.nprocs) for la in launches for p in la.points)
    return text + _loaded([1, *(la.nprocs for la in launches)], twice)


def _loaded(ranks: Sequence[int], twice: bool = False) -> str:
    """The busy_factor term of describe(), '' on an idle machine; `twice`: the plan has
    compute sized to a measured time, which is slowed twice."""
    others, cores = machine_load()
    slowed = sorted({round(busy_factor(r), 2) for r in ranks} - {1.0})
    if not slowed:
        return ""
    return (f", × {'-'.join(f'{f:g}' for f in (slowed[0], slowed[-1])[:len(slowed)])}"
            f" for the machine's other work ({others:g} other processes want a core now, "
            f"{cores} cores: (others + ranks) / cores"
            f"{'; twice for compute sized to the measured pure time' if twice else ''})")


def _launches(n: int) -> str:
    return f"{n} launch start-up{'s' if n != 1 else ''}"
