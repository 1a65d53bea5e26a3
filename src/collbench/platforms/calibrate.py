"""Fill a cluster description from measured ping-pongs, and prove it reproduces them.

Method (docs/simgrid.md, "Calibration"):
1. Ping-pong rows of a results folder (collective "latency", collbench runs or ingested
   osu_latency files) are grouped by placement level: --map-by core = intra_socket,
   socket = inter_socket, node = inter_node; the median over repetitions is kept.
2. Per level, a Hockney line T(m) = α + m·β is fitted by least squares on relative error
   (small and large messages count alike): latency_us = α, bandwidth_mbs = 1/β.
3. What a straight line misses (eager/rendezvous switches, cache effects) goes into the
   level's size-dependent factors, one bucket per measured size: T = α·lat(m) +
   (m+16)·β/bw(m) (SMPI adds a 16-byte envelope); each bucket is the smallest change of
   the two factors (closest to 1) that hits the measured time. collbench's platform
   loader applies them per level (SMPI's own factor options are one table for all).
4. The description is then simulated (real smpirun: the `simulate` callable, a SimGrid
   campaign per call in commands/simulated_pingpong.py) and each bucket's factors are
   scaled by measured/simulated until the simulation reproduces the measurement (or
   ROUNDS are spent); the errors that remain are reported and written to the [calibration]
   table.
5. Optionally, LogGP's per-message overheads o_s and o_r per level (PLogP, `collbench model
   loggp`) are set on the levels: the loader charges them to the sender and receiver of
   every message, so a root's sends are serialised as on a real CPU, and steps 3-4 fit the
   link to what remains of each time (the ping-pong still takes what was measured).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import ValidationError

from collbench.errors import UserError
from collbench.platforms.model import BANDWIDTH, BYTES, FACTOR, LATENCY, Cluster, Level
from collbench.platforms.simgrid_xml import SMPI_ENVELOPE
from collbench.spec import format_validation_error

ROUNDS: Final = 4
GOOD_ENOUGH_PCT: Final = 0.5  # stop correcting once every point is this close
RIDGE: Final = 1e-4  # pulls a bucket's two factors towards 1 where the data cannot tell
OVERHEAD_SHARE: Final = 0.9  # o_s + o_r may take at most this share of the latency α
MIN_NET_SHARE: Final = 0.05  # the network's part of a time never goes below this share
# A ping-pong time is 1 ns (the shortest latency a description holds) to 1e12 µs (no
# run's, as models.predict.MAX_US); 0 would divide by zero in the fits.
TIMES: Final = (1e-3, 1e12)

Points = dict[int, float]  # size_bytes -> one-way latency (µs)
Simulate = Callable[[Cluster, list[str], list[int]], dict[str, Points]]


@dataclass
class Calibration:
    cluster: Cluster
    measured: dict[str, Points]
    simulated: dict[str, Points]
    kept: list[str]  # levels not measured: kept from the base description
    notes: list[str] = field(default_factory=list)

    def errors_pct(self) -> dict[str, Points]:
        return {lv: {s: 100.0 * (self.simulated[lv][s] / t - 1.0) for s, t in pts.items()}
                for lv, pts in self.measured.items()}

    def max_error_pct(self) -> float:
        return max(abs(e) for errs in self.errors_pct().values() for e in errs.values())


# --- fitting ------------------------------------------------------------------------------

def _solve2(a11: float, a12: float, a22: float, b1: float, b2: float) -> tuple[float, float]:
    det = a11 * a22 - a12 * a12
    if abs(det) < 1e-300:
        raise ZeroDivisionError
    return (b1 * a22 - b2 * a12) / det, (a11 * b2 - a12 * b1) / det


def hockney(points: Points) -> tuple[float, float]:
    """(α µs, β µs/byte) minimising Σ((α + mβ)/T − 1)² over the points."""
    rows = [(1.0 / t, m / t) for m, t in points.items()]
    a11 = sum(a * a for a, _ in rows)
    a12 = sum(a * b for a, b in rows)
    a22 = sum(b * b for _, b in rows)
    alpha, beta = _solve2(a11, a12, a22, sum(a for a, _ in rows), sum(b for _, b in rows))
    big, t_big = max(points.items())
    small = min(points.values())
    alpha = alpha if alpha > 0 else 0.5 * small
    fastest = 1.0 / BANDWIDTH.high  # µs/byte: a flat curve is as fast as a link may be
    if beta <= 0:
        beta = (t_big - alpha) / big if big else fastest
    # Faster than the description's bounds is clamped (harmless: the factors absorb it);
    # slower is left for the description to refuse, as the data then is no network's.
    return max(alpha, LATENCY.low), max(beta, fastest)


def _bucket(terms: list[tuple[float, float]]) -> tuple[float, float]:
    """(x, y) minimising Σ(A x + B y − 1)² + RIDGE·((x−1)² + (y−1)²)."""
    a11 = sum(a * a for a, _ in terms) + RIDGE
    a12 = sum(a * b for a, b in terms)
    a22 = sum(b * b for _, b in terms) + RIDGE
    try:
        x, y = _solve2(a11, a12, a22, sum(a for a, _ in terms) + RIDGE,
                       sum(b for _, b in terms) + RIDGE)
    except ZeroDivisionError:
        x = y = -1.0
    if x <= 0 or y <= 0:  # one common factor instead
        z = sum(a + b for a, b in terms) / sum((a + b) ** 2 for a, b in terms)
        x = y = z
    return x, y


Tables = tuple[list[tuple[int, float]], list[tuple[int, float]]]  # (lat_factor, bw_factor)


def fit_factors(points: Points, alpha: float, beta: float,
                overhead: float | OverheadRows = 0.0, rendezvous: int = 0) -> Tables:
    """One level's (lat_factor, bw_factor) tables, one entry per measured size; `overhead`
    (o_s + o_r, charged apart; a constant or per-size rows) is taken out of every time
    before fitting the link. From `rendezvous` bytes on (0: never), a size keeps the
    largest size's bandwidth factor and its time beyond that bandwidth goes to its latency:
    the protocol's handshake, which concurrent messages overlap, not a slower link."""
    sizes = sorted(points)
    lat, bw = [], []
    for k, size in enumerate(sizes):
        t = max(points[size] - total_at(overhead, size), MIN_NET_SHARE * points[size])
        x, y = _bucket([(alpha / t, (size + SMPI_ENVELOPE) * beta / t)])
        start = 0 if k == 0 else sizes[k - 1] + 1  # from just above the previous size
        lat.append((start, _factor(x)))
        bw.append((start, _factor(1.0 / y)))
    if rendezvous:
        link = bw[-1][1]  # the large-message bandwidth factor
        for k, size in enumerate(sizes):
            t = max(points[size] - total_at(overhead, size), MIN_NET_SHARE * points[size])
            handshake = (t - (size + SMPI_ENVELOPE) * beta / link) / alpha
            if size >= rendezvous and handshake > 0:  # else the split above stays
                lat[k], bw[k] = (lat[k][0], _factor(handshake)), (bw[k][0], link)
    return lat, bw


