"""Messages and bytes per placement level measured by Open MPI's pml/monitoring.

With `[run] monitoring = true` the kernel (`--monitor DIR`, Open MPI launched with
`pml_monitoring_enable=2`) writes, per point index i and world rank r, what r sent during
the point's timed loop (`prof.<i>.coll.<r>.prof`: warm-up and timed calls plus the loop's
barriers) and during as many barriers alone (`prof.<i>.barrier.<r>.prof`), and per rank
its host and socket (`prof.place.<r>`). This module reads them: per level (intra-socket,
inter-socket, inter-node; report.explain's names), the loop's messages and bytes minus the
barriers', divided by the loop's calls (warm-up + iterations), summed over every sender:
what one call of the collective sends. Lines are pml_monitoring's own ("E"/"I" sender peer
"N bytes" "N msgs sent"; user and library-internal tags both count).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

LEVELS: Final = {"core": "intra_socket", "socket": "inter_socket", "node": "inter_node"}
# metrics keys: measured_msgs_<level>, measured_bytes_<level> (per call, all senders)
KEYS: Final = tuple(f"measured_{what}_{name}" for what in ("msgs", "bytes")
                    for name in LEVELS.values())
MAX_COUNT: Final = 2**53  # beyond a double's exact integers: not a count pml_monitoring wrote
MAX_SOCKETS: Final = 4096
_LINE: Final = re.compile(r"([EI])\t(\d{1,20})\t(\d{1,20})\t(\d{1,20}) bytes\t(\d{1,20}) msgs sent"
                          r"(?:\t[\d,]*)?")


class MonitoringError(ValueError):
    """One line: the file, the field, the bad value and what is valid."""


@dataclass(frozen=True)
class Place:
    host: str
    socket: int  # -1: unknown


def _bounded(path: Path, field: str, text: str, high: int) -> int:
    value = int(text)
    if value > high:
        raise MonitoringError(f"{path}: {field} {value} is out of range; valid: 0-{high}")
    return value


def parse_prof(path: Path, data: bytes, rank: int, nprocs: int) -> dict[int, tuple[int, int]]:
    """peer -> (messages, bytes) `rank` sent, from one pml_monitoring file's E and I lines."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError as e:
        raise MonitoringError(f"{path}: byte {e.start} is not ASCII; valid: a pml_monitoring "
                              "output file") from None
    out: dict[int, tuple[int, int]] = {}
    for no, line in enumerate(text.splitlines(), 1):
        if not line.startswith(("E", "I")):
            continue  # comments, one-sided (S/R) and collective (C) lines: not counted here
        m = _LINE.fullmatch(line)
        if m is None:
            raise MonitoringError(f"{path}:{no}: line {line[:60]!r} is not valid; valid: "
                                  "'E|I<tab>sender<tab>peer<tab>N bytes<tab>N msgs sent'")
        sender = _bounded(path, f"line {no} sender", m[2], nprocs - 1)
        if sender != rank:
            raise MonitoringError(f"{path}: line {no} sender {sender} is not valid; valid: "
                                  f"{rank} (the file's rank)")
        peer = _bounded(path, f"line {no} peer", m[3], nprocs - 1)
        nbytes = _bounded(path, f"line {no} bytes", m[4], MAX_COUNT)
        msgs = _bounded(path, f"line {no} msgs", m[5], MAX_COUNT)
        had = out.get(peer, (0, 0))
        out[peer] = (had[0] + msgs, had[1] + nbytes)
    return out


def parse_place(path: Path, data: bytes) -> Place:
    """A rank's `host NAME` and `socket N` lines (the kernel's prof.place.<rank>)."""
    fields: dict[str, str] = {}
    for line in data.decode("ascii", errors="replace").splitlines():
        key, _, value = line.partition(" ")
        fields[key] = value.strip()
    host = fields.get("host", "")
    if not host or len(host) > 255 or not host.isprintable():
        raise MonitoringError(f"{path}: host {host[:60]!r} is not valid; valid: a host name")
    socket = fields.get("socket", "")
    if not re.fullmatch(r"-1|\d{1,4}", socket) or int(socket) >= MAX_SOCKETS:
        raise MonitoringError(f"{path}: socket {socket[:20]!r} is not valid; valid: -1 "
                              f"(unknown) or 0-{MAX_SOCKETS - 1}")
    return Place(host, int(socket))


