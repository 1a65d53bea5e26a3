"""analyse.against: pairing two sources, errors per point and algorithm, selection,
crossovers, rendering."""

from __future__ import annotations

import csv
import io
import json

import pytest

from collbench.analyse.against import against, render
from collbench.errors import UserError
from collbench.models.accuracy import Key

SIZES = (1, 16, 256, 4096, 65536)


def side(times: dict[str, list[float]], default: str | None = None) -> dict[Key, float]:
    out = {Key("bcast", alg, 8, "core", s): t for alg, ts in times.items()
           for s, t in zip(SIZES, ts, strict=True)}
    if default:
        out |= {Key("bcast", "default", 8, "core", s): t
                for s, t in zip(SIZES, times[default], strict=True)}
    return out


# binomial wins small sizes, pipeline from 4096 on
A = side({"binomial": [2, 3, 5, 40, 400], "pipeline": [6, 7, 9, 30, 200]}, default="binomial")


def test_identical_sources_have_no_error() -> None:
    r = against(A, dict(A), "a", "b")
    assert r.overall.median_abs_pct == 0 and r.overall.p95_abs_pct == 0
    assert r.same_fraction == 1.0 and r.penalty is not None and r.penalty.median_abs_pct == 0
    assert len(r.selections) == len(SIZES)  # default takes no part in selection
    assert [s.measured.at_bytes for s in r.shifts] == [4096]
    assert r.shifts[0].predicted_at_bytes == 4096 and r.shifts[0].factor == 1.0


def test_errors_ratios_and_penalty() -> None:
    # B: binomial 10 % slow everywhere; pipeline wins one size too early (256)
    b = side({"binomial": [2.2, 3.3, 5.5, 44, 440], "pipeline": [6, 7, 5, 30, 200]})
    r = against(A, b, "a", "b")
    assert (r.only_a, r.only_b) == (len(SIZES), 0)  # A's default has no partner
    errs = {x.algorithm: x for x in r.algorithms}
    assert errs["binomial"].median_abs_pct == pytest.approx(10)
    assert errs["binomial"].median_ratio == pytest.approx(1.1)
    assert errs["pipeline"].median_abs_pct == 0
    wrong = [s for s in r.selections if not s.same]
    assert [(s.size_bytes, s.predicted_best) for s in wrong] == [(256, "pipeline")]
    assert wrong[0].penalty == pytest.approx(9 / 5)
    assert r.same_fraction == pytest.approx(4 / 5)
    (shift,) = r.shifts
    assert (shift.measured.at_bytes, shift.predicted_at_bytes) == (4096, 256)
    assert shift.factor == pytest.approx(1 / 16)


def test_renders_every_format() -> None:
    b = side({"binomial": [2.2, 3.3, 5.5, 44, 440], "pipeline": [6, 7, 5, 30, 200]})
    r = against(A, b, "a", "b")
    table = render(r, "table")
    assert "same best algorithm at 80.0 % of 5 configurations" in table
    assert "binomial -> pipeline" in table and "4K" in table and "256" in table
    md = render(r, "markdown")
    assert "| collective | algorithm |" in md
    rows = list(csv.DictReader(io.StringIO(render(r, "csv"))))
    assert len(rows) == 2 * len(SIZES) and {"a_us", "b_us", "ratio", "abs_pct"} <= set(rows[0])
    data = json.loads(render(r, "json"))
    assert data["selection"]["same_fraction"] == pytest.approx(0.8)
    assert data["crossovers"][0]["predicted_at_bytes"] == 256


def test_nothing_in_common_is_one_line() -> None:
    other = {Key("gather", "binomial", 4, "node", 1): 1.0}
    with pytest.raises(UserError, match=r"no point in common .* \(A: collectives bcast"):
        against(A, other, "a", "b")


def test_single_algorithm_has_no_selection() -> None:
    only = side({"binomial": [2, 3, 5, 40, 400]})
    r = against(only, only, "a", "b")
    assert r.selections == () and r.penalty is None
    assert "no selection measures" in render(r, "table")
