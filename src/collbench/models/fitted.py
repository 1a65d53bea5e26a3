"""Fitted per-algorithm models (Nuriyev & Lastovetsky): the structure from the algorithm,
the constants from measurements.

The simulation of `models.algorithms` also counts, along the path that makes each rank's
time, how many latency terms and how many bytes it crossed at each level (and reduced
bytes). `fit_algorithm` keeps these counts and fits their coefficients to measured
collective latencies by weighted least squares (relative error); `cross_validate`,
`leave_one_out` and `model_errors` say how well such a fit predicts what it did not see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

import numpy as np

from collbench.errors import UserError
from collbench.models.algorithms import SERIAL, TERMS, Sends, detail, predict
from collbench.models.p2p import P2PModel
from collbench.models.topology import Topology

Basis = Literal["pooled", "per_level", "scaled"]
BASES: Final = ("pooled", "per_level", "scaled")


@dataclass(frozen=True)
class CollectivePoint:
    """One measured collective latency (µs, OSU's average over ranks)."""

    collective: str
    algorithm: str
    topology: Topology
    size_bytes: int
    latency_us: float
    segsize: int = 0


def _features(terms: Sequence[float], basis: Basis) -> tuple[list[str], list[float]]:
    """Model columns of one term vector.

    pooled:    latency terms, bytes, reduced bytes summed over levels (α, 1/β, γ per algorithm);
    per_level: one latency and one byte column per level, plus reduced bytes;
    scaled:    the p2p model's latency part and bandwidth part (µs) as given, plus reduced
               bytes: coefficients say how much each part is over- or under-predicted."""
    t = list(terms)
    if basis == "pooled":
        return (["latency_terms", "bytes", "reduce_bytes"],
                [t[0] + t[1] + t[2], t[3] + t[4] + t[5], t[6]])
    if basis == "per_level":
        return list(TERMS[:7]), t[:7]
    return ["latency_us", "bandwidth_us", "reduce_bytes"], [t[7], t[8], t[6]]


@dataclass(frozen=True)
class FittedAlgorithm:
    """T = Σ coef·feature, per algorithm; features come from the schedule's term counts."""

    collective: str
    algorithm: str
    basis: str
    names: tuple[str, ...]
    coefs: tuple[float, ...]
    ci: tuple[tuple[float, float], ...]
    points: int
    p2p_model: P2PModel
    sends: Sends = SERIAL

    def predict(self, topology: Topology, size: int, segsize: int = 0) -> float:
        pred = detail(self.p2p_model, topology, self.collective, self.algorithm, size,
                      segsize=segsize, **self.sends._asdict())
        names, x = _features(pred.stat_terms("avg"), self.basis)  # type: ignore[arg-type]
        col = dict(zip(names, x, strict=True))
        return float(sum(c * col[n] for n, c in zip(self.names, self.coefs, strict=True)))


def _terms_of(point: CollectivePoint, model: P2PModel,
              sends: Sends = SERIAL) -> tuple[float, ...]:
    pred = detail(model, point.topology, point.collective, point.algorithm, point.size_bytes,
                  segsize=point.segsize, **sends._asdict())
    return pred.stat_terms("avg")


def fit_algorithm(points: Sequence[CollectivePoint], p2p_model: P2PModel,
                  basis: Basis = "pooled", sends: Sends = SERIAL) -> FittedAlgorithm:
    """Fit one algorithm's coefficients to its measurements (WLS, weights 1/T²)."""
    import statsmodels.api as sm  # lazily: 1.5 s to import
    if basis not in BASES:
        raise UserError(f"fit: basis {basis!r} is not valid; valid: {', '.join(BASES)}")
    if not points:
        raise UserError("fit: no collective measurements; valid: at least 2 points")
    keys = {(p.collective, p.algorithm) for p in points}
    if len(keys) > 1:
        raise UserError(f"fit: points mix {len(keys)} algorithms {sorted(keys)}; valid: one "
                        "(collective, algorithm) per fit")
    coll, alg = next(iter(keys))
    for p in points:
        if not math.isfinite(p.latency_us) or p.latency_us <= 0:
            raise UserError(f"fit: {coll}/{alg} at {p.size_bytes} B: latency "
                            f"{p.latency_us!r} is not valid; valid: a finite time > 0 µs")
    rows = [_features(_terms_of(p, p2p_model, sends), basis) for p in points]
    names = rows[0][0]
    x = np.array([r[1] for r in rows], dtype=float)
    keep = [j for j in range(x.shape[1]) if np.any(x[:, j] != 0)]
    if not keep:
        raise UserError(f"fit: {coll}/{alg}: the schedules send nothing; valid: nprocs >= 2")
    x = x[:, keep]
    y = np.array([p.latency_us for p in points], dtype=float)
    if len(points) < len(keep) + 1:
        raise UserError(f"fit: {coll}/{alg}: {len(points)} points for {len(keep)} "
                        f"coefficients; valid: at least {len(keep) + 1} points")
    res = sm.WLS(y, x, weights=1.0 / (y * y)).fit()
    ci = res.conf_int(alpha=0.05)
    return FittedAlgorithm(coll, alg, basis, tuple(names[j] for j in keep),
                           tuple(float(c) for c in res.params),
                           tuple((float(lo), float(hi)) for lo, hi in ci), len(points),
                           p2p_model, sends)


@dataclass(frozen=True)
class CVResult:
    """Held-out predictions: (point, predicted µs, absolute % error) and their summary."""

    predictions: tuple[tuple[CollectivePoint, float, float], ...]
    median_abs_pct: float
    p95_abs_pct: float


def _summary(preds: list[tuple[CollectivePoint, float, float]]) -> CVResult:
    if not preds:
        raise UserError("cross-validation: no held-out points; valid: a split that holds out "
                        "at least one point and keeps enough to fit")
    errs = np.array([e for _, _, e in preds])
    return CVResult(tuple(preds), float(np.median(errs)), float(np.percentile(errs, 95)))


def cross_validate(points: Sequence[CollectivePoint], p2p_model: P2PModel,
                   held_out: Callable[[CollectivePoint], bool],
                   basis: Basis = "pooled", sends: Sends = SERIAL) -> CVResult:
    """Fit on the points `held_out` rejects, predict the ones it accepts (per algorithm)."""
    preds: list[tuple[CollectivePoint, float, float]] = []
    groups: dict[tuple[str, str], list[CollectivePoint]] = {}
    for p in points:
        groups.setdefault((p.collective, p.algorithm), []).append(p)
    for group in groups.values():
        train = [p for p in group if not held_out(p)]
        test = [p for p in group if held_out(p)]
        if not test:
            continue
        fitted = fit_algorithm(train, p2p_model, basis, sends)
        for p in test:
            got = fitted.predict(p.topology, p.size_bytes, p.segsize)
            preds.append((p, got, abs(got - p.latency_us) / p.latency_us * 100.0))
    return _summary(preds)


def leave_one_out(points: Sequence[CollectivePoint], p2p_model: P2PModel,
                  by: Literal["size", "nprocs"] = "size",
                  basis: Basis = "pooled", sends: Sends = SERIAL) -> CVResult:
    """Leave one message size (or one process count) out at a time: fit on the others,
    predict it; every point is predicted once."""
    def key(p: CollectivePoint) -> int:
        return p.size_bytes if by == "size" else p.topology.nprocs

    def holding_out(value: int) -> Callable[[CollectivePoint], bool]:
        return lambda p: key(p) == value

    preds: list[tuple[CollectivePoint, float, float]] = []
    for value in sorted({key(p) for p in points}):
        preds += list(cross_validate(points, p2p_model, holding_out(value),
                                     basis, sends).predictions)
    return _summary(preds)


def model_errors(points: Iterable[CollectivePoint], p2p_model: P2PModel,
                 sends: Sends = SERIAL) -> CVResult:
    """How far the pure p2p-parameterised model (no fitting) is from the measurements."""
    preds = []
    for p in points:
        got = predict(p2p_model, p.topology, p.collective, p.algorithm, p.size_bytes,
                      segsize=p.segsize, **sends._asdict())
        preds.append((p, got, abs(got - p.latency_us) / p.latency_us * 100.0))
    return _summary(preds)
