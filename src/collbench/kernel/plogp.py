"""The PLogP benchmark (`plogp.c`): built on demand with the MPI under study, its arguments,
and its output read back.

`plogp.c` measures Kielmann, Bal and Verstoep's parameterised LogP (PLogP) between ranks 0
and 1: per message size m the round trip RTT(m), the send and receive overheads o_s(m) and
o_r(m) and the gap g(m) (method and definitions in the C file's header and in
docs/models.md). The binary lives at ``<cache>/plogp/<key>/collbench_plogp``, the key
hashing the MPI wrapper's identity, the source and the flags, like the kernel's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from collbench.buildcache import BuildError, cache_key, cached_build
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary, mpi_fingerprint

PROGRAM_NAME: Final = "collbench_plogp"
SOURCE_NAME: Final = "plogp.c"
MAX_SIZE: Final = 1 << 26  # the largest message plogp.c accepts (max=)
MAX_OUTPUT: Final = 1 << 20  # bytes of its stdout read back
_TIMES: Final = ("rtt_us", "rtt_min_us", "g_us", "os_us", "os_min_us", "or_us", "or_min_us",
                 "delta_us")


class PlogpBuildError(BuildError):
    """plogp.c did not compile; the message holds the command and the compiler's output."""


@dataclass(frozen=True)
class PlogpOptions:
    """plogp.c's key=value arguments (bounds as the C program checks them)."""

    min_size: int = 0
    max_size: int = 1 << 20
    reps: int = 20
    warmup: int = 5
    nmin: int = 4
    nmax: int = 1024
    tol: float = 0.05

    def argv(self) -> list[str]:
        return [f"min={self.min_size}", f"max={self.max_size}", f"reps={self.reps}",
                f"warmup={self.warmup}", f"nmin={self.nmin}", f"nmax={self.nmax}",
                f"tol={self.tol!r}"]


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


def plogp_source() -> Path:
    return Path(str(resources.files("collbench.kernel").joinpath(SOURCE_NAME)))


def build_plogp(mpicc: Path, cache_dir: Path | None = None) -> KernelBinary:
    """Compile plogp.c with `mpicc` (or reuse the cached binary)."""
    src = plogp_source()
    flags = ["-O2", "-std=c11"]
    key = cache_key(mpi_fingerprint(mpicc), src.read_bytes(), "\0".join(flags))
    built = cached_build("plogp", PROGRAM_NAME, key,
                         lambda out: [str(mpicc), *flags, "-o", str(out), str(src), "-lm"],
                         "the PLogP benchmark", cache_dir, error=PlogpBuildError)
    return KernelBinary(built.path, key, built.command, built.fresh)


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
        out.append(_point(data, at))
    if not out:
        raise UserError(f"{where}: no measurement; valid: one JSON line per message size")
    sizes = [p.size_bytes for p in out]
    if sizes != sorted(set(sizes)):
        raise UserError(f"{where}: sizes {sizes[:8]} are not increasing; valid: one line per "
                        "size, smallest first")
    return out


def _point(data: dict[str, Any], at: str) -> PlogpPoint:
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
