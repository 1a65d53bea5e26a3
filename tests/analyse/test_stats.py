"""Statistics against hand-computed values, brute-force enumeration and properties."""

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.analyse.stats import (
    cv,
    holm,
    log_ratio_ci,
    mad,
    mann_whitney,
    median,
    median_ci,
    min_p_value,
    u_distribution,
)

times = st.floats(min_value=0.1, max_value=1e4, allow_nan=False, allow_infinity=False)
# Few distinct values, so that ties are common.
tied_times = st.sampled_from([1.0, 1.5, 2.0, 3.0])


def brute_force_p(x: list[float], y: list[float]) -> float:
    """2 min(P(U <= u), P(U >= u)) enumerating every split of the pooled sample."""
    pooled, m, n = x + y, len(x), len(y)

    def u_of(a: list[float], b: list[float]) -> float:
        return sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in a for q in b)

    observed = u_of(x, y)
    us = []
    for idx in itertools.combinations(range(m + n), m):
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(m + n) if i not in idx]
        us.append(u_of(a, b))
    low = sum(u <= observed + 1e-12 for u in us)
    high = sum(u >= observed - 1e-12 for u in us)
    return min(1.0, 2 * min(low, high) / len(us))


def test_median_mad_cv() -> None:
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 2, 3]) == 2.5
    assert mad([1, 2, 3, 4, 100]) == 1  # deviations from 3: 2,1,0,1,97 -> median 1
    assert cv([1.0]) is None
    assert cv([9.0, 11.0]) == pytest.approx(math.sqrt(2) / 10)


def test_median_ci_n10_by_hand() -> None:
    # B ~ Binomial(10, 1/2): P(B <= 1) = 11/1024 = 0.0107 <= 0.025 but
    # P(B <= 2) = 56/1024 = 0.0547 > 0.025, so k = 2: [x_(2), x_(9)],
    # coverage 1 - 2 * 11/1024 = 0.978515625.
    xs = [7.0, 3.0, 9.0, 1.0, 5.0, 10.0, 2.0, 8.0, 4.0, 6.0]
    ci = median_ci(xs, 0.95)
    assert ci is not None
    assert (ci.low, ci.high) == (2.0, 9.0)
    assert ci.coverage == pytest.approx(1 - 2 * 11 / 1024)


def test_median_ci_too_small_says_its_real_coverage() -> None:
    # n = 3: the widest interval [min, max] covers 1 - 2 * (1/2)^3 = 75 % only.
    ci = median_ci([12.0, 10.0, 11.0], 0.95)
    assert ci is not None
    assert (ci.low, ci.high, ci.coverage) == (10.0, 12.0, 0.75)
    assert median_ci([1.0], 0.95) is None


def test_u_distribution_3_3_by_hand() -> None:
    # The 20 orderings of 3 x's among 6 values, counted by U = pairs (x > y).
    assert u_distribution(3, 3) == (1, 1, 2, 3, 3, 3, 3, 2, 1, 1)
    assert sum(u_distribution(7, 5)) == math.comb(12, 5)


def test_mann_whitney_exact_small_samples() -> None:
    # 3 vs 3 fully separated: 2 of the 20 orderings are as extreme -> p = 0.1.
    assert mann_whitney([5.0, 5.5, 6.0], [10.0, 11.0, 12.0]).p_value == pytest.approx(0.1)
    # 5 vs 5 fully separated: 2 / C(10, 5) = 2/252 = 0.0079.
    res = mann_whitney([5.0, 5.5, 6.0, 5.2, 5.8], [10.0, 11.0, 12.0, 10.5, 11.5])
    assert res.exact and res.u == 0
    assert res.p_value == pytest.approx(2 / 252)
    # x = {1, 2}, y = {3, 4, 5}: U = 0 in 1 of C(5, 2) = 10 splits, 2 with the mirror.
    assert mann_whitney([1.0, 2.0], [3.0, 4.0, 5.0]).p_value == pytest.approx(0.2)


def test_mann_whitney_with_ties_by_hand() -> None:
    # Pooled 1,2,2,2,3,3 -> midranks 1,3,3,3,5.5,5.5; x's rank sum is 7, the smallest
    # possible: 1 with two of the three 3s, 3 of the C(6,3) = 20 splits. p = 2 * 3/20.
    assert mann_whitney([1.0, 2.0, 2.0], [2.0, 3.0, 3.0]).p_value == pytest.approx(0.3)


