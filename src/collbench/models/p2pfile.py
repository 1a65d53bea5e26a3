'''The `.p2p.toml` file: point-to-point parameters per placement level.

Written by collbench from a fit (`write_p2p`), or by hand from published numbers (a table of
latency and bandwidth per level). Every quantity carries its unit, in a string
"<number> <unit>"; sizes may also be plain integers (bytes). Example::

    # Point-to-point model of one machine, per placement level.
    format = "collbench-p2p"
    version = 1

    [source]                      # optional provenance, free-form strings
    origin = "hand"               # "hand" or "fit"
    description = "vendor table, Open MPI 5.0.x, ob1 + sm/ucx"
    transport = "default"
    date = "2026-01-15"

    [levels.core]                 # two ranks on one socket: one regime
    latency = "0.28 us"
    bandwidth = "12 GB/s"

    [levels.socket]
    latency = "0.45 us"
    bandwidth = "9.5 GB/s"

    [[levels.node.regimes]]       # across nodes: one table per protocol regime
    from = 0                      # the first regime starts at 0 bytes
    latency = "1.6 us"
    bandwidth = "6 GB/s"
    latency_ci = ["1.5 us", "1.7 us"]          # optional 95% intervals
    bandwidth_ci = ["5.5 GB/s", "6.4 GB/s"]

    [[levels.node.regimes]]
    from = "64 KiB"               # rendezvous from 64 KiB on
    latency = "4 us"
    bandwidth = "11.5 GB/s"

    [levels.node.fit]             # optional: how well a fit reproduced its points
    points = 63
    median_abs_pct_error = 2.1
    p95_abs_pct_error = 7.9

    [levels.node.loggp]           # optional: LogGP/PLogP parameters (collbench model loggp)
    L = "1.1 us"                  # latency
    o_s = "0.35 us"               # send overhead (small message)
    o_r = "0.4 us"                # receive overhead (small message)
    g = "0.5 us"                  # gap between small messages
    G = "0.087 ns/B"              # gap per byte of large messages (1/bandwidth)
    G_from = "64 KiB"             # optional: G is g(m)'s slope from this size on
    method = "netgauge -x loggp"  # optional: how they were measured

    [reduce]                      # optional: local reduction speed (γ = 1/bandwidth)
    bandwidth = "4 GB/s"

Units: latency ns, us (or µs), ms, s; bandwidth B/s, kB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s,
GiB/s, Gbit/s (10⁹ bits/s); sizes B, kB, MB, GB, KiB, MiB, GiB; gap per byte (G) ps/B, ns/B,
us/B (or µs/B), ms/B, s/B. A level table holds either `latency` + `bandwidth` (one regime) or
`regimes`, not both; regimes are listed in increasing `from` order, the first from 0.
A level's optional `loggp` table holds all of L, o_s, o_r, g (times) and G (time per
byte), and optionally `G_from` (a size) and `method` (text); it is written beside the
Hockney parameters, never instead of them (the costing of `model predict` uses latency and
bandwidth). Every level in `required_levels` (core, socket, node by default) must be
present.

Every number is bounded (the ranges below, docs/models.md "Bounds"): latencies, overheads
and gaps 0 to 1 s (0: a fit through the origin has none), a latency interval -1 s to 1 s,
bandwidths 1 kB/s to 10 TB/s, G 0 to 1 ms/B (1 kB/s), sizes 0 to 2^40 bytes, fit points 0
to 2^40, fit errors 0 to 1e6 %, bic -1e12 to 1e12. Unknown keys, missing units, values out
of range or not finite, files over 1 MiB and nesting deeper than 6 are refused with one
line `<file>: <field>: <bad value> ...; valid: ...`.
'''

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from collbench.errors import UserError
from collbench.inputs import read_bytes
from collbench.models.p2p import LEVELS, FitError, LevelModel, LogGP, P2PModel, Regime
from collbench.storefiles import atomic_write

