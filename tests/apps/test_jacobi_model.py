"""The Jacobi performance model P(L,N) = L^3 N / (T_s + T_c), against hand-computed values."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.apps.jacobi_model import comm_bytes, comm_time, directions, predict_mlups
from collbench.errors import UserError

LAMBDA = 0.4e-6  # s: a shared-memory / good-network ping-pong latency
BANDWIDTH = 10e9  # bytes/s


def test_directions_counts_dims_greater_than_one() -> None:
    assert directions([1, 1, 1]) == 0
    assert directions([24, 1, 1]) == 1
    assert directions([12, 2, 1]) == 2
    assert directions([6, 2, 2]) == 3
    assert directions([4, 3, 2]) == 3
    assert directions((2,)) == 1


@pytest.mark.parametrize("dims", [[], [0, 1, 1], [2, -1, 1], [1, 1, 1, 1], "222", [2.0, 1, 1],
                                  [True, 1, 1]])
def test_directions_refuses_bad_grids(dims: object) -> None:
    with pytest.raises(UserError, match="dims"):
        directions(dims)  # type: ignore[arg-type]


def test_comm_bytes_is_two_faces_of_doubles_per_direction() -> None:
    assert comm_bytes(100, 0) == 0
    assert comm_bytes(100, 1) == 160_000
    assert comm_bytes(100, 3) == 480_000
    assert comm_bytes(1, 2) == 32


def test_comm_time_hand_computed() -> None:
    # L=100, k=3: 480000 B / 10 GB/s = 48 us, 4*3*0.4 us = 4.8 us
    assert comm_time(100, 3, LAMBDA, BANDWIDTH) == pytest.approx(52.8e-6, rel=1e-12)
    assert comm_time(100, 0, LAMBDA, BANDWIDTH) == 0.0


def test_predict_mlups_hand_computed_3d() -> None:
    # L=100, N=8 (2x2x2, k=3), T_s = 2 ms (1e6 LUP at 500 MLUP/s):
    # P = 1e6 * 8 / (2e-3 + 52.8e-6) = 3897.116...e6 LUP/s
    got = predict_mlups(100, 8, 3, 2e-3, LAMBDA, BANDWIDTH)
    assert got == pytest.approx(8e6 / 2.0528e-3 / 1e6, rel=1e-12)
    assert got == pytest.approx(3897.1161, abs=1e-3)


def test_predict_mlups_hand_computed_2d() -> None:
    # L=200, N=4 (2x2x1, k=2), T_s = 16 ms: C = 200^2*2*16 = 1.28 MB -> 128 us, + 3.2 us
    # P = 8e6 * 4 / (16e-3 + 131.2e-6) = 1983.7334 MLUP/s
    got = predict_mlups(200, 4, 2, 16e-3, LAMBDA, BANDWIDTH)
    assert got == pytest.approx(1983.7334, abs=1e-3)


def test_single_process_is_ts_alone() -> None:
    # k = 0: no communication, P = L^3 / T_s
    assert predict_mlups(64, 1, 0, 1e-3, LAMBDA, BANDWIDTH) == pytest.approx(262.144)


def test_latency_only_and_bandwidth_only_limits() -> None:
    # Tiny bandwidth cost: T_c -> 4 k lambda; huge latency dominates everything.
    assert comm_time(10, 1, 1e-3, 1e30) == pytest.approx(4e-3)
    assert predict_mlups(10, 2, 1, 1e-9, 1.0, 1e30) == pytest.approx(1000 * 2 / 4.000000001 / 1e6)


@pytest.mark.parametrize(("args", "match"), [
    ((0, 8, 3, 1e-3, LAMBDA, BANDWIDTH), "L"),
    ((100, 0, 0, 1e-3, LAMBDA, BANDWIDTH), "nprocs"),
    ((100, 8, 4, 1e-3, LAMBDA, BANDWIDTH), "k"),
    ((100, 4, 3, 1e-3, LAMBDA, BANDWIDTH), "at least 8 processes"),
    ((100, 8, 3, 0.0, LAMBDA, BANDWIDTH), "ts_s"),
    ((100, 8, 3, math.nan, LAMBDA, BANDWIDTH), "ts_s"),
    ((100, 8, 3, 1e-3, -1e-6, BANDWIDTH), "latency_s"),
    ((100, 8, 3, 1e-3, LAMBDA, 0.0), "bandwidth_Bps"),
    ((100, 8, 3, 1e-3, LAMBDA, math.inf), "bandwidth_Bps"),
    ((100.0, 8, 3, 1e-3, LAMBDA, BANDWIDTH), "L"),
])
def test_predict_mlups_refuses_bad_inputs(args: tuple[object, ...], match: str) -> None:
    with pytest.raises(UserError, match=match):
        predict_mlups(*args)  # type: ignore[arg-type]


@given(L=st.integers(1, 1024), k=st.integers(0, 3), extra=st.integers(0, 64),
       ts=st.floats(1e-7, 10.0), lat=st.floats(0.0, 1e-3), bw=st.floats(1e6, 1e12))
def test_more_bandwidth_never_hurts_and_more_latency_never_helps(
        L: int, k: int, extra: int, ts: float, lat: float, bw: float) -> None:
    n = 2**k + extra
    base = predict_mlups(L, n, k, ts, lat, bw)
    assert math.isfinite(base) and base > 0
    assert predict_mlups(L, n, k, ts, lat, bw * 2) >= base
    assert predict_mlups(L, n, k, ts, lat + 1e-6, bw) <= base
    # never faster than perfect scaling of the single-process rate
    assert base <= L**3 * n / ts / 1e6 * (1 + 1e-12)
