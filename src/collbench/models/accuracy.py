"""How good are predictions: errors, algorithm selection and crossovers.

Input: paired points keyed by (collective, algorithm, nprocs, mapping, size), each with a
measured and a predicted latency (µs). Outputs:

- per point: ratio predicted/measured and absolute % error |pred − meas| / meas · 100;
- per (collective, algorithm): median and p95 absolute % error;
- per (collective, nprocs, mapping, size): the measured best algorithm, the predicted best,
  whether they agree, and the selection penalty = measured latency of the predicted best /
  measured latency of the measured best (1.0 when the prediction picks right);
- crossovers: sizes at which the best algorithm changes, measured vs predicted, and how far
  (as a size ratio) each measured crossover moved in the prediction.

Only configurations where every compared algorithm has both a measurement and a prediction
take part in selection, so a missing point never looks like a win.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from collbench.errors import UserError


@dataclass(frozen=True, order=True)
class Key:
    collective: str
    algorithm: str
    nprocs: int
    mapping: str
    size_bytes: int


@dataclass(frozen=True)
class Paired:
    key: Key
    measured_us: float
    predicted_us: float


@dataclass(frozen=True)
class PointError:
    key: Key
    measured_us: float
    predicted_us: float
    ratio: float  # predicted / measured
    abs_pct: float


@dataclass(frozen=True)
class ErrorSummary:
    points: int
    median_abs_pct: float
    p95_abs_pct: float


@dataclass(frozen=True)
class Selection:
    collective: str
    nprocs: int
    mapping: str
    size_bytes: int
    measured_best: str
    predicted_best: str
    same: bool
    penalty: float  # measured latency of predicted best / measured best


@dataclass(frozen=True)
class Crossover:
    """The best algorithm changes from `before` to `after` between two measured sizes;
    `at_bytes` is the first size where `after` wins."""

    collective: str
    nprocs: int
    mapping: str
    before: str
    after: str
    at_bytes: int


@dataclass(frozen=True)
class CrossoverShift:
    measured: Crossover
    predicted_at_bytes: int | None  # same before→after change in the prediction, if any
    factor: float | None  # predicted_at / measured_at


def _check(points: Iterable[Paired]) -> list[Paired]:
    out = list(points)
    seen: set[Key] = set()
    for p in out:
        for what, v in (("measured_us", p.measured_us), ("predicted_us", p.predicted_us)):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise UserError(f"accuracy: {what} {v!r} at {p.key} is not valid; valid: a "
                                "finite time > 0 µs")
        if p.key in seen:
            raise UserError(f"accuracy: key {p.key} appears twice; valid: one measured and "
                            "predicted pair per key (aggregate repetitions first)")
        seen.add(p.key)
    return out


def point_errors(points: Iterable[Paired]) -> list[PointError]:
    """Ratio and absolute % error of every point, sorted by key."""
    return [PointError(p.key, p.measured_us, p.predicted_us, p.predicted_us / p.measured_us,
                       abs(p.predicted_us - p.measured_us) / p.measured_us * 100.0)
            for p in sorted(_check(points), key=lambda q: q.key)]


def summarize(errors: Sequence[float]) -> ErrorSummary:
    arr = np.asarray(errors, dtype=float)
    if arr.size == 0:
        raise UserError("accuracy: no points; valid: at least one paired point")
    return ErrorSummary(int(arr.size), float(np.median(arr)), float(np.percentile(arr, 95)))


def per_algorithm(points: Iterable[Paired]) -> dict[tuple[str, str], ErrorSummary]:
    """Median and p95 absolute % error per (collective, algorithm)."""
    groups: dict[tuple[str, str], list[float]] = {}
    for e in point_errors(points):
        groups.setdefault((e.key.collective, e.key.algorithm), []).append(e.abs_pct)
    return {k: summarize(v) for k, v in sorted(groups.items())}


def _configs(points: list[Paired]) -> dict[tuple[str, int, str, int], dict[str, Paired]]:
    out: dict[tuple[str, int, str, int], dict[str, Paired]] = {}
    for p in points:
        k = p.key
        out.setdefault((k.collective, k.nprocs, k.mapping, k.size_bytes), {})[k.algorithm] = p
    return out


def selections(points: Iterable[Paired]) -> list[Selection]:
    """Per (collective, nprocs, mapping, size) with >= 2 algorithms: measured vs predicted
    winner and the selection penalty (ties go to the alphabetically first algorithm)."""
    out = []
    for (coll, n, mapping, size), algs in sorted(_configs(_check(points)).items()):
        if len(algs) < 2:
            continue
        meas = min(sorted(algs), key=lambda a: algs[a].measured_us)
        pred = min(sorted(algs), key=lambda a: algs[a].predicted_us)
        out.append(Selection(coll, n, mapping, size, meas, pred, meas == pred,
                             algs[pred].measured_us / algs[meas].measured_us))
    return out


def selection_summary(points: Iterable[Paired]) -> tuple[float, ErrorSummary]:
    """(fraction of configurations where the prediction picks the measured winner,
    summary of the penalties expressed as % slower than the best)."""
    sel = selections(points)
    if not sel:
        raise UserError("accuracy: no configuration has two algorithms; valid: points of >= 2 "
                        "algorithms at the same collective, nprocs, mapping and size")
    return (sum(s.same for s in sel) / len(sel),
            summarize([(s.penalty - 1.0) * 100.0 for s in sel]))


def _crossovers(best: dict[tuple[str, int, str], list[tuple[int, str]]]) -> list[Crossover]:
    out = []
    for (coll, n, mapping), seq in sorted(best.items()):
        seq.sort()
        for (_, a), (size, b) in itertools.pairwise(seq):
            if a != b:
                out.append(Crossover(coll, n, mapping, a, b, size))
    return out


def crossovers(points: Iterable[Paired]) -> tuple[list[Crossover], list[Crossover]]:
    """(measured crossovers, predicted crossovers) over increasing size."""
    meas: dict[tuple[str, int, str], list[tuple[int, str]]] = {}
    pred: dict[tuple[str, int, str], list[tuple[int, str]]] = {}
    for s in selections(points):
        meas.setdefault((s.collective, s.nprocs, s.mapping), []).append(
            (s.size_bytes, s.measured_best))
        pred.setdefault((s.collective, s.nprocs, s.mapping), []).append(
            (s.size_bytes, s.predicted_best))
    return _crossovers(meas), _crossovers(pred)


def crossover_shifts(points: Iterable[Paired]) -> list[CrossoverShift]:
    """Where each measured crossover went in the prediction: the predicted crossover with
    the same (before, after) pair in the same configuration closest in log-size, if any."""
    measured, predicted = crossovers(points)
    out = []
    for c in measured:
        same = [q for q in predicted if (q.collective, q.nprocs, q.mapping, q.before, q.after)
                == (c.collective, c.nprocs, c.mapping, c.before, c.after)]
        if not same:
            out.append(CrossoverShift(c, None, None))
            continue
        near = min(same, key=lambda q: abs(math.log2(max(q.at_bytes, 1))
                                           - math.log2(max(c.at_bytes, 1))))
        factor = near.at_bytes / c.at_bytes if c.at_bytes else None
        out.append(CrossoverShift(c, near.at_bytes, factor))
    return out
