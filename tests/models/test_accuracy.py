from __future__ import annotations

import pytest

from collbench.errors import UserError
from collbench.models.accuracy import (
    Key,
    Paired,
    crossover_shifts,
    crossovers,
    per_algorithm,
    point_errors,
    selection_summary,
    selections,
)


def pt(alg: str, size: int, meas: float, pred: float, n: int = 8) -> Paired:
    return Paired(Key("bcast", alg, n, "core", size), meas, pred)


# measured: binomial wins up to 1 KiB, pipeline from 4 KiB; predicted: switch at 16 KiB
POINTS = [
    pt("binomial", 256, 10.0, 11.0), pt("pipeline", 256, 20.0, 18.0),
    pt("binomial", 1024, 15.0, 15.0), pt("pipeline", 1024, 25.0, 30.0),
    pt("binomial", 4096, 40.0, 36.0), pt("pipeline", 4096, 30.0, 40.0),
    pt("binomial", 16384, 120.0, 100.0), pt("pipeline", 16384, 60.0, 66.0),
]


def test_point_errors() -> None:
    errs = {(e.key.algorithm, e.key.size_bytes): e for e in point_errors(POINTS)}
    e = errs[("binomial", 256)]
    assert e.ratio == pytest.approx(1.1)
    assert e.abs_pct == pytest.approx(10.0)
    assert errs[("pipeline", 4096)].abs_pct == pytest.approx(100 / 3)


def test_per_algorithm() -> None:
    summary = per_algorithm(POINTS)
    b = summary[("bcast", "binomial")]
    assert b.points == 4
    assert b.median_abs_pct == pytest.approx(10.0)  # errors 10, 0, 10, 16.7
    p = summary[("bcast", "pipeline")]
    assert p.median_abs_pct == pytest.approx(15.0)  # errors 10, 20, 33.3, 10


def test_selection_and_penalty() -> None:
    sel = {s.size_bytes: s for s in selections(POINTS)}
    assert sel[256].same and sel[256].penalty == 1.0
    assert sel[4096].measured_best == "pipeline"
    assert sel[4096].predicted_best == "binomial"
    assert not sel[4096].same
    assert sel[4096].penalty == pytest.approx(40 / 30)
    agree, penalty = selection_summary(POINTS)
    assert agree == pytest.approx(0.75)
    assert penalty.median_abs_pct == 0.0
    assert penalty.p95_abs_pct > 25


def test_crossovers_move() -> None:
    measured, predicted = crossovers(POINTS)
    assert [(c.before, c.after, c.at_bytes) for c in measured] == \
        [("binomial", "pipeline", 4096)]
    assert [(c.before, c.after, c.at_bytes) for c in predicted] == \
        [("binomial", "pipeline", 16384)]
    (shift,) = crossover_shifts(POINTS)
    assert shift.predicted_at_bytes == 16384
    assert shift.factor == 4.0


def test_lost_crossover_and_bad_input() -> None:
    only_binomial = [pt("binomial", s, 10.0 * s, 1.0 * s) for s in (256, 4096)] + \
        [pt("pipeline", s, m, 1e9) for s, m in ((256, 1e4), (4096, 1.0))]
    (shift,) = crossover_shifts(only_binomial)
    assert shift.predicted_at_bytes is None
    with pytest.raises(UserError, match="predicted_us 0"):
        point_errors([pt("binomial", 1, 1.0, 0)])
    with pytest.raises(UserError, match="appears twice"):
        point_errors([pt("binomial", 1, 1.0, 1.0)] * 2)
    with pytest.raises(UserError, match="two algorithms"):
        selection_summary([pt("binomial", 1, 1.0, 1.0)])
