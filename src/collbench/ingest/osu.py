"""OSU Micro-Benchmarks text output (5.x to 7.x) as parsed rows.

A file holds a title (`# OSU MPI Broadcast Latency Test v7.4`), optional `# Datatype:`
lines, a column header (`# Size  Avg Latency(us) ...`) and one line per message size.
Text before the title (MPI warnings) and text lines inside the table (`DATA VALIDATION
ERROR: ...`, launcher messages) are skipped; a line that starts with a number is a data
line and must match the column header exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
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

# OSU's benchmark titles (the BENCHMARK strings of its sources) -> collbench names.
_COLLECTIVE_TITLES: Final = {
    "Allgather": "allgather", "Allgatherv": "allgatherv", "Allreduce": "allreduce",
    "All-to-All Personalized Exchange": "alltoall",
    "All-to-Allv Personalized Exchange": "alltoallv",
    "All-to-Allw Personalized Exchange": "alltoallw",
    "Barrier": "barrier", "Broadcast": "bcast", "Gather": "gather", "Gatherv": "gatherv",
    "Reduce": "reduce", "Reduce_scatter": "reduce_scatter",
    "Reduce_scatter_block": "reduce_scatter_block", "Scatter": "scatter",
    "Scatterv": "scatterv",
}
_P2P_TITLES: Final = {
    "Latency Test": "latency", "Bandwidth Test": "bw", "Bi-Directional Bandwidth Test": "bibw",
    "Multi Latency Test": "multi_lat", "Multi-threaded Latency Test": "latency_mt",
    "Multi-process Latency Test": "latency_mp",
    "Multiple Bandwidth / Message Rate Test": "mbw_mr",
}
# Processes the point-to-point tests insist on (they refuse to run otherwise).
TWO_PROCESS_TESTS: Final = ("latency", "bw", "bibw")


def _key(title: str) -> str:
    # Spelling drifts between releases ("Non-Blocking"/"Non-blocking", a missing space
    # before "Latency Test" in 7.x all-to-all titles): compare letters and digits only.
    return re.sub(r"[^a-z0-9]", "", title.lower())


TITLES: Final[dict[str, str]] = {
    **{_key(f"{t} Latency Test"): n for t, n in _COLLECTIVE_TITLES.items()},
    **{_key(f"Non-blocking {t} Latency Test"): f"i{n}" for t, n in _COLLECTIVE_TITLES.items()},
    **{_key(f"{t} Persistent Latency Test"): f"{n}_persistent"
       for t, n in _COLLECTIVE_TITLES.items()},
    **{_key(t): n for t, n in _P2P_TITLES.items()},
}

_TITLE: Final = re.compile(
    r"#\s*OSU\s+(?P<api>\S+)\s+(?P<title>.*?)(?:\s+v(?P<version>\d[\w.-]*))?\s*", re.IGNORECASE)
_DATATYPE: Final = re.compile(r"#\s*Datatype\s*:\s*(?P<dt>\S+?)\.?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Column:
    key: str  # a ParsedRow field or a metric name
    short: str  # its name in messages
    kind: str  # "int", "float" or "pass" (Pass/Fail)


def _label(pattern: str) -> re.Pattern[str]:
    # Column labels are right-aligned in 20-character fields: spacing inside them varies.
    return re.compile(pattern.replace(" ", r"\s*"), re.IGNORECASE)


# Most specific first. Metric names follow records.COLUMNS["metrics"].
_LABELS: Final[tuple[tuple[re.Pattern[str], Column], ...]] = tuple(
    (_label(p), Column(k, s, t)) for p, k, s, t in (
        (r"Transmit Size", "transmit_size_bytes", "TransmitSize", "int"),
        (r"Size", "size", "Size", "int"),
        (r"Avg Latency ?\(us\)", "avg_us", "Avg", "float"),
        (r"Min Latency ?\(us\)", "min_us", "Min", "float"),
        (r"Max Latency ?\(us\)", "max_us", "Max", "float"),
        (r"Latency ?\(us\)", "avg_us", "Latency", "float"),  # 5.x point-to-point
        (r"Iterations", "iterations", "Iterations", "int"),
        (r"Validation", "validation", "Validation", "pass"),
        (r"Bandwidth ?\(MB/s\)", "bandwidth_mbs", "Bandwidth", "float"),
        (r"MB/s", "bandwidth_mbs", "MB/s", "float"),
        (r"Messages/s", "messages_per_s", "Messages/s", "float"),
        (r"Overall ?\(us\)", "overall_us", "Overall", "float"),
        (r"Compute ?\(us\)", "compute_us", "Compute", "float"),
        (r"(?:Coll\. ?)?Init ?\(us\)", "init_us", "Init", "float"),
        (r"MPI_Test ?\(us\)", "test_us", "Test", "float"),
        (r"MPI_Wait ?\(us\)", "wait_us", "Wait", "float"),
        (r"Pure Comm\.? ?\(us\)", "pure_us", "Pure", "float"),
        (r"Min Comm\.? ?\(us\)", "min_comm_us", "MinComm", "float"),
        (r"Max Comm\.? ?\(us\)", "max_comm_us", "MaxComm", "float"),
        (r"Overlap ?\(%\)", "overlap_pct", "Overlap", "float"),
    ))
_TAIL_LAT: Final = _label(r"P(\d{1,2}) Tail Lat ?\(us\)")
_TAIL_BW: Final = _label(r"P(\d{1,2}) Tail BW ?\(MB/s\)")
_VALUES: Final = frozenset({"avg_us", "bandwidth_mbs", "overall_us"})  # one makes a table


def parse_columns(line: str) -> list[Column] | None:
    """The columns of a `# Size  Avg Latency(us) ...` line; None if it is another comment."""
    if not line.startswith("#"):
        return None
    text, pos, cols = line[1:].strip(), 0, []
    while pos < len(text):
        for pattern, col in _LABELS:
            if m := pattern.match(text, pos):
                cols.append(col)
                break
        else:
            if m := _TAIL_LAT.match(text, pos):
                cols.append(Column(f"p{m.group(1)}_us", f"P{m.group(1)}", "float"))
            elif m := _TAIL_BW.match(text, pos):
                cols.append(Column(f"p{m.group(1)}_bw_mbs", f"P{m.group(1)}", "float"))
            else:
                return None
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return cols if _VALUES & {c.key for c in cols} else None


def is_title(line: str) -> bool:
    return _TITLE.fullmatch(line) is not None


@dataclass
class _Section:
    """What the lines above a data line said."""

    collective: str | None = None
    title_line: int = 0
    columns: list[Column] | None = None
    datatype: str | None = None


def parse_osu(text: str, name: str, collective: str | None = None) -> ParsedFile:
    """Rows of an OSU output file; `collective` names the benchmark when the title does not
    (and must agree with it when it does)."""
    lines = split_lines(text)
    header: dict[str, str] = dict(lines.recorded)
    rows: list[ParsedRow] = []
    sec = _Section()
    version: str | None = None
    seen_title = False
    first_seen: dict[tuple[str, str | None, int], int] = {}
    for n, line in lines.numbered:
        where = f"{name}:{n}"
        stripped = line.strip()
        if m := _TITLE.fullmatch(stripped):
            seen_title = True
            sec = _Section(_collective(m, where, collective, header), n)
            version = m.group("version") or version
            continue
        if not seen_title and sec.columns is None:
            if cols := parse_columns(stripped):
                # A table without its title line: only --collective can say what it is.
                if collective is None:
                    raise UserError(f"{where}: no '# OSU MPI ... Test' title above the column "
                                    "header, so the benchmark is unknown; give --collective")
                sec = _Section(collective, n, cols)
            continue  # before the title: launcher and MPI messages
        if m := _DATATYPE.fullmatch(stripped):
            sec.datatype = m.group("dt")
        elif stripped.startswith("#"):
            if cols := parse_columns(stripped):
                sec.columns = cols
        elif looks_like_data(stripped):
            if sec.columns is None:
                raise UserError(f"{where}: data line before the column header "
                                "('# Size  Avg Latency(us) ...')")
            row = _row(stripped.split(), sec, where)
            key = (row.collective, sec.datatype, row.size_bytes)  # -T char,int: tables per type
            if key in first_seen:
                # Two tables in one file (outputs concatenated, or a rerun appended) are two
                # measurements, not repetitions: store them as two files, each one launch.
                raise UserError(f"{where}: size {row.size_bytes} of {row.collective} again "
                                f"(first at line {first_seen[key]}): one OSU run per file; "
                                "split the file and ingest each part (as --repetition 0, 1, "
                                "...)")
            first_seen[key] = n
            rows.append(row)
    if version:
        header["osu_version"] = version
    if not rows:
        raise UserError(_no_rows(name, lines, seen_title or sec.columns is not None))
    return ParsedFile("osu", version, header, rows, lines.command)


def _collective(m: re.Match[str], where: str, given: str | None,
                header: dict[str, str]) -> str:
    api, title = m.group("api"), m.group("title")
    header["title"] = m.group(0).lstrip("#").strip()
    if not api.upper().startswith("MPI"):
        raise UserError(f"{where}: OSU {api} benchmarks are not supported; valid: OSU MPI")
    if "-" in api:  # "MPI-CUDA": buffers on a device
        header["accel"] = api.split("-", 1)[1]
    found = TITLES.get(_key(title))
    if found is None:
        if given is None:
            raise UserError(f"{where}: unknown OSU benchmark {shorten(title, 60)!r}; give "
                            "--collective to name it")
        return given
    if given is not None and given != found:
        raise UserError(f"{where}: the title says {found} ({shorten(title, 60)!r}) but "
                        f"--collective is {given}")
    return found


def _row(tokens: list[str], sec: _Section, where: str) -> ParsedRow:
    cols = sec.columns or []
    if len(tokens) != len(cols):
        raise UserError(f"{where}: expected {len(cols)} columns "
                        f"({' '.join(c.short for c in cols)}), got {len(tokens)}")
    ints: dict[str, int] = {}
    floats: dict[str, float] = {}
    passed: bool | None = None
    for tok, col in zip(tokens, cols, strict=True):
        if col.kind == "int":
            limit = INT32_MAX if col.key == "iterations" else INT64_MAX
            ints[col.key] = parse_int(tok, where, col.short, limit)
        elif col.kind == "pass":
            if tok.lower() not in ("pass", "fail"):
                raise UserError(f"{where}: Validation: expected Pass or Fail, got "
                                f"{shorten(tok)!r}")
            passed = tok.lower() == "pass"
        elif (value := parse_float(tok, where, col.short)) is not None:
            floats[col.key] = value
    metrics = {k: v for k, v in floats.items()
               if k not in ("avg_us", "min_us", "max_us", "bandwidth_mbs")}
    if "transmit_size_bytes" in ints:
        metrics["transmit_size_bytes"] = float(ints["transmit_size_bytes"])
    nonblocking = "overall_us" in floats or "pure_us" in floats
    # Non-blocking tables: Pure Comm. is the collective's own time (call + wait, no
    # overlapped compute), and Min/Max Comm. are that time's extremes over the ranks:
    # the same avg/min/max triple a blocking table gives. Overall sits in metrics.
    keys = ("pure_us", "min_comm_us", "max_comm_us") if nonblocking else (
        "avg_us", "min_us", "max_us")
    collective = sec.collective or ""
    if passed is False:  # a wrong result is not a latency
        return ParsedRow(collective, ints.get("size", 0), iterations=ints.get("iterations"),
                         validated=False, status="invalid", datatype=sec.datatype,
                         error="OSU validation (-c) reported Fail")
    return ParsedRow(
        collective, ints.get("size", 0),  # no Size column: barrier, 0 bytes
        avg_us=floats.get(keys[0]), min_us=floats.get(keys[1]), max_us=floats.get(keys[2]),
        median_us=floats.get("p50_us"), iterations=ints.get("iterations"),
        bandwidth_mbs=floats.get("bandwidth_mbs"), validated=passed, metrics=metrics,
        datatype=sec.datatype)


def _no_rows(name: str, lines: Lines, seen_header: bool) -> str:
    if seen_header:
        return f"{name}: no results below the OSU header (did the benchmark fail?)"
    first = first_text(lines)
    what = f"; it starts with {first!r}" if first else " (the file is empty)"
    return f"{name}: not OSU output: no '# OSU MPI ... Test' title{what}"


# --- the recorded command line ---------------------------------------------------------
# OSU options that change what a table means, as `### cmd:` records them (getopt: `-t 25`,
# `-t25`; OSU 7's long names too) -> the name `--param` uses.
_CMD_OPTIONS: Final = {"-t": "test_calls", "--num_test_calls": "test_calls",
                       "-i": "iterations", "--iterations": "iterations",
                       "-x": "warmup", "--warmup": "warmup"}


def command_options(command: str | None, where: str) -> dict[str, int]:
    """{test_calls, iterations, warmup} given to the OSU benchmark on a `### cmd:` line.

    Only the benchmark's own arguments count (after the `osu_...` word): `mpirun -x VAR`
    exports a variable, it is no warm-up count."""
    if not command:
        return {}
    words = command.split()
    start = next((i for i, w in enumerate(words) if "osu_" in w.rsplit("/", 1)[-1]), None)
    if start is None:
        return {}
    out: dict[str, int] = {}
    args = words[start + 1:]
    i = 0
    while i < len(args):
        word, value = args[i], None
        name = _CMD_OPTIONS.get(word.split("=", 1)[0])
        if name is not None and "=" in word:
            value = word.split("=", 1)[1]
        elif name is not None:
            i += 1
            value = args[i] if i < len(args) else None
        elif len(word) > 2 and word[:2] in _CMD_OPTIONS and not word.startswith("--"):
            name, value = _CMD_OPTIONS[word[:2]], word[2:]
        if name is not None:
            if value is None or not re.fullmatch(r"\d{1,9}", value):
                raise UserError(f"{where}: ### cmd: {word} {value or ''}: expected a whole "
                                "number")
            out[name] = int(value)
        i += 1
    return out
