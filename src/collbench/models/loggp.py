"""LogGP/PLogP parameters of one placement level from the PLogP benchmark's measurements.

Input: `kernel.plogp` points, per message size m the medians of RTT(m), o_s(m), o_r(m) and
g(m) measured by Kielmann, Bal and Verstoep's method (`kernel/plogp.c`). Output
(`fit_level_loggp`):

- the LogGP parameters (`p2p.LogGP`), PLogP's values at the smallest size measured (0 B
  by default), which is what LogGP's small-message L, o and g stand for:
  L = RTT(0)/2 - g(0) (PLogP's definition; a negative value, possible when g(0) is measured
  larger than half a round trip, is set to 0 with a note), o_s = o_s(0), o_r = o_r(0),
  g = g(0);
- G, LogGP's gap per byte: the slope of g(m) for large m, i.e. 1/bandwidth of the last
  protocol regime of a piecewise linear fit of g(m) (the fit `model p2p` makes of
  ping-pongs, `p2p.fit_level`: regimes found from the data by BIC, weighted least squares
  on relative error); G_from is where that regime starts;
- the Hockney model of the same level fitted to the one-way times RTT(m)/2 (`p2p.fit_level`),
  so that a file written from this benchmark alone is complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from collbench.catalog.forcing import DEFAULT_TRANSPORT
from collbench.errors import UserError
from collbench.kernel.plogp import PlogpPoint
from collbench.models.p2p import LevelModel, LogGP, PingPong, fit_level

METHOD: Final = "PLogP (Kielmann, Bal, Verstoep 2000): collbench_plogp (kernel/plogp.c)"


@dataclass(frozen=True)
class LevelLogGP:
    """One level's fit: the Hockney model carrying its LogGP table, and notes."""

    model: LevelModel
    notes: tuple[str, ...]


def fit_level_loggp(points: Sequence[PlogpPoint], level: str,
                    transport: str = DEFAULT_TRANSPORT, where: str = "plogp",
                    max_segments: int = 3) -> LevelLogGP:
    """The Hockney model of `level` with its LogGP parameters (module docstring)."""
    pts = sorted(points, key=lambda p: p.size_bytes)
    if len(pts) < 3:
        raise UserError(f"{where}: {len(pts)} message size(s) measured; valid: at least 3 "
                        "(e.g. --sizes 0:1M)")
    bad = [p.size_bytes for p in pts if p.g_us <= 0 or p.rtt_us <= 0]
    if bad:
        raise UserError(f"{where}: g(m) or RTT(m) is not positive at size(s) {bad[:5]} (the "
                        "burst estimate g = (T(n) - RTT(0))/n is swamped by noise); valid: a "
                        "quieter machine, or more repetitions (--reps)")
    notes: list[str] = []
    first = pts[0]
    latency = first.rtt_us / 2 - first.g_us
    if latency < 0:
        notes.append(f"{level}: L = RTT({first.size_bytes})/2 - g({first.size_bytes}) = "
                     f"{latency:.3g} us is negative (g measured above half a round trip); "
                     "written as 0")
        latency = 0.0
    unconverged = [p.size_bytes for p in pts if not p.g_converged]
    if unconverged:
        notes.append(f"{level}: g(m) changed by more than 5 % between the two longest bursts "
                     f"at size(s) {unconverged[:6]}{' ...' if len(unconverged) > 6 else ''} "
                     "(a noisy machine, or --burst too short); the last estimate is kept")
    hockney = fit_level([PingPong(p.size_bytes, p.rtt_us / 2, level, transport) for p in pts],
                        max_segments=max_segments, where=f"{where}: RTT(m)/2")
    gap = fit_level([PingPong(p.size_bytes, p.g_us, level, transport) for p in pts],
                    max_segments=max_segments, where=f"{where}: g(m)")
    last = gap.regimes[-1]
    loggp = LogGP(latency, first.os_us, first.or_us, first.g_us,
                  1.0 / last.beta_bytes_per_s * 1e6, last.from_bytes, METHOD)
    return LevelLogGP(replace(hockney, loggp=loggp), tuple(notes))
