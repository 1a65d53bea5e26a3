"""Intel MPI Benchmarks (IMB-MPI1, IMB-NBC) text output as parsed rows.

A file holds a preamble (`# key : value` lines), then per benchmark and process count a
block: `# Benchmarking Bcast`, `# #processes = 4`, optionally `# ( 2 additional processes
waiting in MPI_Barrier)`, a column header (`#bytes #repetitions t_min[usec] ...`) and one
line per message size. Column names and meanings follow IMB_output.c.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from collbench.errors import UserError
from collbench.ingest.common import (
    INT32_MAX,
    INT64_MAX,
    Lines,
    ParsedFile,
    ParsedRow,
    first_text,
    looks_like_data,
    parse_float,
    parse_int,
    shorten,
    split_lines,
)

# IMB benchmark names -> collbench names (IMB-MPI1 and IMB-NBC).
_MPI1: Final = {
    "PingPong": "latency", "PingPongSpecificSource": "latency",
    "PingPongAnySource": "pingpong_anysource", "PingPing": "pingping",
    "PingPingSpecificSource": "pingping", "PingPingAnySource": "pingping_anysource",
    "Sendrecv": "sendrecv", "Exchange": "exchange", "Uniband": "uniband", "Biband": "biband",
    "Reduce_local": "reduce_local",
}
_COLLECTIVES: Final = ("Allreduce", "Reduce", "Reduce_scatter", "Reduce_scatter_block",
                       "Allgather", "Allgatherv", "Gather", "Gatherv", "Scatter", "Scatterv",
                       "Alltoall", "Alltoallv", "Bcast", "Barrier")
_NBC: Final = ("Ibcast", "Iallgather", "Iallgatherv", "Igather", "Igatherv", "Iscatter",
               "Iscatterv", "Ialltoall", "Ialltoallv", "Ireduce", "Ireduce_scatter",
               "Iallreduce", "Ibarrier")
BENCHMARKS: Final[dict[str, str]] = {
    **_MPI1,
    **{n: n.lower() for n in _COLLECTIVES},
    **{n: n.lower() for n in _NBC},
    # *_pure: the same call timed alone (t_min/t_max/t_avg), kept apart from the overlap run
    **{f"{n}_pure": f"{n.lower()}_pure" for n in _NBC},
}
_BY_LOWER: Final = {k.lower(): v for k, v in BENCHMARKS.items()}
# Since IMB 2019, #bytes of these is what each rank receives (vector = #bytes × np); OSU's
# Size is the whole vector, so rows are converted. IMB 2018 and older split #bytes.
PER_RANK_SINCE_2019: Final = ("reduce_scatter", "reduce_scatter_block", "ireduce_scatter",
                              "ireduce_scatter_pure")

_BANNER: Final = re.compile(r"Intel\s*\(R\)\s*MPI\s+Benchmarks?(?:\s+Suite)?\s+V?"
                            r"(?P<version>\d[\w.]*)\s*,\s*(?P<part>\S.*?)\s+part", re.IGNORECASE)
_BENCH: Final = re.compile(r"#\s*Benchmarking\s+(?P<multi>Multi-)?(?P<name>\S+)\s*")
_PROCS: Final = re.compile(r"#\s*#processes\s*=\s*(?P<n>\d{1,9})\b.*")
_WAITING: Final = re.compile(r"#\s*\(\s*(?P<n>\d{1,9})\s+additional\s+process(?:es)?\b.*")
_GROUPS: Final = re.compile(r"#\s*\(\s*(?P<g>\d{1,9})\s+groups\s+of\s+(?P<n>\d{1,9})\s+"
                            r"processes\b.*")
_KEYVAL: Final = re.compile(r"#\s*(?P<key>[A-Za-z][\w ()/.-]*?)\s*:\s*(?P<value>.*)")
_FAILURES: Final = ("out-of-mem", "int-overflow", "time-out")
_MFLOPS: Final = re.compile(r"#\s*performance of\s+(?P<v>\S+)\s+MFlops\s*", re.IGNORECASE)

# Column label (lower case) -> (key, kind). Keys: ParsedRow fields or metric names.
_COLUMNS: Final[dict[str, tuple[str, str]]] = {
    "group": ("group", "int"), "#bytes": ("size", "int"),
    "#repetitions": ("iterations", "int"), "t[usec]": ("t_us", "float"),
    "t_min[usec]": ("min_us", "float"), "t_max[usec]": ("max_us", "float"),
    "t_avg[usec]": ("avg_us", "float"), "mbytes/sec": ("bandwidth_mbs", "float"),
    "msg/sec": ("messages_per_s", "float"), "t_ovrl[usec]": ("overall_us", "float"),
    "t_pure[usec]": ("pure_us", "float"), "t_cpu[usec]": ("compute_us", "float"),
    "overlap[%]": ("overlap_pct", "float"), "defects": ("defects", "float"),
}
_FIRST_COLUMNS: Final = ("group", "#bytes", "#repetitions")


@dataclass
class _Block:
    """One `# Benchmarking` block: the benchmark, its process count, its columns."""

    name: str
    collective: str
    nprocs: int | None = None
    labels: list[str] | None = None


@dataclass
class _State:
    header: dict[str, str] = field(default_factory=dict)
    version: str | None = None
    world: int | None = None
    block: _Block | None = None
    waiting: int = 0
    rows: list[ParsedRow] = field(default_factory=list)
    calling_next: bool = False
    timeouts: list[str] = field(default_factory=list)


def is_banner(line: str) -> bool:
    return _BANNER.search(line) is not None or _BENCH.fullmatch(line.strip()) is not None


def parse_imb(text: str, name: str) -> ParsedFile:
    lines = split_lines(text)
    st = _State(header=dict(lines.recorded))
    seen = False
    for n, line in lines.numbered:
        where = f"{name}:{n}"
        stripped = line.strip()
        if m := _BANNER.search(stripped):
            seen = True
            st.version = m.group("version")
            st.header["imb_version"] = st.version
            st.header["suite"] = "IMB-" + re.sub(r"[^A-Za-z0-9]", "", m.group("part"))
        elif m := _BENCH.fullmatch(stripped):
            seen = True
            _start_block(st, m, where)
        elif st.block is not None and _is_column_header(stripped):
            st.block.labels = stripped.split()
        elif stripped.startswith("#"):
            _comment(st, stripped, where)
        elif stripped.lower().startswith(_FAILURES):
            # A timed-out sample has no size: IMB stops the benchmark there.
            if st.block is not None:
                st.timeouts.append(f"{st.block.name} np={st.block.nprocs}")
        elif st.block is not None and looks_like_data(stripped):
            st.rows.append(_row(st.block, stripped.split(), where, st.version))
    if st.timeouts:
        st.header["timed_out"] = ", ".join(st.timeouts)
    if not st.rows:
        raise UserError(_no_rows(name, lines, seen))
    return ParsedFile("imb", st.version, st.header, st.rows, lines.command, st.world)


def _start_block(st: _State, m: re.Match[str], where: str) -> None:
    bench = m.group("name")
    collective = _BY_LOWER.get(bench.lower())
    if collective is None:
        raise UserError(f"{where}: IMB benchmark {shorten(bench)!r} is not supported; valid: "
                        f"{', '.join(BENCHMARKS)}")
    st.block = _Block(bench, collective)
    st.waiting = 0
    if m.group("multi"):
        st.header["multi"] = "yes"


def _comment(st: _State, line: str, where: str) -> None:
    if st.block is None:
        _preamble(st, line)
        return
    if m := _PROCS.fullmatch(line):
        st.block.nprocs = int(m.group("n"))
    elif m := _GROUPS.fullmatch(line):
        st.block.nprocs = int(m.group("n"))  # per group; each group's row is tagged
        st.header["multi_groups"] = m.group("g")
        _world(st, int(m.group("g")) * int(m.group("n")))
        return
    elif m := _WAITING.fullmatch(line):
        st.waiting = int(m.group("n"))
    else:
        return
    _world(st, (st.block.nprocs or 0) + st.waiting)


def _world(st: _State, ranks: int) -> None:
    st.world = max(st.world or 0, ranks)


def _preamble(st: _State, line: str) -> None:
    body = line.lstrip("#").strip()
    if st.calling_next and body:
        st.header["Calling sequence"] = body
        st.calling_next = False
    elif body.lower().startswith("calling sequence"):
        st.calling_next = True
    elif m := _MFLOPS.fullmatch(line):  # IMB-NBC: speed of the dummy compute
        st.header["CPU_Exploit MFlops"] = m.group("v")
    elif m := _KEYVAL.fullmatch(line):
        st.header[m.group("key").strip()] = m.group("value").strip()


def _is_column_header(line: str) -> bool:
    labels = line.lower().split()
    return bool(labels) and labels[0] in _FIRST_COLUMNS and all(x in _COLUMNS for x in labels)


def _row(block: _Block, tokens: list[str], where: str, version: str | None) -> ParsedRow:
    if block.labels is None:
        raise UserError(f"{where}: data line before the column header "
                        "('#bytes #repetitions t_min[usec] ...')")
    labels = block.labels
    fail = next((i for i, t in enumerate(tokens) if t.lower().startswith(_FAILURES)), None)
    if fail is not None:  # "<size> out-of-mem.; needed X=..." instead of figures
        return _failed(block, tokens, fail, labels, where, version)
    if len(tokens) != len(labels):
        raise UserError(f"{where}: expected {len(labels)} columns ({' '.join(labels)}), "
                        f"got {len(tokens)}")
    ints: dict[str, int] = {}
    floats: dict[str, float] = {}
    for tok, label in zip(tokens, labels, strict=True):
        key, kind = _COLUMNS[label.lower()]
        if kind == "int":
            limit = INT32_MAX if key in ("iterations", "group") else INT64_MAX
            ints[key] = parse_int(tok, where, label, limit)
        elif (value := parse_float(tok, where, label)) is not None:
            floats[key] = value
    metrics = {k: v for k, v in floats.items()
               if k in ("messages_per_s", "overall_us", "pure_us", "compute_us", "overlap_pct",
                        "defects")}
    if "group" in ints:
        metrics["group"] = float(ints["group"])
    size = _size(block, ints.get("size", 0), metrics, version, where)
    # Overlap runs (IMB-NBC) print t_pure, the call timed without compute, from the rank
    # with the largest t_ovrl; PingPong-like ones print one time, t[usec].
    avg = floats.get("avg_us", floats.get("t_us", floats.get("pure_us")))
    defects = floats.get("defects")  # -DCHECK builds only
    validated = None if defects is None else defects == 0
    return ParsedRow(
        block.collective, size, avg_us=avg, min_us=floats.get("min_us"),
        max_us=floats.get("max_us"), iterations=ints.get("iterations"),
        bandwidth_mbs=floats.get("bandwidth_mbs"), validated=validated,
        status="invalid" if validated is False else "ok", nprocs=block.nprocs,
        metrics=metrics, error="IMB data check (-DCHECK) found defects" if defects else None)


def _failed(block: _Block, tokens: list[str], fail: int, labels: list[str], where: str,
            version: str | None) -> ParsedRow:
    ints = {}
    for tok, label in zip(tokens[:fail], labels, strict=False):
        key, kind = _COLUMNS[label.lower()]
        if kind == "int":
            ints[key] = parse_int(tok, where, label)
    metrics: dict[str, float] = {}
    size = _size(block, ints.get("size", 0), metrics, version, where)
    return ParsedRow(block.collective, size, status="failed", nprocs=block.nprocs,
                     metrics=metrics, error="IMB: " + shorten(" ".join(tokens[fail:]), 200))


def _size(block: _Block, size: int, metrics: dict[str, float], version: str | None,
          where: str) -> int:
    """IMB's #bytes in collbench's convention (OSU's Size)."""
    if block.collective not in PER_RANK_SINCE_2019 or not _since_2019(version):
        return size
    if block.nprocs is None:
        raise UserError(f"{where}: {block.name}: no '#processes' line above, so #bytes cannot "
                        "be converted to the whole vector")
    metrics["imb_bytes"] = float(size)
    if size * block.nprocs > INT64_MAX:
        raise UserError(f"{where}: #bytes {size} × {block.nprocs} processes is out of range")
    return size * block.nprocs


def _since_2019(version: str | None) -> bool:
    m = re.match(r"\d+", version or "")
    return m is None or int(m.group()) >= 2019  # no banner: assume a current IMB


def _no_rows(name: str, lines: Lines, seen: bool) -> str:
    if seen:
        return f"{name}: no results below the IMB header (did the benchmark fail?)"
    first = first_text(lines)
    what = f"; it starts with {first!r}" if first else " (the file is empty)"
    return (f"{name}: not IMB output: no 'Intel(R) MPI Benchmarks' banner or "
            f"'# Benchmarking' line{what}")
