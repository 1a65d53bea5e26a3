"""The socket bandwidth of a platform from a multi-pair bandwidth measurement.

A ping-pong has one flow; what every core of a socket sending off it at once gets is the
socket's port (Rome's CCD-to-IO-die link, Intel's UPI or mesh, the memory controller of a
NUMA domain). osu_mbw_mr (or collbench's `mbw_mr`) measures it: ranks 0..P/2-1 each stream
windows of messages to rank + P/2, and the figure is the pairs' aggregate bandwidth. With
`--map-by core` and P/2 a multiple of the cores per socket, the senders fill k = P/2 /
cores_per_socket whole sockets of one node and the receivers the next k, so every
sender's socket carries cores_per_socket flows out: the aggregate is k ports' worth when
the port is what limits them. `platform calibrate --multi-pair` fits `[memory]
socket_bandwidth_mbs` so that the simulated aggregate at the largest size of the smallest
such P is the measured one (scaled by measured / simulated, as the ping-pong's factors
are), checks the other counts, and refuses a measurement the port does not limit (the
description with a port that never limits already simulates no more than was measured:
then the pairs are limited by something else, their links or the load, and a figure
fitted to them would be a guess).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from collbench.errors import UserError
from collbench.platforms.model import Cluster, Memory

MIN_BYTES: Final = 65_536  # below it a window of messages measures the message rate
ROUNDS: Final = 6
TOLERANCE: Final = 0.005  # relative error the fit stops at
SATURATED: Final = 1.02  # the unlimited simulation must exceed the measurement by this
BOUNDS: Final = (1e-3, 1e7)  # MB/s, as --socket-bandwidth

Aggregate = dict[tuple[int, int], float]  # (nprocs, size_bytes) -> aggregate MB/s
SimulatePairs = Callable[[Cluster, list[tuple[int, int]]], Aggregate]


@dataclass(frozen=True)
class Fit:
    cluster: Cluster
    measured: Aggregate  # the points used: the fitted one first, then the checks
    simulated: Aggregate
    note: str


def usable(found: Aggregate, cluster: Cluster, where: str) -> list[tuple[int, int]]:
    """The largest size measured at each process count whose senders fill whole sockets of
    one node, smallest count first (one line naming what is there otherwise)."""
    cores, node = cluster.cores_per_socket, cluster.cores_per_node
    counts = sorted({n for n, _ in found})
    good = [n for n in counts if n % 2 == 0 and (n // 2) % cores == 0 and n <= node]
    if not good:
        valid = ", ".join(str(2 * k * cores) for k in range(1, node // (2 * cores) + 1))
        raise UserError(f"{where}: mbw_mr at {', '.join(map(str, counts)) or 'no'} "
                        f"processes; valid: nprocs {valid or 'none: one socket per node'} "
                        f"(--map-by core, the senders filling whole sockets of "
                        f"{cluster.cores_per_socket} cores on one node of {cluster.name})")
    points = []
    for n in good:
        size = max(s for m, s in found if m == n)
        if size < MIN_BYTES:
            raise UserError(f"{where}: mbw_mr at {n} processes up to {size} B; valid: sizes "
                            f"of {MIN_BYTES} B or more (below, a window measures the "
                            "message rate, not the bandwidth)")
        points.append((n, size))
    return points


def _with(cluster: Cluster, mbs: float) -> Cluster:
    memory = Memory.model_validate({**cluster.memory.model_dump(),
                                    "socket_bandwidth_mbs": mbs})
    return cluster.model_copy(update={"memory": memory})


def fit_socket(cluster: Cluster, found: Aggregate, simulate: SimulatePairs,
               where: str = "--multi-pair") -> Fit:
    """`cluster` with the socket bandwidth that gives the measured aggregate."""
    points = usable(found, cluster, where)
    first = points[0]
    target = found[first]
    # a port that never limits (not 0: with send_queue, 0 queues at the level's bandwidth)
    unlimited = simulate(_with(cluster, BOUNDS[1]), [first])[first]
    if unlimited <= target * SATURATED:
        raise UserError(
            f"{where}: mbw_mr at {first[0]} processes x {first[1]} B measured "
            f"{target:.6g} MB/s, and {cluster.name} with a socket port that never limits "
            f"simulates {unlimited:.6g}: the socket's port is not what limits these pairs; "
            "valid: pairs that saturate a socket (more of them, larger messages), or "
            "--socket-bandwidth MBPS")
    sockets = first[0] // 2 // cluster.cores_per_socket
    mbs = min(max(target / sockets, BOUNDS[0]), BOUNDS[1])
    got = simulate(_with(cluster, mbs), [first])[first]
    for _ in range(ROUNDS - 1):
        if abs(got / target - 1) <= TOLERANCE:
            break
        mbs = min(max(mbs * target / got, BOUNDS[0]), BOUNDS[1])
        got = simulate(_with(cluster, mbs), [first])[first]
    result = _with(cluster, round(mbs, 1))
    simulated = simulate(result, points)
    measured = {p: found[p] for p in points}
    note = (f"socket bandwidth {result.memory.socket_bandwidth_mbs:g} MB/s per socket and "
            "direction, fitted to the multi-pair aggregate (MB/s, measured / simulated): "
            + ", ".join(
                f"{n} ranks x {s} B {measured[n, s]:.6g} / {simulated[n, s]:.6g}"
                + (" (check)" if (n, s) != first else "") for n, s in points))
    return Fit(result, measured, simulated, note)
