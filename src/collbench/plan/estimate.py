"""Wall time of a launch, for `plan`'s estimate and the live ETA (progress.py).

Real MPI: start-up, a fixed cost per point (the kernel's communicator, forcing, barriers,
the row written) and (warm-up + iterations) × the point's modelled time (Point.work_seconds);
ranks beyond the cores wait for a time slice at every step. SimGrid: the wall time is the
simulator's, not the simulated one: start-up, a cost per simulated rank, and (warm-up +
iterations) × the messages one iteration sends (ranks, size, the collective's shape and
its segments) × a cost per message. The constants were fitted on this project's examples
(benchmarks/bench_estimate.py; docs/performance.md, "Honest time"), between a quiet and a
loaded run of the shared 2-core machine (the same launch took 0.4 s and 2 s): the live ETA
then corrects them by the speed it measures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final, Protocol

from collbench.catalog.collectives import COLLECTIVES, Kind

# Backends whose wall time is the simulator's (analyse.stability.SIMULATED: a sibling layer).
SIMULATED: Final = frozenset({"simgrid"})
# collbench's own start before the first launch: Python, ompi_info, the kernel's build
# check, placement trials (measured: 1.5-4 s over the examples, local and SimGrid).
CAMPAIGN_S: Final = 2.5
STARTUP_S: Final = 0.6  # mpirun, MPI_Init and MPI_Finalize of a local launch (^ofi)
POINT_OVERHEAD_S: Final = 1.5e-3  # per point, beside its iterations
OVERSUBSCRIBED_SLOWDOWN: Final = 4.0  # measured: np=4 on 2 cores against np=2
SIM_STARTUP_S: Final = 0.15  # smpirun, the platform, the kernel's set-up
# Start-up grows with the square of the ranks (measured: reduce at 512 ranks on jupiter,
# 6 sizes, took 26 s a launch, about 8 s of it for the messages; 0.2 s at 16 ranks).
SIM_RANK2_S: Final = 7e-5
SIM_MESSAGE_S: Final = 50e-6  # per simulated message of an iteration
SIM_SEGMENT: Final = 32 << 10  # bytes per segment when the point leaves it to the MPI


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


def launch_seconds(nprocs: int, oversubscribe: bool, points: Sequence[PointLike],
                   simulated: bool, startup_s: float | None = None) -> float:
    """Modelled wall time of one launch (start-up included)."""
    if simulated:
        start = SIM_STARTUP_S + SIM_RANK2_S * nprocs**2 if startup_s is None else startup_s
        return start + sum(point_seconds(p, nprocs, True) for p in points)
    work = sum(point_seconds(p, nprocs, False) for p in points)
    slow = OVERSUBSCRIBED_SLOWDOWN if oversubscribe else 1.0
    return (STARTUP_S if startup_s is None else startup_s) + work * slow


def point_seconds(point: PointLike, nprocs: int, simulated: bool) -> float:
    """Modelled wall time of one point (without the launch's start-up)."""
    if not simulated:
        return POINT_OVERHEAD_S + point.work_seconds(nprocs)
    return (point.iterations + point.warmup) * sim_loops(point) * messages(point, nprocs) \
        * SIM_MESSAGE_S


def sim_loops(point: PointLike) -> int:
    """Timed loops of a point under SimGrid: a non-blocking point's pure and overlapped
    runs; the kernel skips the hide_steps sweep under SMPI (overlap is not modelled)."""
    return 1 if point.test_calls is None else 2


def messages(point: PointLike, nprocs: int) -> int:
    """Messages one iteration sends: the collective's (by its shape: a tree or a pipeline
    for the rooted ones, a log-step exchange for the all-to-some, P² for all-to-all), each
    large one cut in segments, plus OSU's barrier between iterations."""
    p = max(nprocs, 2)
    steps = math.ceil(math.log2(p))
    coll = COLLECTIVES.get(point.collective)
    if coll is None or coll.kind is Kind.P2P:
        return 2
    segment = point.segsize or SIM_SEGMENT
    segments = max(1, math.ceil(point.size_bytes / segment))
    barrier = p * steps
    if coll.kind is Kind.SYNC:
        return barrier
    name = point.collective.removeprefix("i")
    if name.startswith("alltoall") or "ring" in point.algorithm:
        return p * (p - 1) * segments + barrier
    if coll.kind is Kind.ROOTED or name == "reduce":
        return (p - 1) * segments + barrier  # a tree, a pipeline or a star of segments
    return p * steps * segments + barrier  # allreduce, allgather, ...: log-step exchanges


def describe(launches: Sequence[LaunchLike], simulated: bool) -> str:
    """How the estimate was made, with its terms, for `plan`: what the total is made of
    (the sum of launch_seconds over the launches, plus CAMPAIGN_S)."""
    points = [p for la in launches for p in la.points]
    runs = sum((p.iterations + p.warmup) * (sim_loops(p) if simulated else 1) for p in points)
    if simulated:
        sent = sum((p.iterations + p.warmup) * messages(p, la.nprocs) * sim_loops(p)
                   for la in launches for p in la.points)
        start = sum(SIM_STARTUP_S + SIM_RANK2_S * la.nprocs**2 for la in launches)
        return (f"the simulator's wall time: collbench's start {CAMPAIGN_S:g} s + "
                f"{_launches(len(launches))} {start:.1f} s ({SIM_STARTUP_S:g} s + "
                f"{SIM_RANK2_S * 1e6:g} µs × ranks²) + {len(points)} points × warm-up and "
                f"iterations ({runs:,} in all) × the messages each iteration simulates "
                f"(by ranks, size, collective and segments: {sent:,} in all) × "
                f"{SIM_MESSAGE_S * 1e6:g} µs each")
    over = sum(1 for la in launches if la.oversubscribe)
    work = sum(p.work_seconds(la.nprocs) for la in launches for p in la.points)
    text = (f"collbench's start {CAMPAIGN_S:g} s + {_launches(len(launches))} × "
            f"{STARTUP_S:g} s + {len(points)} points × ({POINT_OVERHEAD_S * 1e3:g} ms + "
            f"warm-up and iterations ({runs:,} in all) × the point's modelled time: "
            f"α·⌈log2 P⌉ + bytes/β, {work:.1f} s in all)")
    if over:
        text += (f", × {OVERSUBSCRIBED_SLOWDOWN:g} in the {over} launches with more ranks "
                 "than cores")
    return text


def _launches(n: int) -> str:
    return f"{n} launch start-up{'s' if n != 1 else ''}"
