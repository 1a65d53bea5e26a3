"""Distribution-free statistics for small samples of skewed timings (pure Python, no DB).

Repetitions of a collective benchmark are few (3-10) and right-skewed (noise only ever adds
time), so every method here is exact and rank-based: order-statistic intervals for the
median, the exact Mann-Whitney test, and the Hodges-Lehmann/Moses interval for a ratio,
computed on log times so that a shift means a ratio. docs/statistics.md explains the choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

# Exact null distributions up to these sizes; beyond, a normal approximation (repetition
# counts never get there in practice, so the exact path is the one that matters).
EXACT_MAX_PAIRS = 2500  # m*n without ties (Gaussian binomial, cheap)
EXACT_MAX_TIED = 40  # m+n with ties (subset-sum over midranks, slower)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    coverage: float  # attained confidence; below the nominal when the sample is too small


@dataclass(frozen=True)
class TestResult:
    u: float  # Mann-Whitney U of x (pairs x > y, ties count 1/2)
    p_value: float  # two-sided
    exact: bool


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of an empty sample")
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def mad(xs: Sequence[float]) -> float:
    """Median absolute deviation (unscaled; times 1.4826 estimates sigma for normal data)."""
    m = median(xs)
    return median([abs(x - m) for x in xs])


def cv(xs: Sequence[float]) -> float | None:
    """Sample standard deviation over mean; None below 2 values or for a zero mean."""
    if len(xs) < 2:
        return None
    mean = sum(xs) / len(xs)
    if mean == 0:
        return None
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return math.sqrt(var) / abs(mean)


def _binom_half_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), exactly."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / (1 << n)


def median_ci(xs: Sequence[float], confidence: float) -> Interval | None:
    """Distribution-free CI for the median: [x_(k), x_(n+1-k)] from the binomial(n, 1/2).

    k is the largest rank with P(B <= k-1) <= alpha/2, so coverage = 1 - 2 P(B <= k-1) is
    at least `confidence`. When even [min, max] falls short (n < 6 at 95 %), that widest
    interval is returned with its true, lower coverage rather than a made-up one.
    """
    n = len(xs)
    if n < 2:
        return None
    alpha = 1 - confidence
    k = 1
    while k + 1 <= (n + 1) // 2 and _binom_half_cdf(k, n) <= alpha / 2:
        k += 1
    s = sorted(xs)
    return Interval(s[k - 1], s[n - k], 1 - 2 * _binom_half_cdf(k - 1, n))


@lru_cache(maxsize=256)
def u_distribution(m: int, n: int) -> tuple[int, ...]:
    """Counts of U = 0..m*n over all C(m+n, m) orderings without ties.

    These are the coefficients of the Gaussian binomial [m+n choose m]_q, built as
    prod_{i<=m} (1 - q^(n+i)) / (1 - q^i); every partial product is a polynomial, so
    integer arithmetic stays exact.
    """
    size = m * n + 1
    c = [0] * size
    c[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        for k in range(size - 1, shift - 1, -1):  # multiply by (1 - q^shift)
            c[k] -= c[k - shift]
        for k in range(i, size):  # divide by (1 - q^i): running sum with stride i
            c[k] += c[k - i]
    return tuple(c)


def _u_cdf(m: int, n: int) -> list[float]:
    counts = u_distribution(m, n)
    total = math.comb(m + n, m)
    out, acc = [], 0
    for c in counts:
        acc += c
        out.append(acc / total)
    return out


def _midranks(values: Sequence[float]) -> list[int]:
    """Doubled midranks (integers) of values in their given order."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = i + j + 2  # 2 * mean of ranks i+1..j+1
        i = j + 1
    return ranks


def _tied_rank_sum_distribution(ranks: Sequence[int], m: int) -> dict[int, int]:
    """Counts of the (doubled) rank sum over all m-subsets of the pooled ranks."""
    dp: list[dict[int, int]] = [{0: 1}] + [{} for _ in range(m)]
    for r in ranks:
        for j in range(m, 0, -1):
            prev, cur = dp[j - 1], dp[j]
            for s, cnt in prev.items():
                cur[s + r] = cur.get(s + r, 0) + cnt
    return dp[m]