@settings(max_examples=60, deadline=None)
@given(st.lists(times | tied_times, min_size=1, max_size=5),
       st.lists(times | tied_times, min_size=1, max_size=5))
def test_mann_whitney_matches_enumeration(x: list[float], y: list[float]) -> None:
    assert mann_whitney(x, y).p_value == pytest.approx(brute_force_p(x, y))


@given(st.lists(times, min_size=1, max_size=8))
def test_identical_samples_are_not_different(x: list[float]) -> None:
    assert mann_whitney(x, list(x)).p_value == 1.0
    if len(x) >= 2:
        hl = log_ratio_ci(x, list(x), 0.95)
        assert hl is not None
        assert hl[1].low <= 1.0 <= hl[1].high


@given(st.lists(times, min_size=1, max_size=6), st.lists(times, min_size=1, max_size=6))
def test_p_is_symmetric_and_a_probability(x: list[float], y: list[float]) -> None:
    p = mann_whitney(x, y).p_value
    assert 0 < p <= 1
    assert p == pytest.approx(mann_whitney(y, x).p_value)
    assert p >= min_p_value(len(x), len(y)) - 1e-12


@given(st.lists(times, min_size=2, max_size=30), st.sampled_from([0.8, 0.9, 0.95, 0.99]))
def test_median_ci_contains_median(xs: list[float], conf: float) -> None:
    ci = median_ci(xs, conf)
    assert ci is not None
    assert ci.low <= median(xs) <= ci.high
    assert 0 < ci.coverage <= 1


def test_ratio_ci_by_hand_3_vs_3() -> None:
    # Ratios x_i / y_j of x = {2, 4, 8}, y = {1, 2, 4}: 2,1,.5, 4,2,1, 8,4,2.
    # Sorted .5,1,1,2,2,2,4,4,8: estimate 2 (median); 3 vs 3 allows only k = 1,
    # i.e. [min, max] = [0.5, 8] with coverage 1 - 2 * P(U = 0) = 1 - 2/20 = 0.9.
    hl = log_ratio_ci([2.0, 4.0, 8.0], [1.0, 2.0, 4.0], 0.95)
    assert hl is not None
    est, ci = hl
    assert est == pytest.approx(2.0)
    assert ci.low == pytest.approx(0.5) and ci.high == pytest.approx(8.0)
    assert ci.coverage == pytest.approx(0.9)
    assert log_ratio_ci([1.0], [1.0, 2.0], 0.95) is None
    assert log_ratio_ci([0.0, 1.0], [1.0, 2.0], 0.95) is None


def test_ratio_ci_covers_the_true_ratio_on_synthetic_skewed_data() -> None:
    # Baseline: lognormal timings with a heavy right tail; algorithm: exactly half.
    rng = random.Random(12345)
    trials, covered = 300, 0
    for _ in range(trials):
        base = [10 * rng.lognormvariate(0, 0.3) for _ in range(8)]
        alg = [5 * rng.lognormvariate(0, 0.3) for _ in range(8)]
        hl = log_ratio_ci(alg, base, 0.95)
        assert hl is not None
        covered += hl[1].low <= 0.5 <= hl[1].high
    assert covered / trials >= 0.92  # exact method: nominal >= 95 %


def test_large_samples_use_the_normal_approximation() -> None:
    x = [float(i) for i in range(60)]
    y = [float(i) + 100 for i in range(60)]
    res = mann_whitney(x, y)
    assert not res.exact and res.p_value < 1e-10
    assert mann_whitney([1.0] * 30 + [2.0] * 20, [1.0] * 30 + [2.0] * 20).p_value == 1.0
    hl = log_ratio_ci([v + 1 for v in x], [v + 1 for v in x], 0.95)
    assert hl is not None and hl[1].low < 1 < hl[1].high


def test_holm_by_hand() -> None:
    # Sorted .01, .03, .04 -> 3*.01 = .03, 2*.03 = .06, max(.06, 1*.04) = .06.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([]) == []


@given(st.lists(st.floats(min_value=0, max_value=1), max_size=10))
def test_holm_never_lowers_a_p_value(ps: list[float]) -> None:
    adj = holm(ps)
    assert all(a >= p - 1e-12 and a <= 1 for a, p in zip(adj, ps, strict=True))


def test_min_p_value() -> None:
    assert min_p_value(3, 3) == pytest.approx(0.1)
    assert min_p_value(5, 5) == pytest.approx(2 / 252)
