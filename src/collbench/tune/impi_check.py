"""`collbench rules check --impi FILE`: an Intel MPI JSON tuning file read as Intel MPI does.

The lookup (tune/impi.py, by experiment on 2021.18.1): at each level the first key in file
order whose value is at least the call's applies; -1 matches anything; when none is, the
last key does. So a key after a larger one or after -1 is never reached. Preset ids are
checked against the install's `impi_info` ranges (catalog/impi.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from collbench.catalog.algorithms import Catalog
from collbench.inputs import read_bytes
from collbench.tune.impi import ANY, COLL_NAMES
from collbench.tune.rules import Problem

MAX_BYTES: Final = 16 << 20
MAX_VALUE: Final = 1 << 62  # a level's value above this is not believed
MAX_ENTRIES: Final = 100_000
LEVELS: Final = ("ppn", "comm_size", "comm_id", "msg_size")
_KEY: Final = re.compile(r"^(\w{1,40})=(-?\d{1,19})$")
_COLL: Final = re.compile(r"^coll=(\w{1,40})$")
_BY_NAME: Final = {v: k for k, v in COLL_NAMES.items()}


@dataclass(frozen=True)
class Entry:
    collective: str
    ppn: int
    comm_size: int
    msg_size: int
    preset: int
    reached: bool  # False: an earlier key at some level always wins


@dataclass
class Reading:
    entries: list[Entry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.severity in ("rejected", "misread") for p in self.problems)


def read(data: bytes, catalog: Catalog | None = None) -> Reading:
    """Every rule of the file, and what Intel MPI would not read as it seems."""
    out = Reading()
    if len(data) > MAX_BYTES:
        out.problems.append(Problem("rejected", 0, "file", f"{len(data)} bytes; valid: up to "
                                    f"{MAX_BYTES} (a tuning file is a few KiB)"))
        return out
    try:
        tree = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        out.problems.append(Problem("rejected", 0, "json", f"not JSON ({str(e)[:80]})"))
        return out
    if not isinstance(tree, dict):
        out.problems.append(Problem("rejected", 0, "json", "the top level is not an object; "
                                    "valid: {\"coll=Bcast\": {...}}"))
        return out
    for key, sub in tree.items():
        m = _COLL.match(key)
        coll = _BY_NAME.get(m.group(1)) if m else None
        if coll is None:
            out.problems.append(Problem("misread", 0, "coll", f"{key[:60]!r}: not a "
                                        "collective collbench knows; valid: " + ", ".join(
                                            f"coll={n}" for n in COLL_NAMES.values())))
            continue
        _walk(coll, sub, 0, [], True, out, catalog)
        if len(out.entries) > MAX_ENTRIES:
            out.problems.append(Problem("rejected", 0, "file", f"more than {MAX_ENTRIES} "
                                        "rules"))
            break
    return out


def _walk(coll: str, node: Any, depth: int, values: list[int], reached: bool,
          out: Reading, catalog: Catalog | None) -> None:
    where = f"coll={COLL_NAMES[coll]}" + "".join(
        f"/{LEVELS[i]}={v}" for i, v in enumerate(values))
    if not isinstance(node, dict):
        out.problems.append(Problem("misread", 0, where, "not an object"))
        return
    if depth == len(LEVELS):
        _leaf(coll, node, values, reached, out, catalog, where)
        return
    level = LEVELS[depth]
    seen_any = False
    high = -1  # the largest value so far: a later key at most this is never reached
    keys = list(node)
    for key in keys:
        m = _KEY.match(key)
        if m is None or m.group(1) != level:
            out.problems.append(Problem("misread", 0, where, f"{key[:60]!r}: valid: "
                                        f"{level}=N or {level}=-1"))
            continue
        value = int(m.group(2))
        if not ANY <= value <= MAX_VALUE:
            out.problems.append(Problem("misread", 0, where, f"{key}: valid: -1 or 0 to "
                                        f"{MAX_VALUE}"))
            continue
        here = reached and not seen_any and (value == ANY or value > high)
        if reached and not here and level != "comm_id":
            out.problems.append(Problem("misread", 0, where, f"{key}: never reached, an "
                                        "earlier key matches first (keys are tried in file "
                                        "order, the first at least the call's value wins)"))
        seen_any = seen_any or value == ANY
        high = max(high, value)
        _walk(coll, node[key], depth + 1, [*values, value], here, out, catalog)
    if keys and not seen_any and level != "comm_id":
        out.problems.append(Problem("note", 0, where, f"no {level}=-1: above {level}={high} "
                                    "Intel MPI takes the last key (say -1 to make it plain)"))


def _leaf(coll: str, node: dict[str, Any], values: list[int], reached: bool, out: Reading,
          catalog: Catalog | None, where: str) -> None:
    var = coll.upper()
    if len(node) != 1:
        out.problems.append(Problem("misread", 0, where, f"{len(node)} settings; valid: one "
                                    f"{var}=ID"))
    for key in node:
        m = _KEY.match(key)
        if m is None or m.group(1) != var:
            out.problems.append(Problem("misread", 0, where, f"{key[:60]!r}: valid: {var}=ID"))
            continue
        preset = int(m.group(2))
        ids = ({a.id for a in catalog.of(coll) if a.id is not None} if catalog is not None
               else None)
        if preset < 0 or (ids is not None and preset != 0 and preset not in ids):
            top = max(ids) if ids else 0
            out.problems.append(Problem("misread", 0, where, f"{key}: not a {coll} preset of "
                                        f"this Intel MPI; valid: 0 (its own choice) to {top}"))
            continue
        ppn, comm, _, msg = values
        out.entries.append(Entry(coll, ppn, comm, msg, preset, reached))


def check(path: Path, catalog: Catalog | None) -> Reading:
    return read(read_bytes(path, "Intel MPI tuning file", MAX_BYTES), catalog)


def render(path: Path, r: Reading, mpi: str) -> str:
    lines = [f"{path}: {p.severity}: {p.field}: {p.message}" for p in r.problems]
    colls = sorted({e.collective for e in r.entries})
    lines.append(f"{path}: {len(r.entries)} rules for {', '.join(colls) or 'no collective'}; "
                 f"checked for {mpi}")
    lines.append("OK: Intel MPI reads every rule as written" if r.ok else
                 "ACCEPTED, BUT: Intel MPI ignores or misreads the parts listed above")
    return "\n".join(lines)


def rule_for(entries: Sequence[Entry], collective: str, nprocs: int, size: int) -> int | None:
    """The preset the file gives this call (Intel's lookup on one node: ppn = nprocs), None
    where it has no rule for the collective. Entries are in file order."""
    mine = [e for e in entries if e.collective == collective]
    for level, value in (("ppn", nprocs), ("comm_size", nprocs), ("msg_size", size)):
        keys = list(dict.fromkeys(getattr(e, level) for e in mine))
        if not keys:
            return None
        hit = next((k for k in keys if k == -1 or value <= k), keys[-1])
        mine = [e for e in mine if getattr(e, level) == hit]
    return mine[0].preset if mine else None
