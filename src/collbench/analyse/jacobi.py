"""The Jacobi model against measurement: predicted and measured MLUP/s of the `jacobi`
mini-app per placement, process count and sub-domain size (`collbench model jacobi`, the
report's Jacobi table).

For every ok `jacobi` row (source "program"): T_s is the single-process compute time of one
sweep of an L^3 sub-domain, measured by the campaign's nprocs = 1 runs of the same L
(median over repetitions); the halos cross the placement level of the farthest pair of
Cartesian neighbours (the process grid of the row's `dims`, ranks in row-major order as
MPI_Cart_create numbers them without reordering, placed by the row's mapping, nodes and
ppn on the machine's sockets and cores); λ and B are that level's ping-pong latency and
bandwidth in the p2p model, at the size of one face (L^2 doubles). Then
P(L, N) = L^3 N / (T_s + C/B + 4kλ) (collbench.apps.jacobi_model), against the row's
measured MLUP/s (median over repetitions). error_pct = (predicted - measured) / measured.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import asdict, dataclass
from typing import Any, Final

from collbench import points
from collbench.analyse.modeldata import machine_shape
from collbench.apps.jacobi_model import BYTES_PER_VALUE, comm_time, directions, predict_mlups
from collbench.errors import UserError
from collbench.models.p2p import P2PModel
from collbench.models.predict import Shape, topology
from collbench.store import Store

APP: Final = "jacobi"
LEVEL_ORDER: Final = ("core", "socket", "node")
COLUMNS: Final = ("placement", "level", "nprocs", "L", "dims", "k", "measured_mlups",
                  "predicted_mlups", "error_pct", "ts_us", "tc_measured_us", "tc_model_us",
                  "reps")


@dataclass(frozen=True)
class JacobiPoint:
    placement: str  # map-by (and nodes when more than one)
    level: str  # core | socket | node: where the farthest halo travels (none: N = 1)
    nprocs: int
    L: int
    dims: str  # "PXxPYxPZ"
    k: int
    measured_mlups: float
    predicted_mlups: float
    error_pct: float
    ts_us: float  # single-process compute time per sweep (the model's T_s)
    tc_measured_us: float | None
    tc_model_us: float
    reps: int

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def _grid_neighbours(dims: list[int]) -> list[tuple[int, int]]:
    """Pairs of ranks adjacent in a non-periodic Cartesian grid (row-major ranks)."""
    strides = [dims[1] * dims[2], dims[2], 1]
    pairs = []
    for coords in itertools.product(*(range(d) for d in dims)):
        rank = sum(c * s for c, s in zip(coords, strides, strict=True))
        for d in range(3):
            if coords[d] + 1 < dims[d]:
                pairs.append((rank, rank + strides[d]))
    return pairs


def halo_level(dims: list[int], nprocs: int, nodes: int | None, ppn: int | None,
               mapping: str | None, shape: Shape, where: str = "jacobi") -> str:
    """The farthest level any pair of Cartesian neighbours talks over ("none" at N = 1)."""
    pairs = _grid_neighbours(dims)
    if not pairs:
        return "none"
    topo = topology(nprocs, nodes, ppn, mapping, shape, where)
    return max((topo.level(a, b) for a, b in pairs), key=LEVEL_ORDER.index)


def _rows(store: Store) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("nprocs", "nodes", "ppn", "mapping", "metrics")}
            for r in points.read(store, collective=APP, ok=True)
            if r["source"] == "program" and r["metrics"] is not None]


def _metrics(row: dict[str, Any]) -> dict[str, Any] | None:
    m = points.metrics_of(row["metrics"])
    needed = ("L", "dims", "mlups", "ts_us")
    if not isinstance(m, dict) or not all(isinstance(m.get(k), int | float | list)
                                          for k in needed):
        return None
    return m


def jacobi_points(store: Store, p2p: P2PModel, shape: Shape | None = None) -> list[JacobiPoint]:
    """Predicted against measured MLUP/s for every (placement, N, L, grid) of a folder."""
    where = str(store.root)
    shape = shape or machine_shape(store)
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    single: dict[int, list[float]] = {}
    for row in _rows(store):
        m = _metrics(row)
        if m is None:
            continue
        L, dims = int(m["L"]), [int(d) for d in m["dims"]]
        if row["nprocs"] == 1:
            single.setdefault(L, []).append(float(m["ts_us"]))
        key = (row["mapping"], row["nodes"], row["ppn"], row["nprocs"], L, tuple(dims))
        groups.setdefault(key, []).append(m)
    if not groups:
        raise UserError(f"{where}: no ok jacobi rows (source program); valid: a folder "
                        "measured with [workload] app = \"jacobi\"")
    missing = sorted({key[4] for key in groups} - set(single))
    if missing:
        raise UserError(f"{where}: no single-process jacobi run with L = "
                        f"{', '.join(map(str, missing))}; the model's T_s is measured at "
                        "nprocs = 1: add 1 to measure.nprocs (dims [1, 1, 1])")
    out = []
    for (mapping, nodes, ppn, nprocs, L, dims), ms in sorted(
            groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1] or 0, *kv[0][3:])):
        ts_s = statistics.median(single[L]) * 1e-6
        k = directions(list(dims))
        level = halo_level(list(dims), nprocs, nodes, ppn, mapping, shape, where)
        face = L * L * BYTES_PER_VALUE
        if level == "none":
            lat_s, bw = 0.0, 1.0
        else:
            regime = p2p.level(level).regime(face)
            lat_s, bw = regime.alpha_us * 1e-6, regime.beta_bytes_per_s
        predicted = predict_mlups(L, nprocs, k, ts_s, lat_s, bw)
        measured = statistics.median(float(m["mlups"]) for m in ms)
        tcs = [float(m["tc_us"]) for m in ms if isinstance(m.get("tc_us"), int | float)]
        placement = f"map-by={mapping}" + (f" nodes={nodes}" if nodes and nodes > 1 else "")
        out.append(JacobiPoint(
            placement, level, nprocs, L, "x".join(map(str, dims)), k, measured, predicted,
            (predicted - measured) / measured * 100, ts_s * 1e6,
            statistics.median(tcs) if tcs else None, comm_time(L, k, lat_s, bw) * 1e6,
            len(ms)))
    return out


def error_summary(points: list[JacobiPoint]) -> dict[str, float]:
    """Median and largest absolute error (%) over the points with N > 1."""
    errs = [abs(p.error_pct) for p in points if p.nprocs > 1]
    if not errs:
        return {}
    return {"points": float(len(errs)), "median_abs_pct": statistics.median(errs),
            "max_abs_pct": max(errs)}
