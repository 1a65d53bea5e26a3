"""Regressions of latency in the process count P (or in the message size).

Named forms: constant (a), linear (a + bP), quadratic (a + bP + cP²), log (a + b·log2 P),
plogp (a + b·P·log2 P); and a small PMNF search like Extra-P's: a + Σ c_k·P^i_k·log2(P)^j_k
with one or two terms, i ∈ PMNF_EXPONENTS, j ∈ {0, 1, 2}.

Every candidate is a least-squares fit with statsmodels and reports coefficients with 95%
intervals, adjusted R², AIC and the leave-one-out error (refit without each point, predict
it; median and p95 absolute % error). The best form has the lowest AIC, except that a
simpler form (fewer parameters; at equal parameters, a named form before a PMNF one)
within 2 units of it is preferred. The criterion is AIC with the small-sample correction
(AICc = AIC + 2k(k+1)/(n−k−1)): with ~10 process counts and 1,600 PMNF hypotheses, plain AIC
picks three-parameter forms that fit the noise; both AIC and AICc are reported.

Weights: latencies over a range of P span orders of magnitude and their noise is roughly
proportional to them, so by default the fits are WLS with weights 1/y² (squared *relative*
residuals; with plain OLS the largest P decides everything and small-P points are ignored).
`weights="none"` gives plain OLS.

PMNF candidates are screened with numpy's least squares (1,600 two-term hypotheses) and only
the best few by AICc are refitted with statsmodels; term coefficients must be positive, as in
Extra-P's search (costs grow with P), and a form needs at least 2 more points than
parameters.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

import numpy as np

from collbench.errors import UserError

PMNF_EXPONENTS: Final = tuple(Fraction(s) for s in (
    "0", "1/4", "1/3", "1/2", "2/3", "3/4", "1", "5/4", "4/3", "3/2", "5/3", "7/4", "2",
    "9/4", "7/3", "5/2", "8/3", "11/4", "3"))
PMNF_LOG_EXPONENTS: Final = (0, 1, 2)
AIC_TOLERANCE: Final = 2.0
SCREEN_KEEP: Final = 8


@dataclass(frozen=True)
class Term:
    """x^i · log2(x)^j."""

    i: Fraction
    j: int

    @property
    def name(self) -> str:
        parts = []
        if self.i:
            parts.append("x" if self.i == 1 else f"x^{self.i}")
        if self.j:
            parts.append("log2(x)" if self.j == 1 else f"log2(x)^{self.j}")
        return "·".join(parts) or "1"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(np.power(x, float(self.i)) * np.power(np.log2(x), self.j),
                          dtype=float)


NAMED: Final[dict[str, tuple[Term, ...]]] = {
    "constant": (),
    "linear": (Term(Fraction(1), 0),),
    "log": (Term(Fraction(0), 1),),
    "plogp": (Term(Fraction(1), 1),),
    "quadratic": (Term(Fraction(1), 0), Term(Fraction(2), 0)),
}


@dataclass(frozen=True)
class ScalingFit:
    """One form fitted: y = coefs[0] + Σ coefs[k]·terms[k-1](x)."""

    name: str
    terms: tuple[Term, ...]
    coefs: tuple[float, ...]
    ci: tuple[tuple[float, float], ...]
    adj_r2: float
    aic: float
    aicc: float
    loo_median_abs_pct: float
    loo_p95_abs_pct: float

    @property
    def params(self) -> int:
        return len(self.coefs)

    @property
    def formula(self) -> str:
        out = f"{self.coefs[0]:.4g}"
        for c, t in zip(self.coefs[1:], self.terms, strict=True):
            out += f" + {c:.4g}·{t.name}"
        return out

    def predict(self, x: float | Sequence[float]) -> np.ndarray:
        xs = np.atleast_1d(np.asarray(x, dtype=float))
        return np.asarray(_design(xs, self.terms) @ np.array(self.coefs), dtype=float)


@dataclass(frozen=True)
class ScalingResult:
    fits: tuple[ScalingFit, ...]  # sorted by AICc
    best: ScalingFit


def _design(x: np.ndarray, terms: Sequence[Term]) -> np.ndarray:
    return np.column_stack([np.ones_like(x), *[t(x) for t in terms]])


# A residual below a millionth of the value it fits is no better than none: times are
# stored to a few digits. Floored there, forms that all pass through the points tie (the
# simplest wins) instead of ranking by rounding noise, and an exact fit's log(0) is avoided.
RESOLUTION: Final = 1e-6


def _ssr_floor(y: np.ndarray, w: np.ndarray) -> float:
    return float(np.sum(w * y * y)) * RESOLUTION ** 2


def _aic(ssr: float, n: int, k: int, floor: float = 0.0) -> float:
    # statsmodels' OLS AIC: -2·llf + 2k with the Gaussian profile likelihood (the weights'
    # own term is the same for every form, so it is left out when ranking)
    llf = -n / 2.0 * (math.log(2 * math.pi) + math.log(max(ssr, floor, 1e-300) / n) + 1)
    return -2 * llf + 2 * k


def _aicc(aic: float, n: int, k: int) -> float:
    return aic + 2 * k * (k + 1) / (n - k - 1) if n - k - 1 > 0 else math.inf


def _lstsq(design: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    sw = np.sqrt(w)
    coef, *_ = np.linalg.lstsq(design * sw[:, None], y * sw, rcond=None)
    return np.asarray(coef, dtype=float)


def _loo(x: np.ndarray, y: np.ndarray, w: np.ndarray,
         terms: Sequence[Term]) -> tuple[float, float]:
    errs = []
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        coef = _lstsq(_design(x[keep], terms), y[keep], w[keep])
        pred = float((_design(x[i:i + 1], terms) @ coef)[0])
        errs.append(abs(pred - y[i]) / abs(y[i]) * 100.0 if y[i] else math.inf)
    arr = np.array(errs)
    return float(np.median(arr)), float(np.percentile(arr, 95))


def _fit(name: str, x: np.ndarray, y: np.ndarray, w: np.ndarray,
         terms: Sequence[Term]) -> ScalingFit:
    import statsmodels.api as sm  # lazily: 1.5 s to import
    res = sm.WLS(y, _design(x, terms), weights=w).fit()
    ci = res.conf_int(alpha=0.05)
    med, p95 = _loo(x, y, w, terms)
    with np.errstate(divide="ignore", invalid="ignore"):  # constant y: R² is 0/0
        adj = float(res.rsquared_adj) if terms else 0.0
    k = len(terms) + 1
    # statsmodels' WLS AIC (its llf adds Σ log(w) / 2), with the SSR floored as in _aic
    aic = _aic(float(res.ssr), len(x), k, _ssr_floor(y, w)) - float(np.sum(np.log(w)))
    return ScalingFit(name, tuple(terms), tuple(float(c) for c in res.params),
                      tuple((float(lo), float(hi)) for lo, hi in ci),
                      adj if math.isfinite(adj) else 0.0, aic, _aicc(aic, len(x), k), med, p95)


ArrayLike = Sequence[float] | np.ndarray


def _check(x: ArrayLike, y: ArrayLike, what: str) -> tuple[np.ndarray, np.ndarray]:
    if len(x) != len(y):
        raise UserError(f"scaling: {len(x)} {what} values but {len(y)} latencies; valid: one "
                        "latency per value")
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xa) < 3:
        raise UserError(f"scaling: {len(xa)} point(s); valid: at least 3")
    if not np.all(np.isfinite(xa)) or np.any(xa < 1):
        bad = [float(v) for v in xa if not v >= 1][:3]
        raise UserError(f"scaling: {what}: {bad} is not valid; valid: finite values >= 1")
    if not np.all(np.isfinite(ya)) or np.any(ya <= 0):
        raise UserError("scaling: latency: non-finite or non-positive values are not valid; "
                        "valid: finite times > 0 µs")
    if len(set(xa.tolist())) < 3:
        raise UserError(f"scaling: {what}: {sorted(set(xa.tolist()))} has fewer than 3 "
                        "distinct values; valid: at least 3")
    return xa, ya


def _pmnf_candidates() -> list[tuple[Term, ...]]:
    single = [Term(i, j) for i in PMNF_EXPONENTS for j in PMNF_LOG_EXPONENTS if i or j]
    return [(t,) for t in single] + list(itertools.combinations(single, 2))


# Why a form needs its coefficients + 2 distinct x values: AICc's correction
# 2k(k+1)/(n-k-1) is undefined at n = k + 1, and with n = k the fit passes through every
# point (no residual to judge it by, no leave-one-out refit).
NEEDS_WHY: Final = ("a form with k coefficients needs k + 2 distinct values: with k + 1 "
                    "AICc is undefined, with k the fit passes through every point and "
                    "leave-one-out cannot refit")


def points_needed(form: str) -> int:
    """Distinct x values (process counts) a form needs: its coefficients + 2. A PMNF
    hypothesis has one or two terms: "pmnf" answers with its one-term minimum."""
    terms = NAMED.get(form, (Term(Fraction(1), 0),))
    return len(terms) + 3


def fit_scaling(x: ArrayLike, y: ArrayLike, *, what: str = "P",
                pmnf: bool = True, weights: Literal["relative", "none"] = "relative"
                ) -> ScalingResult:
    """Fit the named forms (and the PMNF search) of y in x; x is P or a size (>= 1)."""
    xa, ya = _check(x, y, what)
    if weights not in ("relative", "none"):
        raise UserError(f"scaling: weights {weights!r} is not valid; valid: relative, none")
    w = 1.0 / (ya * ya) if weights == "relative" else np.ones_like(ya)
    n, floor = len(xa), _ssr_floor(ya, w)
    fits: list[ScalingFit] = []
    seen: set[tuple[Term, ...]] = set()
    for name, terms in NAMED.items():
        if n >= points_needed(name):
            fits.append(_fit(name, xa, ya, w, terms))
            seen.add(terms)
    if pmnf:
        screened: list[tuple[float, tuple[Term, ...]]] = []
        for terms in _pmnf_candidates():
            if n < len(terms) + 3 or terms in seen:
                continue
            design = _design(xa, terms)
            if np.linalg.matrix_rank(design) < design.shape[1]:
                continue
            coef = _lstsq(design, ya, w)
            if np.any(coef[1:] <= 0):
                continue
            ssr = float(np.sum(w * (ya - design @ coef) ** 2))
            k = len(terms) + 1
            screened.append((_aicc(_aic(ssr, n, k, floor), n, k), terms))
        screened.sort(key=lambda s: s[0])
        for _, terms in screened[:SCREEN_KEEP]:
            fits.append(_fit("pmnf: " + " + ".join(t.name for t in terms), xa, ya, w, terms))
    fits.sort(key=lambda f: f.aicc)
    return ScalingResult(tuple(fits), choose(fits))


def choose(fits: Sequence[ScalingFit]) -> ScalingFit:
    """Lowest AICc, but the simplest form within AIC_TOLERANCE of it wins: fewest
    parameters, then a named form before a PMNF hypothesis, then lowest AICc."""
    if not fits:
        raise UserError("scaling: no form could be fitted; valid: more points than the "
                        "simplest form's parameters + 2")
    low = min(f.aicc for f in fits)
    near = [f for f in fits if f.aicc <= low + AIC_TOLERANCE]
    return min(near, key=lambda f: (f.params, f.name.startswith("pmnf"), f.aicc))
