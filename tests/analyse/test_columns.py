"""One name, one meaning: the vocabulary, hyperfine's wording, and the docs kept in step."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from collbench.analyse.columns import COMPARISON, FIGURES, STATISTICS, effect_text
from collbench.analyse.stats import geomean_ci

DOCS = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"


def test_every_name_is_documented_once_in_a_table() -> None:
    text = DOCS.read_text()
    table_cells = set(re.findall(r"^\| `([^`]+)`", text, flags=re.M))
    names = [*FIGURES, *STATISTICS, *COMPARISON]
    nb = {"overall_us", "pure_us", "overlap_pct"}  # one row for the non-blocking figures
    missing = [n for n in names if n not in table_cells and n not in nb]
    assert missing == []
    assert "`overall_us`, `pure_us`, `overlap_pct`" in text
    assert "Why `median_us` can be below `min_us`" in text


@pytest.mark.parametrize(("ratio", "low", "high", "text"), [
    (0.5, 0.45, 0.55, "2.00 ± 0.22 × faster than default"),  # 1/0.45 = 2.22
    (2.0, 1.9, 2.3, "2.00 ± 0.30 × slower than default"),
    (0.98, 0.9, 1.1, "1.02 ± 0.11 × faster than default"),  # the CI crosses 1
    (0.5, None, None, "2.00 × faster than default"),
    (1.0, None, None, "as fast as default"),
])
def test_hyperfine_wording(ratio: float, low: float | None, high: float | None,
                           text: str) -> None:
    assert effect_text(ratio, low, high, "default") == text


def test_plus_minus_covers_the_whole_interval() -> None:
    # asymmetric interval: ± is the larger side, so [factor - pm, factor + pm] holds it
    text = effect_text(0.5, 0.4, 0.52, "x")
    factor, pm = (float(v) for v in re.findall(r"[\d.]+", text)[:2])
    assert factor - pm <= 1 / 0.52 + 1e-9 and factor + pm >= 1 / 0.4 - 1e-2


def test_difference_wording() -> None:
    assert effect_text(12.0, 9.0, 15.5, "default", difference=True) == \
        "12.0 ± 3.5 points more than default"
    assert effect_text(-4.0, None, None, "b", difference=True) == "4.0 points less than b"


def test_geometric_mean_interval() -> None:
    g, ci = geomean_ci([0.5, 0.5, 0.5], 0.95)
    assert g == pytest.approx(0.5) and ci is None  # no spread
    g, ci = geomean_ci([0.4, 0.5, 0.625], 0.95)
    assert g == pytest.approx(0.5)
    assert ci is not None and ci.low < 0.5 < ci.high
    # t(0.975, 2) = 4.303; sd of logs = log(1.25)
    half = 4.302652729911275 * math.log(1.25) / math.sqrt(3)
    assert ci.high == pytest.approx(0.5 * math.exp(half))
    assert geomean_ci([0.8], 0.95) == (pytest.approx(0.8), None)


def test_a_wide_interval_is_given_by_its_ends() -> None:
    assert effect_text(1 / 1.38, 1 / 6.73, 5.21, "default") == (
        "1.38 × faster than default (interval: from 5.21 × slower to 6.73 × faster)")
