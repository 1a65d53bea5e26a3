"""Point-to-point models: piecewise Hockney fits of ping-pong latency per placement level.

Input rows are one-way latencies (osu_latency reports half the round trip) per message size,
repetitions allowed, for one placement level (core | socket | node) and one transport/MCA
setting. The model per level is t(m) = α_i + m/β_i on protocol regime i, regimes being
contiguous ranges of message size.

Regimes are found from the data: for 1 to `max_segments` segments over the sorted distinct
sizes, every split that puts a breakpoint between two measured sizes and at least
`min_sizes` distinct sizes in each segment is fitted, and the split with the lowest BIC wins
(a breakpoint counts as a parameter, so a new regime must pay for itself). A regime starts
at the first measured size it covers (`from_bytes`).

Weights: latency noise is roughly proportional to latency (a 1 µs and a 100 µs point are
both measured to a few percent), so the fits are weighted least squares with weights 1/t²,
i.e. they minimise squared *relative* error. Confidence intervals are the 95% intervals of
statsmodels' WLS; β's interval is the reciprocal of the slope's.

A segment whose intercept comes out negative is refitted through the origin (α = 0, the
CI of α is then [0, 0]); a segment whose slope is not significantly positive (95 %
interval above 0) is not a candidate (a bandwidth cannot be estimated from it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import numpy as np

from collbench.catalog.forcing import DEFAULT_TRANSPORT
from collbench.errors import UserError

LEVELS: Final = ("core", "socket", "node")
CI_LEVEL: Final = 0.95


@dataclass(frozen=True)
class PingPong:
    """One ping-pong measurement: one-way latency (µs) of a `size_bytes` message."""

    size_bytes: int
    latency_us: float
    level: str = "core"
    transport: str = DEFAULT_TRANSPORT  # transport / MCA setting label; never mixed in a fit


@dataclass(frozen=True)
class Regime:
    """t(m) = alpha_us + m / beta_bytes_per_s (in µs) for m >= from_bytes (up to the next)."""

    from_bytes: int
    alpha_us: float
    beta_bytes_per_s: float
    alpha_ci: tuple[float, float] | None = None
    beta_ci: tuple[float, float] | None = None

    def time_us(self, nbytes: float) -> float:
        return self.alpha_us + nbytes * 1e6 / self.beta_bytes_per_s


@dataclass(frozen=True)
class FitError:
    """How well a fit reproduces the points it was fitted on (absolute % error)."""

    points: int
    median_abs_pct: float
    p95_abs_pct: float


@dataclass(frozen=True)
class LogGP:
    """LogGP parameters of one level (µs; G in µs per byte), e.g. from `model loggp`.

    L: latency; o_s, o_r: send and receive overheads of a small message; g: the gap between
    small messages; G: the gap per byte of large messages, from `G_from_bytes` on when
    known. `method` says how they were obtained (free text)."""

    L_us: float
    o_s_us: float
    o_r_us: float
    g_us: float
    G_us_per_byte: float
    G_from_bytes: int | None = None
    method: str | None = None


class Overheads(Protocol):
    """Per-message CPU time by size: a platform level (platforms.model.Level) has it."""

    def overhead_at(self, size: int) -> tuple[float, float]: ...


class Load(Protocol):
    """Latency a message gains by the busy cores of its sender's node: a platform level
    (platforms.model.Level, load_latency_us) has it."""

    def load_at(self, busy: int) -> float: ...


class Slowdown(Protocol):
    """How many times longer a message's bytes take by the busy cores of its sender's node:
    a platform level (platforms.model.Level) with [memory] load_bandwidth has it."""

    def slowdown_at(self, busy: int) -> float: ...


@dataclass(frozen=True)
class LevelModel:
    """The p2p model of one placement level: regimes sorted by from_bytes (first at 0),
    optionally its LogGP parameters (not used by the Hockney costing), and optionally the
    per-message overheads (o_s, o_r) by size that a platform charges on the sender's and
    the receiver's CPU beside the regimes' network time, and the latency its messages gain
    when many cores of a node are busy, and the factor its bytes then take
    (models.platform)."""

    level: str
    regimes: tuple[Regime, ...]
    transport: str = DEFAULT_TRANSPORT
    error: FitError | None = None
    bic: float | None = None
    loggp: LogGP | None = None
    overheads: Overheads | None = None
    load: Load | None = None
    slow: Slowdown | None = None

    def slowdown(self, busy: int) -> float:
        """Time factor of a message's bytes when `busy` cores of its sender's node run a
        rank (1 without a load slowdown)."""
        return 1.0 if self.slow is None else self.slow.slowdown_at(busy)

    def load_us(self, busy: int) -> float:
        """Extra latency (µs) of a message when `busy` cores of its sender's node run a
        rank (0 without a load term)."""
        return 0.0 if self.load is None else self.load.load_at(busy)

    def overhead_us(self, nbytes: int) -> tuple[float, float]:
        """(o_s, o_r) in µs of one message of `nbytes` (0, 0 without overheads)."""
        return (0.0, 0.0) if self.overheads is None else self.overheads.overhead_at(nbytes)

    def regime(self, nbytes: float) -> Regime:
        chosen = self.regimes[0]
        for r in self.regimes[1:]:
            if nbytes >= r.from_bytes:
                chosen = r
        return chosen

    def time_us(self, nbytes: float) -> float:
        return self.regime(nbytes).time_us(nbytes)

    def alpha_us(self, nbytes: float) -> float:
        return self.regime(nbytes).alpha_us

    def bandwidth_part_us(self, nbytes: float) -> float:
        return nbytes * 1e6 / self.regime(nbytes).beta_bytes_per_s


@dataclass(frozen=True)
class Sharing:
    """How concurrent transfers share a node's hardware (a platform's [memory] table):
    `receiver_copies`: a rendezvous transfer is copied by its receiver, so one sender's
    concurrent transfers do not queue on its port; `socket_bytes_per_us`: what every
    transfer leaving one socket shares, and apart from it every one entering it (0: no
    limit beyond each transfer's own); `queue_bytes_per_us` (a platform's send_queue): per
    level ("core", "socket", "package", "node"), the rate at which one sender's rendezvous
    transfers leave one after another (empty: no queue); `card_bytes_per_us`: what every
    transfer leaving one node shares, and apart from it every one entering it (the node's
    network card, a SimGrid platform's "nic" link; 0: no limit)."""

    receiver_copies: bool = False
    socket_bytes_per_us: float = 0.0
    queue_bytes_per_us: Mapping[str, float] = field(default_factory=dict)
    card_bytes_per_us: float = 0.0


@dataclass(frozen=True)
class P2PModel:
    """Per-level point-to-point models, plus an optional reduction cost (µs per byte) and
    how transfers share a node (None: a ping-pong fit, which cannot tell)."""

    levels: Mapping[str, LevelModel]
    gamma_us_per_byte: float = 0.0
    source: Mapping[str, str] = field(default_factory=dict)
    sharing: Sharing | None = None
    # A platform's [smpi] rendezvous_bytes: sends of this size or more wait for their
    # receive under --network mpi (None: the network's own threshold, Open MPI's 4 KiB).
    rendezvous: int | None = None

    def level(self, level: str) -> LevelModel:
        if level == "package" and level not in self.levels:
            level = "socket"  # a model without the package level: inter-socket's numbers
        try:
            return self.levels[level]
        except KeyError:
            raise UserError(f"p2p model: level {level!r} is missing; valid: "
                            f"{', '.join(sorted(self.levels)) or '(none)'}") from None

    def time_us(self, level: str, nbytes: float) -> float:
        return self.level(level).time_us(nbytes)


# ---------------------------------------------------------------------------------------
# fitting


@dataclass(frozen=True)
class _SegFit:
    alpha: float
    slope: float  # µs per byte
    alpha_ci: tuple[float, float]
    slope_ci: tuple[float, float]
    wrss: float  # weighted residual sum of squares (relative residuals squared)
    through_origin: bool


def _fit_segment(x: np.ndarray, y: np.ndarray) -> _SegFit | None:
    """WLS of y = a + b·x with weights 1/y²; None when the slope is not significantly
    positive (its 95 % interval reaches 0): noise over a few tiny sizes (0-2 B on a loaded
    machine) would otherwise pass for a regime with a bandwidth of a few MB/s."""
    import statsmodels.api as sm  # lazily: 1.5 s to import
    w = 1.0 / (y * y)
    if np.ptp(x) == 0:
        return None
    res = sm.WLS(y, sm.add_constant(x, has_constant="add"), weights=w).fit()
    a, b = float(res.params[0]), float(res.params[1])
    if b <= 0 or not math.isfinite(b):
        return None
    if a >= 0:
        ci = res.conf_int(alpha=1 - CI_LEVEL)
        if not ci[1][0] > 0:
            return None
        return _SegFit(a, b, (float(ci[0][0]), float(ci[0][1])),
                       (float(ci[1][0]), float(ci[1][1])), float(np.sum(w * res.resid ** 2)),
                       False)
    res0 = sm.WLS(y, x.reshape(-1, 1), weights=w).fit()
    b0 = float(res0.params[0])
    ci0 = res0.conf_int(alpha=1 - CI_LEVEL)
    if b0 <= 0 or not ci0[0][0] > 0:
        return None
    return _SegFit(0.0, b0, (0.0, 0.0), (float(ci0[0][0]), float(ci0[0][1])),
                   float(np.sum(w * res0.resid ** 2)), True)


def _bic(wrss: float, n: int, k: int) -> float:
    # Gaussian likelihood of the relative residuals, variance profiled out.
    return n * math.log(max(wrss, 1e-300) / n) + k * math.log(n)


def _check_rows(rows: Sequence[PingPong], where: str) -> None:
    for r in rows:
        if r.level not in LEVELS:
            raise UserError(f"{where}: level: {r.level!r} is not valid; valid: "
                            f"{', '.join(LEVELS)}")
        if isinstance(r.size_bytes, bool) or not isinstance(r.size_bytes, int) \
                or r.size_bytes < 0:
            raise UserError(f"{where}: size_bytes: {r.size_bytes!r} is not valid; valid: an "
                            "integer >= 0")
        if not isinstance(r.latency_us, (int, float)) or not math.isfinite(r.latency_us) \
                or r.latency_us <= 0:
            raise UserError(f"{where}: latency_us: {r.latency_us!r} at size {r.size_bytes} "
                            "is not valid; valid: a finite time > 0 µs")


def fit_level(rows: Sequence[PingPong], *, max_segments: int = 3, min_sizes: int = 3,
              where: str = "ping-pong") -> LevelModel:
    """Piecewise Hockney fit of one level and one transport (rows must not mix them)."""
    if not rows:
        raise UserError(f"{where}: no ping-pong rows; valid: at least 3 message sizes")
    _check_rows(rows, where)
    groups = {(r.level, r.transport) for r in rows}
    if len(groups) > 1:
        raise UserError(f"{where}: rows mix {len(groups)} (level, transport) settings "
                        f"{sorted(groups)}; valid: one setting per fit (use fit_groups)")
    if not 1 <= max_segments <= 3:
        raise UserError(f"{where}: max_segments: {max_segments} is not valid; valid: 1-3")
    if min_sizes < 2:
        raise UserError(f"{where}: min_sizes: {min_sizes} is not valid; valid: >= 2")
    level, transport = next(iter(groups))
    sizes = sorted({r.size_bytes for r in rows})
    if len(sizes) < 3:
        raise UserError(f"{where}: level {level} ({transport}): {len(sizes)} distinct "
                        f"message size(s) {sizes}; valid: at least 3")
    order = sorted(rows, key=lambda r: r.size_bytes)
    x = np.array([r.size_bytes for r in order], dtype=float)
    y = np.array([r.latency_us for r in order], dtype=float)
    n = len(order)
    # index of the first row of each distinct size
    first = {s: i for i, s in reversed(list(enumerate(int(v) for v in x)))}
    starts = [first[s] for s in sizes]
    cache: dict[tuple[int, int], _SegFit | None] = {}

    def seg(lo: int, hi: int) -> _SegFit | None:  # distinct-size indices [lo, hi)
        key = (lo, hi)
        if key not in cache:
            a = starts[lo]
            b = starts[hi] if hi < len(sizes) else n
            cache[key] = _fit_segment(x[a:b], y[a:b])
        return cache[key]

    min_per = max(min(min_sizes, len(sizes)), 2)
    best: tuple[float, list[int], list[_SegFit]] | None = None
    for k in range(1, max_segments + 1):
        for cuts in itertools.combinations(range(min_per, len(sizes) - min_per + 1), k - 1):
            bounds = [0, *cuts, len(sizes)]
            if any(bounds[i + 1] - bounds[i] < min_per for i in range(k)):
                continue
            cand = [seg(bounds[i], bounds[i + 1]) for i in range(k)]
            good = [f for f in cand if f is not None]
            if len(good) < k:
                continue
            params = sum(1 if f.through_origin else 2 for f in good) + (k - 1)
            bic = _bic(sum(f.wrss for f in good), n, params)
            if best is None or bic < best[0] - 1e-9:
                best = (bic, bounds, good)
    if best is None:
        raise UserError(f"{where}: level {level} ({transport}): latency does not grow with "
                        f"message size over {sizes[0]}-{sizes[-1]} B, so no bandwidth can be "
                        "fitted; valid: measurements up to larger sizes (e.g. 1 MiB)")
    bic, bounds, chosen = best
    regimes = []
    for i, f in enumerate(chosen):
        lo_s, hi_s = f.slope_ci
        beta_ci = (1e6 / hi_s, 1e6 / lo_s if lo_s > 0 else math.inf)
        regimes.append(Regime(0 if i == 0 else sizes[bounds[i]], f.alpha, 1e6 / f.slope,
                              f.alpha_ci, beta_ci))
    model = LevelModel(level, tuple(regimes), transport, None, bic)
    pred = np.array([model.time_us(v) for v in x])
    err = np.abs(pred - y) / y * 100.0
    return LevelModel(level, tuple(regimes), transport,
                      FitError(n, float(np.median(err)), float(np.percentile(err, 95))), bic)


def fit_groups(rows: Iterable[PingPong], *, max_segments: int = 3, min_sizes: int = 3
               ) -> dict[tuple[str, str], LevelModel]:
    """One fit per (level, transport) setting found in `rows`, keyed and labelled by it;
    settings are never mixed."""
    groups: dict[tuple[str, str], list[PingPong]] = {}
    for r in rows:
        groups.setdefault((r.level, r.transport), []).append(r)
    return {key: fit_level(g, max_segments=max_segments, min_sizes=min_sizes,
                           where=f"ping-pong {key[0]}/{key[1]}")
            for key, g in sorted(groups.items())}


def fit_model(rows: Iterable[PingPong], *, transport: str | None = None,
              gamma_us_per_byte: float = 0.0, max_segments: int = 3,
              min_sizes: int = 3) -> P2PModel:
    """A P2PModel from rows of one transport setting (`transport` picks one if mixed)."""
    rows = list(rows)
    transports = sorted({r.transport for r in rows})
    if transport is None:
        if len(transports) > 1:
            raise UserError(f"ping-pong: rows hold {len(transports)} transport settings; "
                            f"valid: pick one of {', '.join(transports)}")
        transport = transports[0] if transports else DEFAULT_TRANSPORT
    elif transport not in transports:
        raise UserError(f"ping-pong: transport {transport!r} has no rows; valid: "
                        f"{', '.join(transports) or '(none)'}")
    fits = fit_groups([r for r in rows if r.transport == transport],
                      max_segments=max_segments, min_sizes=min_sizes)
    return P2PModel({lvl: m for (lvl, _), m in fits.items()}, gamma_us_per_byte,
                    {"origin": "fit", "transport": transport})
