"""What the OSU and IMB parsers share: the parsed types, line splitting, numbers, names."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Final

from collbench.catalog.collectives import BLOCKING, COLLECTIVES
from collbench.errors import UserError

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1


@dataclass(frozen=True)
class ParsedRow:
    """One measured point as the suite printed it (no launch options applied yet)."""

    collective: str
    size_bytes: int
    avg_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    median_us: float | None = None
    iterations: int | None = None
    bandwidth_mbs: float | None = None
    validated: bool | None = None  # None: the suite did not check
    status: str = "ok"
    nprocs: int | None = None  # None: the file does not say (OSU)
    metrics: dict[str, float] = field(default_factory=dict)
    datatype: str | None = None  # OSU `-T`: one file can hold several datatypes
    error: str | None = None  # why status is not "ok"


@dataclass(frozen=True)
class ParsedFile:
    kind: str  # "osu" | "imb"
    version: str | None
    header: dict[str, str]  # header lines as printed (and the recorder's date/rc/wall)
    rows: list[ParsedRow]
    command: str | None  # the recorder's `### cmd:` line
    world_nprocs: int | None = None  # IMB: ranks in the job (#processes + those waiting)


# --- names ----------------------------------------------------------------------------
# Blocking collectives the suites have (COLLECTIVES plus alltoallw, which OSU measures).
BLOCKING_NAMES: Final = (*BLOCKING, "alltoallw")
NONBLOCKING_NAMES: Final = tuple(f"i{n}" for n in BLOCKING_NAMES)
PERSISTENT_NAMES: Final = tuple(f"{n}_persistent" for n in BLOCKING_NAMES)
OSU_P2P_NAMES: Final = ("latency", "bw", "bibw", "multi_lat", "latency_mt", "latency_mp",
                        "mbw_mr")
IMB_EXTRA_NAMES: Final = ("pingping", "pingpong_anysource", "pingping_anysource", "sendrecv",
                          "exchange", "uniband", "biband", "reduce_local",
                          *(f"{n}_pure" for n in NONBLOCKING_NAMES))
# Every name an ingested row can carry: what --collective accepts.
KNOWN_NAMES: Final = tuple(dict.fromkeys((*COLLECTIVES, *BLOCKING_NAMES, *NONBLOCKING_NAMES,
                                          *PERSISTENT_NAMES, *OSU_P2P_NAMES,
                                          *IMB_EXTRA_NAMES)))


# --- lines ----------------------------------------------------------------------------
_BREAK: Final = re.compile(r"\r\n|\r|\n")  # not str.splitlines: it also splits on \f, \x1c…


@dataclass(frozen=True)
class Lines:
    """A file's lines numbered from 1, with the recorder's `### ...` lines taken out."""

    numbered: list[tuple[int, str]]
    command: str | None
    recorded: dict[str, str]  # date, rc, wall from the recorder lines


def split_lines(text: str) -> Lines:
    numbered: list[tuple[int, str]] = []
    command: str | None = None
    recorded: dict[str, str] = {}
    for n, raw in enumerate(_BREAK.split(text.lstrip("\ufeff")), start=1):
        line = raw.replace("\x00", "").rstrip()
        if not line.startswith("###"):
            numbered.append((n, line))
            continue
        # Added by whoever recorded the run, never by the suites themselves.
        body = line[3:].strip()
        if body.startswith("cmd:"):
            command = body[4:].strip()
        elif body.startswith("date:"):
            recorded["recorded_date"] = body[5:].strip()
        else:
            for key, value in re.findall(r"(\w+)=(\S*)", body):
                recorded[f"recorded_{key}"] = value
    return Lines(numbered, command, recorded)


def first_text(lines: Lines) -> str:
    """The first non-blank line, shortened: tells the user what the file holds instead."""
    for _, line in lines.numbered:
        if line.strip():
            return shorten(line.strip(), 60)
    return ""


def shorten(text: str, limit: int = 30) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- numbers --------------------------------------------------------------------------
# Decimal point or comma (locale), optional exponent; no thousands separators.
_NUMBER: Final = re.compile(r"[+-]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][+-]?\d{1,4})?")
_INTEGER: Final = re.compile(r"\+?\d{1,19}")
# What C's printf writes for NaN and infinity: a figure the suite could not compute.
_NOT_FINITE: Final = frozenset({"nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity",
                                "-infinity", "+infinity"})


def parse_float(token: str, where: str, column: str) -> float | None:
    """A decimal number; None for nan/inf (printed when a figure has no value)."""
    if token.lower() in _NOT_FINITE:
        return None
    if not _NUMBER.fullmatch(token):
        raise UserError(f"{where}: {column}: expected a number, got {shorten(token)!r}")
    value = float(token.replace(",", "."))
    return value if math.isfinite(value) else None


def parse_int(token: str, where: str, column: str, limit: int = INT64_MAX) -> int:
    if not _INTEGER.fullmatch(token):
        raise UserError(f"{where}: {column}: expected a whole number, got {shorten(token)!r}")
    value = int(token)
    if value > limit:
        raise UserError(f"{where}: {column}: {value} is out of range (at most {limit})")
    return value


def looks_like_data(line: str) -> bool:
    """A table row starts with a number; MPI warnings and suite messages start with text."""
    return re.match(r"\s*[+-]?[.,]?\d", line) is not None