def _factor(f: float) -> float:
    """`f` within the description's factor range: a correction beyond it is no network's,
    and the simulate-and-correct rounds report the error that remains."""
    return min(max(f, FACTOR.low), FACTOR.high)


Overheads = Mapping[str, tuple[float, float]]  # level -> (o_s µs, o_r µs)
OverheadRows = list[tuple[int, float, float]]  # (from bytes, o_s µs, o_r µs), ascending


def total_at(overhead: float | OverheadRows, size: int) -> float:
    """o_s + o_r at `size` bytes: a constant, or rows interpolated as the loader does."""
    if isinstance(overhead, int | float):
        return float(overhead)
    probe = Level.model_construct(latency_us=1.0, bandwidth_mbs=1.0,
                                  send_overhead_us=overhead[0][1],
                                  recv_overhead_us=overhead[0][2], overhead_per_size=overhead)
    o_s, o_r = probe.overhead_at(size)
    return o_s + o_r


def _with(base: Cluster, params: Mapping[str, tuple[float, float]],
          tables: Mapping[str, Tables], overheads: Overheads,
          per_size: Mapping[str, OverheadRows] | None = None) -> Cluster:
    """`base` with the fitted levels, validated as a description read from a file is (a
    fit out of the bounds is one line, never a description collbench cannot read back)."""
    rows = per_size or {}
    fitted = {name: Level.model_construct(
        latency_us=alpha, bandwidth_mbs=1.0 / beta, lat_factor=tables[name][0],
        bw_factor=tables[name][1], send_overhead_us=overheads.get(name, (0.0, 0.0))[0],
        recv_overhead_us=overheads.get(name, (0.0, 0.0))[1],
        overhead_per_size=rows.get(name, []))
        for name, (alpha, beta) in params.items()}
    levels = base.levels.model_copy(update=fitted)
    data = base.model_copy(update={"levels": levels}).model_dump()
    try:
        return Cluster.model_validate(data)
    except ValidationError as e:
        raise UserError(format_validation_error(e, f"calibrated {base.name} (fit of "
                                                   f"{', '.join(params)})")) from None