def level(a: Place, b: Place) -> str:
    """models.topology's level names: core (same socket), socket, node. An unknown socket
    on one host counts as the same socket only when both are unknown."""
    if a.host != b.host:
        return "node"
    return "core" if a.socket == b.socket else "socket"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise MonitoringError(f"{path}: cannot read ({e.strerror}); valid: the kernel's "
                              "pml_monitoring file (run.monitoring)") from None


def _phase(work: Path, index: int, phase: str, places: list[Place]
           ) -> dict[tuple[int, int], tuple[int, int]]:
    n = len(places)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for rank in range(n):
        path = work / f"prof.{index}.{phase}.{rank}.prof"
        for peer, cell in parse_prof(path, _read(path), rank, n).items():
            out[(rank, peer)] = cell
    return out


def point_counts(work: Path, index: int, calls: int, places: list[Place]) -> dict[str, float]:
    """The metrics of point `index`: per level, messages and bytes of one call (see above)."""
    if calls < 1:
        raise MonitoringError(f"{work}: point {index} ran {calls} calls; valid: >= 1")
    loop = _phase(work, index, "coll", places)
    sync = _phase(work, index, "barrier", places)
    msgs = dict.fromkeys(LEVELS, 0)
    nbytes = dict.fromkeys(LEVELS, 0)
    for pair in loop.keys() | sync.keys():
        m = loop.get(pair, (0, 0))[0] - sync.get(pair, (0, 0))[0]
        b = loop.get(pair, (0, 0))[1] - sync.get(pair, (0, 0))[1]
        if m < 0 or b < 0:
            raise MonitoringError(f"{work}/prof.{index}.barrier.{pair[0]}.prof: peer {pair[1]}"
                                  f" has {-m} more messages or {-b} more bytes than the timed "
                                  "loop; valid: at most the loop's (its barriers are in it)")
        lv = level(places[pair[0]], places[pair[1]])
        msgs[lv] += m
        nbytes[lv] += b
    out: dict[str, float] = {}
    for lv, name in LEVELS.items():
        out[f"measured_msgs_{name}"] = round(msgs[lv] / calls, 3)
        out[f"measured_bytes_{name}"] = round(nbytes[lv] / calls, 3)
    return out


def read_places(work: Path, nprocs: int) -> list[Place]:
    return [parse_place(work / f"prof.place.{r}", _read(work / f"prof.place.{r}"))
            for r in range(nprocs)]


def attach(nprocs: int, measured: list[dict[str, Any]], work: Path) -> list[dict[str, Any]]:
    """The kernel's output lines with each ok point's counts under "monitoring"; a point
    whose files are missing or bad is failed with the one-line reason."""
    try:
        places = read_places(work, nprocs)
    except MonitoringError as e:
        return [_failed(got, str(e)) for got in measured]
    out = []
    for index, got in enumerate(measured):
        if got.get("status") != "ok":
            out.append(got)
            continue
        calls = got.get("iterations", 0) + got.get("warmup", 0)
        try:
            counts = point_counts(work, index, int(calls), places)
        except (MonitoringError, TypeError, ValueError) as e:
            out.append(_failed(got, str(e)))
            continue
        out.append({**got, "monitoring": counts})
    return out


def _failed(got: Mapping[str, Any], why: str) -> dict[str, Any]:
    if got.get("status") != "ok":
        return dict(got)
    keep = {k: got[k] for k in ("collective", "size_bytes", "nprocs") if k in got}
    return {**keep, "status": "failed", "error": f"monitoring: {why}"}
