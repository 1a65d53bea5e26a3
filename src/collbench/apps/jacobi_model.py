"""Performance model of the 3-D Jacobi mini-app (``jacobi.c``) under weak scaling.

Every one of N processes owns an L x L x L sub-domain and, per sweep, computes for T_s
seconds and exchanges halos for T_c seconds::

    P(L, N) = L^3 * N / (T_s + T_c)        lattice-site updates per second (LUP/s)
    T_c     = C(L, N) / B + 4 * k * lambda   seconds
    C(L, N) = L^2 * k * 2 * 8                bytes sent per process per sweep

- k: directions (of 3) in which the process grid has more than one process; each such
  direction sends two faces of L^2 doubles (8 bytes), hence the 2 * 8.
- lambda [s] and B [bytes/s]: ping-pong latency and bandwidth of the placement level the
  halos cross (for example intra-socket shared memory, or the network).
- T_s [s]: compute time of one sweep of one L^3 sub-domain by a single process.

T_c does not depend on N once k is fixed: C(L, N) is written with N only to follow the
usual notation. The functions are pure; invalid inputs raise UserError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from collbench.errors import UserError

BYTES_PER_VALUE = 8  # one double
FACES_PER_DIRECTION = 2
MAX_DIRECTIONS = 3


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"jacobi model: {name} must be a positive integer, not {value!r}")
    return value


def _number(name: str, value: object, *, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"jacobi model: {name} must be a number, not {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        kind = "positive" if positive else "non-negative"
        raise UserError(f"jacobi model: {name} must be a finite {kind} number, not {value!r}")
    return number


def _directions_arg(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_DIRECTIONS:
        raise UserError(f"jacobi model: k must be an integer in 0..{MAX_DIRECTIONS}, not {k!r}")
    return k


def directions(dims: Sequence[int]) -> int:
    """k: how many entries of the process grid ``dims`` (1 to 3 positive integers, as
    resolved by MPI_Dims_create: no zeros) are greater than one."""
    if isinstance(dims, str | bytes) or not 1 <= len(dims) <= MAX_DIRECTIONS:
        raise UserError(f"jacobi model: dims must be 1 to 3 positive integers, not {dims!r}")
    return sum(1 for i, d in enumerate(dims) if _positive_int(f"dims[{i}]", d) > 1)


def comm_bytes(L: int, k: int) -> int:
    """C = L^2 * k * 2 * 8: bytes one process sends per sweep (two faces of L^2 doubles
    in each of the k directions with more than one process)."""
    edge = _positive_int("L", L)
    return edge * edge * _directions_arg(k) * FACES_PER_DIRECTION * BYTES_PER_VALUE


def comm_time(L: int, k: int, latency_s: float, bandwidth_Bps: float) -> float:
    """T_c = C / B + 4 * k * lambda, in seconds (latency in s, bandwidth in bytes/s)."""
    latency = _number("latency_s", latency_s, positive=False)
    bandwidth = _number("bandwidth_Bps", bandwidth_Bps, positive=True)
    k = _directions_arg(k)
    return comm_bytes(L, k) / bandwidth + 4 * k * latency


def predict_mlups(L: int, nprocs: int, k: int, ts_s: float, latency_s: float,
                  bandwidth_Bps: float) -> float:
    """P(L, N) = L^3 * N / (T_s + T_c), returned in MLUP/s (10^6 lattice-site updates per
    second), with N = nprocs, T_s = ts_s seconds per sweep of one L^3 sub-domain on one
    process, and T_c from :func:`comm_time` (latency_s in s, bandwidth_Bps in bytes/s).

    k directions with more than one process need at least 2^k processes.
    """
    edge = _positive_int("L", L)
    n = _positive_int("nprocs", nprocs)
    k = _directions_arg(k)
    if 2**k > n:
        raise UserError(f"jacobi model: k={k} directions need at least {2**k} processes, "
                        f"not {n}")
    ts = _number("ts_s", ts_s, positive=True)
    tc = comm_time(edge, k, latency_s, bandwidth_Bps)
    return edge**3 * n / (ts + tc) / 1e6