def _check_times(points: Mapping[str, Points], what: str,
                 expected: Mapping[str, Points] | None = None) -> None:
    """Every time of `points` is one a ping-pong can take (and, for a simulation, every
    level and size of `expected` is there)."""
    for lv, pts in (expected or points).items():
        for size in pts:
            t = points.get(lv, {}).get(size)
            if t is None:
                raise UserError(f"{what} ping-pong {lv} at {size} B: missing; valid: a time "
                                "per level and size measured")
            if not (isinstance(t, int | float) and TIMES[0] <= t <= TIMES[1]):
                raise UserError(f"{what} ping-pong {lv} at {size} B: {t!r} µs is not valid; "
                                f"valid: a time from {TIMES[0]:g} to {TIMES[1]:g} µs")
            if not BYTES.holds(size):
                raise UserError(f"{what} ping-pong {lv}: size {size!r} is not valid; valid: "
                                f"{BYTES.words}")


def _check_base(base: Cluster, measured: Mapping[str, Points]) -> None:
    if "inter_node" in measured and base.nodes < 2:
        raise UserError(f"--from {base.name}: the results have inter-node ping-pongs but the "
                        "platform has 1 node; start from a description with 2 or more nodes")
    if "inter_socket" in measured and base.sockets_per_node < 2:
        raise UserError(f"--from {base.name}: the results have inter-socket ping-pongs but "
                        "the platform has 1 socket per node")


def shared_overheads(measured: Mapping[str, Points], shares: Mapping[str, float],
                     where: str, sender: float = 0.5,
                     eager_limit: int = 4096) -> dict[str, OverheadRows]:
    """(o_s, o_r) per level and size as a share of the measured one-way time: on shared
    memory no NIC takes over, so a message's time is the two CPUs' work, and up to the
    eager limit that work grows with the size (the sender copies the message into the
    receiver's fragment, the receiver copies it out); above it (single-copy rendezvous)
    the per-message work is the smallest message's again and the copy is the link's
    (docs/simgrid.md, "Per-message overheads from the ping-pong"). `sender` is the
    sender's part of each overhead. Levels must be measured; shares 0 to OVERHEAD_SHARE."""
    if not 0.0 <= sender <= 1.0:
        raise UserError(f"{where}: --sender-share {sender:g} is not valid; valid: 0 to 1")
    if not BYTES.holds(eager_limit):
        raise UserError(f"{where}: --eager-limit {eager_limit} is not valid; valid: "
                        f"{BYTES.words}")
    out: dict[str, OverheadRows] = {}
    for lv, share in shares.items():
        if lv not in measured:
            raise UserError(f"{where}: level {lv!r} has no ping-pong; valid: "
                            f"{', '.join(sorted(measured))}")
        if not 0.0 <= share <= OVERHEAD_SHARE:
            raise UserError(f"{where}: {lv}={share:g} is not valid; valid: a share from 0 "
                            f"to {OVERHEAD_SHARE:g}")
        pts = measured[lv]
        small = share * pts[min(pts)]
        rows: OverheadRows = [(0, sender * small, (1 - sender) * small)]
        for size in sorted(pts):
            if 0 < size <= eager_limit and size > min(pts):
                total = share * pts[size]
                rows.append((size, sender * total, (1 - sender) * total))
        if len(rows) > 1:  # back to the smallest message's work above the eager limit
            rows.append((eager_limit + 1, rows[0][1], rows[0][2]))
        out[lv] = rows
    return out