FORMAT: Final = "collbench-p2p"
VERSION: Final = 1
MAX_BYTES: Final = 1 << 20
MAX_DEPTH: Final = 6

TIME_UNITS: Final = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "μs": 1.0, "ms": 1e3, "s": 1e6}
BW_UNITS: Final = {"B/s": 1.0, "kB/s": 1e3, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9,
                   "TB/s": 1e12, "KiB/s": 1024.0, "MiB/s": 1024.0 ** 2, "GiB/s": 1024.0 ** 3,
                   "Gbit/s": 1e9 / 8, "Gb/s": 1e9 / 8}
SIZE_UNITS: Final = {"B": 1, "kB": 1000, "KB": 1000, "MB": 10 ** 6, "GB": 10 ** 9,
                     "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
GAP_UNITS: Final = {"ps/B": 1e-6, "ns/B": 1e-3, "us/B": 1.0, "µs/B": 1.0, "μs/B": 1.0,
                    "ms/B": 1e3, "s/B": 1e6}
TOP_KEYS: Final = ("format", "version", "source", "levels", "reduce")
LEVEL_KEYS: Final = ("latency", "bandwidth", "latency_ci", "bandwidth_ci", "regimes", "fit",
                     "transport", "loggp")
LOGGP_KEYS: Final = ("L", "o_s", "o_r", "g", "G", "G_from", "method")
LOGGP_NAMES: Final = {"L": "latency", "o_s": "send overhead", "o_r": "receive overhead",
                      "g": "gap", "G": "gap per byte"}
REGIME_KEYS: Final = ("from", "latency", "bandwidth", "latency_ci", "bandwidth_ci")
FIT_KEYS: Final = ("points", "median_abs_pct_error", "p95_abs_pct_error", "bic")


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a number, in the reader's units (µs, B/s, µs/B, bytes), and
    the same in words for the one-line error."""

    low: float
    high: float
    words: str

    def holds(self, value: float) -> bool:
        return math.isfinite(value) and self.low <= value <= self.high


# Physically meaningful ranges: a time beyond a second per message or a bandwidth outside
# 1 kB/s..10 TB/s is a typo or a unit slip, and would make predictions absurd or inf.
LATENCY: Final = Range(0.0, 1e6, "from 0 to 1 s")  # also o_s, o_r, g
LATENCY_CI: Final = Range(-1e6, 1e6, "from -1 s to 1 s")  # a fitted interval may reach < 0
BANDWIDTH: Final = Range(1e3, 1e13, "from 1 kB/s to 10 TB/s")
GAP_PER_BYTE: Final = Range(0.0, 1e3, "from 0 to 1 ms/B")  # 1 ms/B = 1 kB/s
SIZE: Final = Range(0, 1 << 40, "from 0 to 2^40 bytes (1 TiB)")
POINTS: Final = Range(0, 1 << 40, "an integer from 0 to 2^40")
PERCENT: Final = Range(0.0, 1e6, "a number from 0 to 1e6")
BIC: Final = Range(-1e12, 1e12, "a number from -1e12 to 1e12")
_QUANTITY = re.compile(r"^\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|[-+]?inf|nan)\s*(\S+)\s*$")


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, field: str, value: object, valid: str) -> UserError:
        if not field.isprintable():
            field = repr(field)
        shown = repr(value)
        if len(shown) > 60:
            shown = shown[:57] + "..."
        return UserError(f"{self.where}: {field}: {shown} is not valid; valid: {valid}")

    def table(self, value: object, field: str, keys: Iterable[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field, value, "a table")
        allowed = list(keys)
        for k in value:
            if k not in allowed:
                raise self.fail(f"{field}.{k}" if field else k, "unknown key",
                                ", ".join(allowed))
        return value

    def quantity(self, value: object, field: str, units: Mapping[str, float],
                 what: str, bounds: Range) -> float:
        valid = f"a {what} {bounds.words} with a unit, e.g. \"{_example(units)}\" (units: " \
                f"{', '.join(units)})"
        if not isinstance(value, str):
            raise self.fail(field, value, valid)
        m = _QUANTITY.match(value)
        if not m or m.group(2) not in units:
            raise self.fail(field, value, valid)
        try:
            number = float(m.group(1))
        except ValueError:
            raise self.fail(field, value, valid) from None
        result = number * units[m.group(2)]
        if not bounds.holds(result):
            raise self.fail(field, value, valid)
        return result

    def size(self, value: object, field: str) -> int:
        valid = f"a size {SIZE.words}: an integer or \"<n> <unit>\" (units: " \
                f"{', '.join(SIZE_UNITS)})"
        if isinstance(value, bool):
            raise self.fail(field, value, valid)
        if isinstance(value, int):
            if not SIZE.low <= value <= SIZE.high:
                raise self.fail(field, value, valid)
            return value
        if not isinstance(value, str):
            raise self.fail(field, value, valid)
        m = _QUANTITY.match(value)
        if not m or m.group(2) not in SIZE_UNITS:
            raise self.fail(field, value, valid)
        try:
            number = float(m.group(1)) * SIZE_UNITS[m.group(2)]
        except ValueError:
            raise self.fail(field, value, valid) from None
        if not SIZE.holds(number) or number != int(number):
            raise self.fail(field, value, valid)
        return int(number)

    def interval(self, value: object, field: str, units: Mapping[str, float],
                 what: str, bounds: Range) -> tuple[float, float]:
        if not isinstance(value, list) or len(value) != 2:
            raise self.fail(field, value, f"two {what}s with units [low, high]")
        lo = self.quantity(value[0], f"{field}[0]", units, what, bounds)
        hi = self.quantity(value[1], f"{field}[1]", units, what, bounds)
        if lo > hi:
            raise self.fail(field, value, "[low, high] with low <= high")
        return lo, hi

    def number(self, value: object, field: str, bounds: Range, *,
               integer: bool = False) -> float:
        # compared before any float(): a TOML integer may be too large for one
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or (integer and not isinstance(value, int)) \
                or not bounds.low <= value <= bounds.high:  # NaN compares False
            raise self.fail(field, value, bounds.words)
        return float(value)

    def text(self, value: object, field: str) -> str:
        if not isinstance(value, str) or len(value) > 1000:
            raise self.fail(field, value, "a string (at most 1000 characters)")
        return value


def _example(units: Mapping[str, float]) -> str:
    return "0.5 us" if "us" in units else "10 GB/s" if "GB/s" in units \
        else "0.1 ns/B" if "ns/B" in units else "8 KiB"


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _regime(rd: _Reader, raw: Mapping[str, Any], field: str, with_from: bool) -> Regime:
    for key in ("latency", "bandwidth"):
        if key not in raw:
            raise rd.fail(f"{field}.{key}", "missing",
                          "latency and bandwidth with units, e.g. latency = \"0.5 us\", "
                          "bandwidth = \"10 GB/s\"")
    if with_from and "from" not in raw:
        raise rd.fail(f"{field}.from", "missing", "the regime's smallest size in bytes")
    alpha = rd.quantity(raw["latency"], f"{field}.latency", TIME_UNITS, "latency", LATENCY)
    beta = rd.quantity(raw["bandwidth"], f"{field}.bandwidth", BW_UNITS, "bandwidth",
                       BANDWIDTH)
    alpha_ci = rd.interval(raw["latency_ci"], f"{field}.latency_ci", TIME_UNITS, "latency",
                           LATENCY_CI) if "latency_ci" in raw else None
    beta_ci = rd.interval(raw["bandwidth_ci"], f"{field}.bandwidth_ci", BW_UNITS,
                          "bandwidth", BANDWIDTH) if "bandwidth_ci" in raw else None
    start = rd.size(raw["from"], f"{field}.from") if with_from else 0
    return Regime(start, alpha, beta, alpha_ci, beta_ci)


def _level(rd: _Reader, name: str, raw: object) -> LevelModel:
    field = f"levels.{name}"
    table = rd.table(raw, field, LEVEL_KEYS)
    transport = rd.text(table["transport"], f"{field}.transport") \
        if "transport" in table else "default"
    if "regimes" in table:
        single = [k for k in ("latency", "bandwidth", "latency_ci", "bandwidth_ci")
                  if k in table]
        if single:
            raise rd.fail(f"{field}.{single[0]}", "beside regimes",
                          "either latency + bandwidth or a list of regimes")
        items = table["regimes"]
        if not isinstance(items, list) or not items or len(items) > 16:
            raise rd.fail(f"{field}.regimes", items, "a list of 1-16 regime tables")
        regimes = [_regime(rd, rd.table(item, f"{field}.regimes[{i}]", REGIME_KEYS),
                           f"{field}.regimes[{i}]", True) for i, item in enumerate(items)]
        if regimes[0].from_bytes != 0:
            raise rd.fail(f"{field}.regimes[0].from", regimes[0].from_bytes, "0")
        for i in range(1, len(regimes)):
            if regimes[i].from_bytes <= regimes[i - 1].from_bytes:
                raise rd.fail(f"{field}.regimes[{i}].from", regimes[i].from_bytes,
                              f"sizes increasing, above {regimes[i - 1].from_bytes}")
    else:
        regimes = [_regime(rd, {k: v for k, v in table.items() if k in REGIME_KEYS},
                           field, False)]
    error, bic = None, None
    if "fit" in table:
        fit = rd.table(table["fit"], f"{field}.fit", FIT_KEYS)
        missing = [k for k in FIT_KEYS[:3] if k not in fit]
        if 0 < len(missing) < 3:
            raise rd.fail(f"{field}.fit.{missing[0]}", "missing",
                          "points, median_abs_pct_error and p95_abs_pct_error together")
        if not missing:
            error = FitError(
                int(rd.number(fit["points"], f"{field}.fit.points", POINTS, integer=True)),
                rd.number(fit["median_abs_pct_error"], f"{field}.fit.median_abs_pct_error",
                          PERCENT),
                rd.number(fit["p95_abs_pct_error"], f"{field}.fit.p95_abs_pct_error",
                          PERCENT))
        if "bic" in fit:
            bic = rd.number(fit["bic"], f"{field}.fit.bic", BIC)
    loggp = _loggp(rd, table["loggp"], f"{field}.loggp") if "loggp" in table else None
    return LevelModel(name, tuple(regimes), transport, error, bic, loggp)


def _loggp(rd: _Reader, raw: object, field: str) -> LogGP:
    table = rd.table(raw, field, LOGGP_KEYS)
    for key in LOGGP_KEYS[:5]:
        if key not in table:
            raise rd.fail(f"{field}.{key}", "missing",
                          "L, o_s, o_r, g and G together, with units, e.g. L = \"1 us\", "
                          "G = \"0.1 ns/B\"")
    L, o_s, o_r, g = (rd.quantity(table[k], f"{field}.{k}", TIME_UNITS, LOGGP_NAMES[k],
                                  LATENCY) for k in ("L", "o_s", "o_r", "g"))
    per_byte = rd.quantity(table["G"], f"{field}.G", GAP_UNITS, LOGGP_NAMES["G"],
                           GAP_PER_BYTE)
    start = rd.size(table["G_from"], f"{field}.G_from") if "G_from" in table else None
    method = rd.text(table["method"], f"{field}.method") if "method" in table else None
    return LogGP(L, o_s, o_r, g, per_byte, start, method)


def parse_p2p(data: bytes, where: str = "<p2p>",
              required_levels: Iterable[str] = LEVELS) -> P2PModel:
    """The model in `data` (a .p2p.toml file's bytes), or UserError naming the bad field."""
    rd = _Reader(where)
    if len(data) > MAX_BYTES:
        raise UserError(f"{where}: file size: {len(data)} bytes is not valid; valid: at most "
                        f"{MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: encoding: byte {exc.start} is not UTF-8; valid: a UTF-8 "
                        "TOML file") from None
    # Bracket nesting is checked before parsing so that deep arrays cannot exhaust the stack.
    depth = peak = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            peak = max(peak, depth)
        elif ch in "]}":
            depth = max(depth - 1, 0)
    if peak > 64:
        raise UserError(f"{where}: nesting: {peak} levels of brackets is not valid; valid: at "
                        f"most {MAX_DEPTH}")
    try:
        raw = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError, ValueError, OverflowError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserError(f"{where}: TOML: {msg}; valid: a TOML file as documented in "
                        "collbench.models.p2pfile") from None
    if _depth(raw) > MAX_DEPTH:
        raise UserError(f"{where}: nesting: {_depth(raw)} levels is not valid; valid: at "
                        f"most {MAX_DEPTH}")
    top = rd.table(raw, "", TOP_KEYS)
    if top.get("format") != FORMAT:
        raise rd.fail("format", top.get("format", "missing"), f'"{FORMAT}"')
    if top.get("version") != VERSION or isinstance(top.get("version"), bool):
        raise rd.fail("version", top.get("version", "missing"), str(VERSION))
    source: dict[str, str] = {}
    if "source" in top:
        src = top["source"]
        if not isinstance(src, dict) or len(src) > 64:
            raise rd.fail("source", src, "a table of at most 64 strings")
        for k, v in src.items():
            source[k] = rd.text(v, f"source.{k}")
    levels_raw = top.get("levels")
    if not isinstance(levels_raw, dict):
        raise rd.fail("levels", levels_raw if levels_raw is not None else "missing",
                      f"a table with levels {', '.join(LEVELS)}")
    rd.table(levels_raw, "levels", LEVELS)
    required = list(required_levels)
    for name in required:
        if name not in levels_raw:
            raise rd.fail(f"levels.{name}", "missing",
                          f"a [levels.{name}] table (required: {', '.join(required)})")
    levels = {name: _level(rd, name, levels_raw[name]) for name in LEVELS if name in levels_raw}
    gamma = 0.0
    if "reduce" in top:
        red = rd.table(top["reduce"], "reduce", ("bandwidth",))
        if "bandwidth" not in red:
            raise rd.fail("reduce.bandwidth", "missing", "a bandwidth with a unit")
        gamma = 1e6 / rd.quantity(red["bandwidth"], "reduce.bandwidth", BW_UNITS, "bandwidth",
                                  BANDWIDTH)
    return P2PModel(levels, gamma, source)


def read_p2p(path: str | Path, required_levels: Iterable[str] = LEVELS) -> P2PModel:
    """Read a .p2p.toml file (see the module docstring for the format)."""
    p = Path(path)
    return parse_p2p(read_bytes(p, "p2p model", MAX_BYTES), str(p), required_levels)


def _s(value: str) -> str:
    """A TOML basic string holding `value` (control characters escaped, so that it reads
    back as written)."""
    out = value.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7f else c
                         for c in out) + '"'


def _t(us: float) -> str:
    return _s(f"{us!r} us")


def _b(bps: float) -> str:
    return _s(f"{bps!r} B/s")


def _regime_lines(r: Regime, with_from: bool) -> list[str]:
    out = [f"from = {r.from_bytes}"] if with_from else []
    out += [f"latency = {_t(r.alpha_us)}", f"bandwidth = {_b(r.beta_bytes_per_s)}"]
    if r.alpha_ci is not None:
        out.append(f"latency_ci = [{_t(r.alpha_ci[0])}, {_t(r.alpha_ci[1])}]")
    if r.beta_ci is not None:
        out.append(f"bandwidth_ci = [{_b(r.beta_ci[0])}, {_b(r.beta_ci[1])}]")
    return out


def format_p2p(model: P2PModel) -> str:
    """The .p2p.toml text of `model`; parse_p2p(format_p2p(m)) == m.

    Values are written in µs and B/s with full precision so that they round-trip; an
    interval bound that is not finite (an unbounded bandwidth CI) is left out with its
    interval."""
    lines = ["# collbench point-to-point model: t(m) = latency + m / bandwidth per regime",
             f'format = "{FORMAT}"', f"version = {VERSION}", ""]
    if model.source:
        lines.append("[source]")
        lines += [f"{_s(k)} = {_s(v)}" for k, v in model.source.items()]
        lines.append("")
    if model.gamma_us_per_byte > 0:
        lines += ["[reduce]", f"bandwidth = {_b(_reduce_bandwidth(model.gamma_us_per_byte))}",
                  ""]
    for name in LEVELS:
        if name not in model.levels:
            continue
        lm = model.levels[name]
        regimes = [_finite_cis(r) for r in lm.regimes]
        if len(regimes) == 1 and regimes[0].from_bytes == 0:
            lines.append(f"[levels.{name}]")
            if lm.transport != "default":
                lines.append(f"transport = {_s(lm.transport)}")
            lines += _regime_lines(regimes[0], False)
            lines.append("")
        else:
            if lm.transport != "default":
                lines += [f"[levels.{name}]", f"transport = {_s(lm.transport)}", ""]
            for r in regimes:
                lines.append(f"[[levels.{name}.regimes]]")
                lines += _regime_lines(r, True)
                lines.append("")
        if lm.error is not None or lm.bic is not None:
            lines.append(f"[levels.{name}.fit]")
            if lm.error is not None:
                lines += [f"points = {lm.error.points}",
                          f"median_abs_pct_error = {lm.error.median_abs_pct!r}",
                          f"p95_abs_pct_error = {lm.error.p95_abs_pct!r}"]
            if lm.bic is not None:
                lines.append(f"bic = {lm.bic!r}")
            lines.append("")
        if lm.loggp is not None:
            lines += [f"[levels.{name}.loggp]", *_loggp_lines(lm.loggp), ""]
    return "\n".join(lines)


def _loggp_lines(p: LogGP) -> list[str]:
    out = [f"L = {_t(p.L_us)}", f"o_s = {_t(p.o_s_us)}", f"o_r = {_t(p.o_r_us)}",
           f"g = {_t(p.g_us)}", f"G = {_s(f'{p.G_us_per_byte!r} us/B')}"]
    if p.G_from_bytes is not None:
        out.append(f"G_from = {p.G_from_bytes}")
    if p.method is not None:
        out.append(f"method = {_s(p.method)}")
    return out


def _reduce_bandwidth(gamma: float) -> float:
    """1e6/γ, nudged by an ulp if needed so that the reader's 1e6/bandwidth gives γ back."""
    bw = 1e6 / gamma
    for cand in (bw, math.nextafter(bw, math.inf), math.nextafter(bw, 0.0)):
        if 1e6 / cand == gamma:
            return cand
    return bw


def _finite_cis(r: Regime) -> Regime:
    """`r` without an interval the reader would refuse (an unbounded or out-of-range bound
    of a fit's interval: informative only, so it is left out rather than the file)."""
    def ok(ci: tuple[float, float] | None, bounds: Range) -> tuple[float, float] | None:
        if ci is None or not all(bounds.holds(v) for v in ci):
            return None
        return ci
    return Regime(r.from_bytes, r.alpha_us, r.beta_bytes_per_s, ok(r.alpha_ci, LATENCY_CI),
                  ok(r.beta_ci, BANDWIDTH))


def write_p2p(model: P2PModel, path: str | Path) -> None:
    """Write `model` as a .p2p.toml file (complete or not at all). What is written is read
    back first: a fit out of the readers' bounds is one line naming the field, and no file
    collbench writes is one it refuses."""
    text = format_p2p(model)
    parse_p2p(text.encode("utf-8"), str(path), required_levels=())
    atomic_write(Path(path), text.encode("utf-8"), mode=0o644)
