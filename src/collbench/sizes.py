"""Message-size expressions: 65536, "4K", OSU-style ranges "1:1M", and lists of them.

Suffixes are binary (K = 1024, M = 1024², G = 1024³; "KB" and "KiB" mean the same).
A range "MIN:MAX" follows OSU's `-m MIN:MAX`: MIN, 2·MIN, 4·MIN, … up to MAX (MAX itself
only when reached). A range starting at 0 yields 0 and then 1, 2, 4, …; plan keeps 0 only
for the operations where an empty message means something (barrier, latency).
"""

from __future__ import annotations

import re
from typing import Final

from collbench.errors import UserError

_UNITS: Final = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE: Final = re.compile(r"(\d+)\s*([KMG]?)(?:I?B)?", re.IGNORECASE)
SIZE_HELP: Final = "a byte count like 65536, '4K', '1M', a range 'MIN:MAX', or a list of them"

SizeExpr = str | int | list[str | int]
# The most bytes per rank collbench measures: counts stay in a C int even for the
# collectives whose buffers are P times the size, and a plan stays in memory.
MAX_SIZE: Final = 1024**3


def parse_size(value: str | int) -> int:
    """One size in bytes; ValueError (with a message for the user) when malformed."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"expected {SIZE_HELP}, got {value!r}")
    if isinstance(value, int):
        return _bounded(value)
    m = _SIZE.fullmatch(value.strip())
    if not m or not m.group(1).isascii() or len(m.group(1)) > 12:
        raise ValueError(f"{value!r} is not a size; valid: {SIZE_HELP}")
    return _bounded(int(m.group(1)) * _UNITS[m.group(2).upper()])


def _bounded(size: int) -> int:
    if size < 0:
        raise ValueError(f"size {size} is negative")
    if size > MAX_SIZE:
        raise ValueError(f"size {size} is above 1G, the most collbench measures per rank")
    return size


def _expand_one(item: str | int) -> list[int]:
    if not (isinstance(item, str) and ":" in item):
        return [parse_size(item)]
    low_text, _, high_text = item.partition(":")
    low, high = parse_size(low_text), parse_size(high_text)
    if low > high:
        raise ValueError(f"range {item!r} runs backwards (MIN > MAX)")
    out = [0] if low == 0 else []
    size = max(low, 1)
    while size <= high:
        out.append(size)
        size *= 2
    return out


def expand_sizes(expr: SizeExpr) -> list[int]:
    """Sorted distinct sizes of an expression; ValueError when malformed or empty."""
    items = expr if isinstance(expr, list) else [expr]
    if not items:
        raise ValueError(f"no sizes given; expected {SIZE_HELP}")
    out: set[int] = set()
    for item in items:
        out.update(_expand_one(item))
    return sorted(out)


def parse_sizes(expr: SizeExpr, where: str) -> list[int]:
    """Like expand_sizes, but a one-line UserError prefixed with `where`."""
    try:
        return expand_sizes(expr)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None


def format_size(n: int) -> str:
    """Shortest exact spelling: 3 -> "3", 4096 -> "4K", 1536 -> "1536", 2**20 -> "1M"."""
    if n < 0:
        raise ValueError(f"size {n} is negative")
    for suffix in ("G", "M", "K"):
        unit = _UNITS[suffix]
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)