def usable_overheads(overheads: Overheads, params: Mapping[str, tuple[float, float]],
                     notes: list[str]) -> dict[str, tuple[float, float]]:
    """The overheads of the measured levels, scaled down where they would not leave the
    link any latency (they are part of the ping-pong latency α, measured apart)."""
    out = {}
    for lv, (o_s, o_r) in overheads.items():
        if lv not in params:
            notes.append(f"overheads for {lv} not used: no ping-pong measured there")
            continue
        alpha, total = params[lv][0], o_s + o_r
        if total > OVERHEAD_SHARE * alpha:
            scale = OVERHEAD_SHARE * alpha / total
            notes.append(f"{lv}: o_s + o_r = {total:.3g} µs exceeds {OVERHEAD_SHARE:.0%} of the "
                         f"fitted latency {alpha:.3g} µs; both scaled by {scale:.2f}")
            o_s, o_r = o_s * scale, o_r * scale
        out[lv] = (o_s, o_r)
    return out


def usable_rows(rows: Mapping[str, OverheadRows], params: Mapping[str, tuple[float, float]],
                notes: list[str]) -> dict[str, OverheadRows]:
    """Per-size overheads of the measured levels, every row scaled down by one factor
    where the first would not leave the link any latency (as usable_overheads does)."""
    out = {}
    for lv, table in rows.items():
        if lv not in params or not table:
            continue
        alpha, (_, o_s, o_r) = params[lv][0], table[0]
        scale = min(1.0, OVERHEAD_SHARE * alpha / (o_s + o_r)) if o_s + o_r > 0 else 1.0
        if scale < 1.0:
            notes.append(f"{lv}: o_s + o_r = {o_s + o_r:.3g} µs at the smallest size exceeds "
                         f"{OVERHEAD_SHARE:.0%} of the fitted latency {alpha:.3g} µs; every "
                         f"size's overheads scaled by {scale:.2f}")
        out[lv] = [(b, s * scale, r * scale) for b, s, r in table]
    return out


