"""The PLogP benchmark's output (`plogp.c`) read back.

`plogp.c` measures Kielmann, Bal and Verstoep's parameterised LogP (PLogP) between ranks 0
and 1: per message size m the round trip RTT(m), the send and receive overheads o_s(m) and
o_r(m) and the gap g(m) (method and definitions in the C file's header and in
docs/models.md). It is the built-in workload app "plogp" (spec/workload.py): built with the
MPI under study like the mini-apps, launched by a campaign, each of its JSON lines a row
whose metrics hold the line; `read_point` checks one line (or a row's metrics).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Final

from collbench.errors import UserError

PROGRAM_NAME: Final = "collbench_plogp"  # how it names itself on stderr
_TIMES: Final = ("rtt_us", "rtt_min_us", "g_us", "os_us", "os_min_us", "or_us", "or_min_us",
                 "delta_us")


@dataclass(frozen=True)
class PlogpPoint:
    """plogp.c's measurement at one message size (µs; medians over `reps`, minima too)."""

    size_bytes: int
    rtt_us: float
    rtt_min_us: float
    g_us: float
    g_n: int
    g_converged: bool
    os_us: float
    os_min_us: float
    or_us: float
    or_min_us: float
    delta_us: float
    reps: int


def parse_output(text: str, where: str) -> list[PlogpPoint]:
    """The JSON lines of plogp.c's stdout, checked: every time finite (and >= 0 but g, an
    estimate), sizes increasing; a one-line UserError naming `where` otherwise."""
    out: list[PlogpPoint] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        at = f"{where}: line {number}"
        try:
            data = json.loads(line)
        except ValueError:
            raise UserError(f"{at}: not a JSON object; valid: plogp.c's output lines "
                            f"(got {line[:60]!r})") from None
        if not isinstance(data, dict):
            raise UserError(f"{at}: not a JSON object; valid: plogp.c's output lines")
        out.append(read_point(data, at))
    if not out:
        raise UserError(f"{where}: no measurement; valid: one JSON line per message size")
    sizes = [p.size_bytes for p in out]
    if sizes != sorted(set(sizes)):
        raise UserError(f"{where}: sizes {sizes[:8]} are not increasing; valid: one line per "
                        "size, smallest first")
    return out


def read_point(data: dict[str, Any], at: str) -> PlogpPoint:
    """One line's measurement, checked; a one-line UserError starting with `at`."""
    def whole(key: str, low: int) -> int:
        v = data.get(key)
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise UserError(f"{at}: {key}: {v!r} is not valid; valid: an integer >= {low}")
        return v

    def time(key: str) -> float:
        # g is an estimate (a burst's time less one round trip): noise may make it negative,
        # which the fit reports; a measured time cannot be
        low = -math.inf if key == "g_us" else 0.0
        v = data.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < low:
            raise UserError(f"{at}: {key}: {v!r} is not valid; valid: a finite time"
                            f"{'' if key == 'g_us' else ' >= 0'} (µs)")
        return float(v)

    converged = data.get("g_converged")
    if not isinstance(converged, bool):
        raise UserError(f"{at}: g_converged: {converged!r} is not valid; valid: true or false")
    times = {k: time(k) for k in _TIMES}
    return PlogpPoint(whole("size", 0), times["rtt_us"], times["rtt_min_us"], times["g_us"],
                      whole("g_n", 1), converged, times["os_us"], times["os_min_us"],
                      times["or_us"], times["or_min_us"], times["delta_us"], whole("reps", 1))