def mann_whitney(x: Sequence[float], y: Sequence[float]) -> TestResult:
    """Two-sided Mann-Whitney U test; exact (permutation) for the sample sizes we meet.

    p = 2 min(P(U <= u), P(U >= u)), capped at 1. With ties the exact null is the
    permutation distribution of the midrank sum (no longer symmetric, and doubling the
    smaller tail keeps the test conservative); identical samples give p = 1.
    """
    m, n = len(x), len(y)
    if m == 0 or n == 0:
        raise ValueError("Mann-Whitney needs two non-empty samples")
    u2 = sum(2 if a > b else 1 if a == b else 0 for a in x for b in y)  # 2U, an integer
    pooled = list(x) + list(y)
    tied = len(set(pooled)) < len(pooled)
    total = math.comb(m + n, m)
    if not tied and m * n <= EXACT_MAX_PAIRS:
        counts = u_distribution(m, n)
        low = sum(counts[: u2 // 2 + 1])  # u2 is even without ties
        high = sum(counts[u2 // 2:])
        return TestResult(u2 / 2, min(1.0, 2 * min(low, high) / total), True)
    if tied and m + n <= EXACT_MAX_TIED:
        ranks = _midranks(pooled)
        dist = _tied_rank_sum_distribution(ranks, m)
        obs = sum(ranks[:m])
        low = sum(c for s, c in dist.items() if s <= obs)
        high = sum(c for s, c in dist.items() if s >= obs)
        return TestResult(u2 / 2, min(1.0, 2 * min(low, high) / total), True)
    return TestResult(u2 / 2, _normal_p(u2 / 2, m, n, pooled), False)


def _normal_p(u: float, m: int, n: int, pooled: Sequence[float]) -> float:
    big_n = m + n
    ties = {v: pooled.count(v) for v in set(pooled)}
    tie_term = sum(t**3 - t for t in ties.values()) / (big_n * (big_n - 1))
    var = m * n / 12 * ((big_n + 1) - tie_term)
    if var <= 0:
        return 1.0
    z = max(0.0, abs(u - m * n / 2) - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(z / math.sqrt(2)))


def min_p_value(m: int, n: int) -> float:
    """Smallest two-sided exact Mann-Whitney p-value attainable with m and n values."""
    return min(1.0, 2 / math.comb(m + n, m))


def log_ratio_ci(x: Sequence[float], y: Sequence[float],
                 confidence: float) -> tuple[float, Interval] | None:
    """Hodges-Lehmann ratio x/y and its Moses interval, on log times.

    Under the model x = ratio * y (a shift of log times) the interval
    [d_(k), d_(N+1-k)] of the N = m*n sorted log differences covers log(ratio) with
    probability 1 - 2 P(U <= k-1), exactly, whatever the distribution. The estimate is
    exp(median of the differences). None for non-positive times or fewer than 2 values.
    """
    if len(x) < 2 or len(y) < 2 or min(x) <= 0 or min(y) <= 0:
        return None
    m, n = len(x), len(y)
    diffs = sorted(math.log(a) - math.log(b) for a in x for b in y)
    big_n = len(diffs)
    alpha = 1 - confidence
    if m * n <= EXACT_MAX_PAIRS:
        cdf = _u_cdf(m, n)
        k = 1
        while k + 1 <= (big_n + 1) // 2 and cdf[k] <= alpha / 2:
            k += 1
        coverage = 1 - 2 * cdf[k - 1]
    else:  # normal approximation of the U quantile
        z = _normal_quantile(1 - alpha / 2)
        k = max(1, math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
        coverage = confidence
    est = math.exp(median(diffs))
    return est, Interval(math.exp(diffs[k - 1]), math.exp(diffs[big_n - k]), coverage)


def shift_ci(x: Sequence[float], y: Sequence[float],
             confidence: float) -> tuple[float, Interval] | None:
    """Hodges-Lehmann shift x - y and its Moses interval (no logs: for figures such as an
    overlap percentage, which may be 0). The same order statistics as log_ratio_ci, taken
    of the m*n differences x_i - y_j. None with fewer than 2 values on a side."""
    if len(x) < 2 or len(y) < 2:
        return None
    m, n = len(x), len(y)
    diffs = sorted(a - b for a in x for b in y)
    big_n, alpha = len(diffs), 1 - confidence
    if m * n <= EXACT_MAX_PAIRS:
        cdf = _u_cdf(m, n)
        k = 1
        while k + 1 <= (big_n + 1) // 2 and cdf[k] <= alpha / 2:
            k += 1
        coverage = 1 - 2 * cdf[k - 1]
    else:
        z = _normal_quantile(1 - alpha / 2)
        k = max(1, math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
        coverage = confidence
    return median(diffs), Interval(diffs[k - 1], diffs[big_n - k], coverage)


def _normal_quantile(p: float) -> float:
    # Bisection on erfc: plenty for the one quantile we need, and no dependency.
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if 0.5 * math.erfc(-mid / math.sqrt(2)) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    k = len(p_values)
    order = sorted(range(k), key=lambda i: p_values[i])
    adjusted = [0.0] * k
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def geomean_ci(ratios: Sequence[float], confidence: float) -> tuple[float, Interval | None]:
    """Geometric mean of positive ratios and a Student t interval on their logs.

    Used for summaries over the sizes of a range, where the ratios are many enough for a
    mean and a t interval (the geometric mean is the mean of log ratios). None as the
    interval below 2 ratios or when they are all equal (no spread to estimate).
    """
    from scipy.stats import t as student_t  # type: ignore[import-untyped]  # late: summaries only

    logs = [math.log(r) for r in ratios if r > 0]
    if not logs:
        raise ValueError("geometric mean of no positive ratio")
    n = len(logs)
    mean = sum(logs) / n
    if n < 2:
        return math.exp(mean), None
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (n - 1))
    if sd == 0:
        return math.exp(mean), None
    half = float(student_t.ppf(1 - (1 - confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return math.exp(mean), Interval(math.exp(mean - half), math.exp(mean + half), confidence)