def calibrate(measured: dict[str, Points], base: Cluster, simulate: Simulate,
              source: str, overheads: Overheads | None = None,
              per_size: Mapping[str, OverheadRows] | None = None) -> Calibration:
    """A description reproducing `measured` in simulation (see the module docstring).

    `overheads` (LogGP o_s, o_r per level, e.g. from `model loggp`) are charged per message
    by the platform loader; the latency factors start from α − o_s − o_r so that the
    ping-pong still takes α, and the simulate-and-correct rounds absorb the rest."""
    _check_base(base, measured)
    _check_times(measured, "measured")
    params = {lv: hockney(pts) for lv, pts in measured.items()}
    notes: list[str] = []
    rows = usable_rows(per_size or {}, params, notes)
    over = {**usable_overheads(overheads or {}, params, notes),
            **{lv: (r[0][1], r[0][2]) for lv, r in rows.items()}}

    def level_overhead(lv: str) -> float | OverheadRows:
        return rows[lv] if lv in rows else sum(over.get(lv, (0.0, 0.0)))

    tables = {lv: fit_factors(pts, *params[lv], overhead=level_overhead(lv),
                              rendezvous=base.smpi.rendezvous_bytes)
              for lv, pts in measured.items()}
    levels, sizes = list(measured), sorted({s for pts in measured.values() for s in pts})
    cluster = _with(base, params, tables, over, rows)
    simulated = simulate(cluster, levels, sizes)
    _check_times(simulated, "simulated", measured)
    for _ in range(ROUNDS):
        worst = max(abs(simulated[lv][s] / t - 1) for lv, pts in measured.items()
                    for s, t in pts.items())
        if 100 * worst <= GOOD_ENOUGH_PCT:
            break
        tables = {lv: _corrected(tables[lv], pts, simulated[lv], level_overhead(lv))
                  for lv, pts in measured.items()}
        cluster = _with(base, params, tables, over, rows)
        simulated = simulate(cluster, levels, sizes)
        _check_times(simulated, "simulated", measured)
    kept = [lv for lv in ("intra_socket", "inter_socket", "inter_node")
            if lv not in measured and base.level(lv) is not None]
    result = Calibration(cluster, measured, simulated, kept, notes)
    if kept:
        result.notes.append(f"not measured, kept from {base.name}: {', '.join(kept)}")
    result.cluster = cluster.model_copy(update={"calibration": _summary(result, source)})
    return result


def with_package(cluster: Cluster, measured: Points, inter_socket: Points,
                 notes: list[str]) -> Cluster:
    """`cluster` with an inter_package level: inter_socket's (bandwidth, factors' shape,
    overheads, load) plus the latency the package hop adds, the median of measured
    inter_package − inter_socket over the sizes both hold. A published cross-package
    ping-pong is often one size (orfeo-epyc's: 2 B), which fits no bandwidth; the hop is
    one more link on the way, so it adds latency at every size. Not simulated: the
    ping-pong is inter_socket's (simulated and checked) plus this latency, exactly."""
    xs = cluster.levels.inter_socket
    if xs is None or cluster.packages_per_node < 2:
        raise UserError(f"--from {cluster.name}: the results have inter-package ping-pongs "
                        "(mapping package) but the platform has one package per node; valid: "
                        "a description with sockets_per_package below sockets_per_node and "
                        "inter-socket ping-pongs")
    _check_times({"inter_package": measured}, "measured")
    both = sorted(set(measured) & set(inter_socket))
    if not both:
        raise UserError(f"inter_package ping-pong at {', '.join(map(str, sorted(measured)))} "
                        "B: no inter-socket ping-pong at these sizes; valid: both levels "
                        "measured at one size at least")
    hop = statistics.median(measured[s] - inter_socket[s] for s in both)
    if hop < 0:
        raise UserError(f"inter_package ping-pong: {hop:.3g} µs faster than inter_socket at "
                        f"{', '.join(map(str, both))} B; valid: a cross-package time at least "
                        "the inter-socket one (the message also leaves its socket)")
    lat = xs.latency_us

    def through(table: list[tuple[int, float]]) -> list[tuple[int, float]]:
        # lat·f + hop = (lat + hop)·f': each size's route latency gains the hop
        return [(b, _factor((f * lat + hop) / (lat + hop))) for b, f in table]

    level = Level.model_validate({**xs.model_dump(), "latency_us": lat + hop,
                                  "lat_factor": through(xs.lat_factor)})
    notes.append(f"inter_package: inter_socket + {hop:.3g} µs (median of measured "
                 f"inter_package − inter_socket at {', '.join(map(str, both))} B; bandwidth, "
                 "overheads and load are inter_socket's)")
    return cluster.model_copy(update={
        "levels": cluster.levels.model_copy(update={"inter_package": level}),
        "calibration": {**cluster.calibration, "inter_package_hop_us": round(hop, 6),
                        "inter_package_sizes": both}})


def _corrected(tables: Tables, measured: Points, simulated: Points,
               overhead: float | OverheadRows = 0.0) -> Tables:
    """Scale each bucket by measured/simulated at its size (time ∝ lat and 1/bw), leaving
    the per-message overheads (a part of both times) out of the ratio."""
    lat, bw = tables
    sizes = sorted(measured)
    ratio = {s: max(measured[s] - total_at(overhead, s), MIN_NET_SHARE * measured[s])
             / max(simulated[s] - total_at(overhead, s), MIN_NET_SHARE * simulated[s])
             for s in sizes}
    new_lat = [(start, _factor(x * ratio[s])) for (start, x), s in zip(lat, sizes,
                                                                       strict=True)]
    new_bw = [(start, _factor(b / ratio[s])) for (start, b), s in zip(bw, sizes, strict=True)]
    return new_lat, new_bw


def _summary(result: Calibration, source: str) -> dict[str, Any]:
    errs = result.errors_pct()
    out: dict[str, Any] = {
        "source": source, "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "method": "Hockney fit per level + SMPI size factors (+ LogGP overheads per "
                  "message when given), checked by simulating the ping-pong (docs/simgrid.md)",
        "levels_measured": sorted(result.measured),
        "sizes": len({s for pts in result.measured.values() for s in pts}),
    }
    for lv, e in sorted(errs.items()):
        out[f"max_error_pct_{lv}"] = round(max(abs(v) for v in e.values()), 3)
    if result.kept:
        out["levels_kept"] = result.kept
    return out


# --- a few-rank probe (--probe) -------------------------------------------------------------

def probe_ratios(pingpong: Points, probe: Points, eager_limit: int) -> Points:
    """Per ping-pong size above `eager_limit`: the probe's time over the ping-pong's, where
    both measured a size, interpolated in log size between them and held beyond the ends.
    Sizes up to the eager limit keep the ping-pong (ratio 1)."""
    known = {s: probe[s] / pingpong[s] for s in sorted(probe) if s in pingpong
             and s > eager_limit}
    if not known:
        return {}
    sizes = sorted(known)
    out: Points = {}
    for m in (s for s in sorted(pingpong) if s > eager_limit):
        if m <= sizes[0] or m >= sizes[-1]:
            out[m] = known[sizes[0] if m <= sizes[0] else sizes[-1]]
            continue
        hi = next(i for i, s in enumerate(sizes) if s >= m)
        lo_s, hi_s = sizes[hi - 1], sizes[hi]
        w = math.log(m / lo_s) / math.log(hi_s / lo_s)
        out[m] = known[lo_s] ** (1 - w) * known[hi_s] ** w
    return out


def with_probe(measured: dict[str, Points], probe: Mapping[str, Points], eager_limit: int,
               source: str, notes: list[str]) -> dict[str, Points]:
    """`measured` with each probed level's times above the eager limit scaled by the probe's
    ratio (probe_ratios): what one message of a collective costs as OSU's collective loop
    times it (a barrier between calls, the ranks' times averaged), where the single-copy
    rendezvous runs; levels without a probe are left as measured."""
    out = {lv: dict(pts) for lv, pts in measured.items()}
    for lv, pts in probe.items():
        if lv not in measured:
            raise UserError(f"--probe: {source}: 2-rank rows on {lv} but no {lv} ping-pong; "
                            f"valid: probes on the measured levels ({', '.join(measured)})")
        ratios = probe_ratios(measured[lv], pts, eager_limit)
        if not ratios:
            raise UserError(f"--probe: {source}: no {lv} size above the eager limit "
                            f"({eager_limit} B) that the ping-pong measured too; valid: "
                            f"sizes from {eager_limit + 1} B among {sorted(measured[lv])}")
        for m, r in ratios.items():
            out[lv][m] = min(max(measured[lv][m] * r, TIMES[0]), TIMES[1])
        notes.append(f"{lv}: above {eager_limit} B the ping-pong × the 2-rank probe's ratio "
                     f"(--probe): " + ", ".join(f"{r:.2f} at {m} B" for m, r in
                                                 ratios.items() if m in pts))
    return out
