"""Open MPI coll/tuned dynamic rules files (the classic text format): model, reader, writer.

    [rule-file-version-2]              optional; Open MPI >= 4.1.8 / 5.0.7
    NCOL
      COLID NCOMSIZES
        COMSIZE NMSGSIZES
          MSGSIZE ALG FANINOUT SEGSIZE [MAXREQ]   MAXREQ: version >= 2, same line only

The reader does what Open MPI 5.0's does (coll_tuned_dynamic_file.c and
ompi_coll_base_file_getnext_long), so that it sees the same numbers: the header is matched
with fscanf("rule-file-version-%d") at the very first byte; every number is read with
fscanf("%li") (hex 0x.., octal 0.., a sign, leading whitespace), anything else is skipped
one character at a time, and '#' skips to the end of the line. A sign followed by no digit
is consumed; "0x" followed by no hex digit reads 0. Where that reading goes wrong (a
negative number, the end of the file, a first rule not at 0), Open MPI drops the whole file
without a word; `Reading.problems` says where and why. Checks that need the MPI in use
(algorithm ids, header support) are in collbench.tune.check.

The writer puts one entry per line with its comment; `format_rules(parse_rules(t).rules)`
gives back `t` exactly for every file format_rules wrote.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

HEADER: Final = b"rule-file-version-"
# COLLTYPE in ompi/mca/coll/base/coll_base_functions.h (v4.1-v5.0): index = collective id.
COLLTYPES: Final = (
    "allgather", "allgatherv", "allreduce", "alltoall", "alltoallv", "alltoallw", "barrier",
    "bcast", "exscan", "gather", "gatherv", "reduce", "reduce_scatter", "reduce_scatter_block",
    "scan", "scatter", "scatterv", "neighbor_allgather", "neighbor_allgatherv",
    "neighbor_alltoall", "neighbor_alltoallv", "neighbor_alltoallw",
)
COLLCOUNT: Final = len(COLLTYPES)
_SPACE: Final = b" \t\n\v\f\r"
_HEX: Final = b"0123456789abcdefABCDEF"
_LONG_MAX: Final = 2**63 - 1

Severity = Literal["rejected", "misread", "note"]


@dataclass(frozen=True)
class Problem:
    """What Open MPI does with the file. rejected: the whole file is ignored; misread: part
    of it is ignored or means something else than it seems; note: harmless but worth saying."""

    severity: Severity
    line: int
    field: str  # "header", "NCOL", "COLID", "COMSIZE", "MSGSIZE", "ALG", ...
    message: str


@dataclass(frozen=True)
class MsgRule:
    size: int  # bytes as Open MPI counts them for this collective
    alg: int  # 0 = Open MPI's fixed decision
    faninout: int
    segsize: int
    max_requests: int | None = None  # written only in version >= 2 files
    comment: str = ""
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class CommRules:
    comm_size: int  # applies from this size up to the next set's size - 1 (first: also below)
    rules: tuple[MsgRule, ...]
    comment: str = ""
    count_comment: str = ""
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class CollRules:
    coll_id: int
    comms: tuple[CommRules, ...]
    comment: str = ""
    count_comment: str = ""
    line: int = field(default=0, compare=False)

    @property
    def name(self) -> str:
        return COLLTYPES[self.coll_id] if 0 <= self.coll_id < COLLCOUNT else f"id {self.coll_id}"


@dataclass(frozen=True)
class RulesFile:
    version: int | None  # None: no header (classic); 2: rule-file-version-2
    collectives: tuple[CollRules, ...]
    preamble: tuple[str, ...] = ()  # whole-line comments between the header and NCOL
    count_comment: str = ""

    def find(self, coll_id: int) -> CollRules | None:
        """The set Open MPI uses for a collective (a later duplicate replaces an earlier one)."""
        found = [c for c in self.collectives if c.coll_id == coll_id]
        return found[-1] if found else None


@dataclass(frozen=True)
class Token:
    value: int
    line: int
    role: str = ""  # filled in by the reader: "NCOL", "COLID", ..., "MSGSIZE", ...
    entry: int = -1  # which entry the token belongs to (a message rule, a comm header, ...)


@dataclass
class Reading:
    """The result of reading a file as Open MPI does."""

    rules: RulesFile | None  # None when Open MPI would reject the file
    problems: list[Problem]
    tokens: list[Token]  # every number Open MPI read, in order, with its role
    unread: list[Token]  # numbers after the last entry the counts announce


# ASCII digits only, as C's isdigit in the C locale: b'\xb2' is '²' to Python, not to fscanf.
_DIGITS: Final = frozenset(b"0123456789")


class _Stream:
    """Bytes read the way stdio's fscanf/fread read them in coll_tuned_dynamic_file.c."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.eof = data, 0, False
        self.newlines = [i for i, b in enumerate(data) if b == 0x0A]

    def line_at(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def peek(self) -> int | None:
        return self.data[self.pos] if self.pos < len(self.data) else None

    def header(self) -> int | None:
        """fscanf("rule-file-version-%d"): the version, or None (matched chars stay read)."""
        for ch in HEADER:
            if self.peek() != ch:
                return None
            self.pos += 1
        return self.scan_int(decimal_only=True)

    def scan_int(self, decimal_only: bool = False) -> int | None:
        """fscanf("%li") (or "%d"): a number, None on a matching failure, -1 marks EOF via
        self.eof. glibc consumes a sign that no digit follows, and "0x" with no hex digit."""
        while (c := self.peek()) is not None and c in _SPACE:
            self.pos += 1
        if self.peek() is None:
            self.eof = True
            return None
        self.eof = False
        sign = 1
        if self.peek() in (ord("+"), ord("-")):
            sign = -1 if self.peek() == ord("-") else 1
            self.pos += 1
        c = self.peek()
        if c is None or c not in _DIGITS:
            return None
        if decimal_only or c != ord("0"):
            start = self.pos
            while (c := self.peek()) is not None and c in _DIGITS:
                self.pos += 1
            return _clamp(sign * int(self.data[start:self.pos]))
        self.pos += 1  # the leading 0: octal or hex follows
        if self.peek() in (ord("x"), ord("X")):
            self.pos += 1
            start = self.pos
            while (c := self.peek()) is not None and c in _HEX:
                self.pos += 1
            digits = self.data[start:self.pos]
            return _clamp(sign * int(digits, 16)) if digits else 0
        start = self.pos
        while (c := self.peek()) is not None and ord("0") <= c <= ord("7"):
            self.pos += 1
        digits = self.data[start:self.pos]
        return _clamp(sign * int(digits, 8)) if digits else 0

    def next_long(self) -> tuple[int, int] | None:
        """ompi_coll_base_file_getnext_long: (value, line) or None at the end of the file."""
        while True:
            start = self.pos
            value = self.scan_int()
            if value is not None:
                digits = start
                while self.data[digits] in _SPACE:
                    digits += 1
                return value, self.line_at(digits)
            if self.eof or self.peek() is None:
                return None
            trash = self.data[self.pos]
            self.pos += 1
            if trash == ord("#"):
                end = self.data.find(b"\n", self.pos)
                self.pos = len(self.data) if end < 0 else end + 1

    def next_is_digit(self) -> bool:
        """ompi_coll_base_file_peek_next_char_isdigit: skip blanks, then a digit?"""
        while self.peek() in (ord(" "), ord("\t")):
            self.pos += 1
        c = self.peek()
        return c is not None and c in _DIGITS


def _clamp(v: int) -> int:
    # strtol saturates at LONG_MIN/LONG_MAX
    return max(-_LONG_MAX - 1, min(_LONG_MAX, v))


class _Rejected(Exception):
    def __init__(self, line: int, field_: str, message: str) -> None:
        super().__init__(message)
        self.problem = Problem("rejected", line, field_, message)


class _Reader:
    def __init__(self, text: bytes) -> None:
        self.s = _Stream(text)
        self.tokens: list[Token] = []
        self.entry = 0
        self.lines = text.split(b"\n")

    def comment(self, line: int) -> str:
        """The comment after the numbers on a line ('' if none)."""
        raw = self.lines[line - 1].decode("utf-8", "replace") if line <= len(self.lines) else ""
        return raw.split("#", 1)[1].strip() if "#" in raw else ""

    def read(self, role: str, what: str, new_entry: bool = False) -> tuple[int, int]:
        if new_entry:
            self.entry += 1
        got = self.s.next_long()
        if got is None:
            raise _Rejected(self.s.line_at(len(self.s.data)), role,
                            f"{role}: the file ends where {what} should follow; the counts "
                            "above announce more entries than the file holds")
        value, line = got
        self.tokens.append(Token(value, line, role, self.entry))
        if value < 0:
            raise _Rejected(line, role, f"{role} {value} is negative ({what}); Open MPI "
                                        "stops reading and ignores the whole file")
        return value, line


def parse_rules(text: bytes | str) -> Reading:
    """Read a rules file as Open MPI 5.0 does; every problem found, with line numbers."""
    data = text.encode() if isinstance(text, str) else text
    r = _Reader(data)
    problems: list[Problem] = []
    version = r.s.header()  # a partial match leaves those characters read, as fscanf does
    try:
        rules = _read_body(r, version, problems)
    except _Rejected as e:
        problems.insert(0, e.problem)
        _explain_rejection(data, version, problems)
        problems += _layout_problems(r.tokens, version)  # often the cause
        return Reading(None, problems, r.tokens, [])
    unread = _rest(r)
    if unread:
        problems.append(Problem(
            "misread", unread[0].line, "NCOL",
            f"numbers from line {unread[0].line} on are never read: the counts announce "
            f"fewer entries than the file holds (Open MPI stops after the last announced "
            "entry)"))
    problems += _layout_problems(r.tokens, version)
    return Reading(rules, problems, r.tokens, unread)


def _read_body(r: _Reader, version: int | None, problems: list[Problem]) -> RulesFile:
    preamble = _preamble(r.lines, version is not None)
    ncol, line = r.read("NCOL", "the number of collectives", new_entry=True)
    ncol_comment = r.comment(line)
    if ncol > COLLCOUNT:
        raise _Rejected(line, "NCOL", f"NCOL {ncol} is more than the {COLLCOUNT} collectives "
                                      "Open MPI knows")
    colls = []
    for _ in range(ncol):
        cid, cline = r.read("COLID", "a collective id", new_entry=True)
        if cid >= COLLCOUNT:
            raise _Rejected(cline, "COLID", f"COLID {cid} is not a collective id; valid: 0-"
                                            f"{COLLCOUNT - 1} ({_ids_text()})")
        ncs, nline = r.read("NCOMSIZES", "the number of communicator sizes")
        comms = []
        for _ in range(ncs):
            size, sline = r.read("COMSIZE", "a communicator size", new_entry=True)
            nms, mline = r.read("NMSGSIZES", "the number of message sizes")
            msgs = []
            for k in range(nms):
                msize, rline = r.read("MSGSIZE", "a message size", new_entry=True)
                alg, _ = r.read("ALG", "an algorithm id")
                fan, _ = r.read("FANINOUT", "a fan-in/out")
                seg, _ = r.read("SEGSIZE", "a segment size")
                maxreq = None
                if (version or 1) > 1 and r.s.next_is_digit():
                    maxreq, _ = r.read("MAXREQ", "a maximum number of requests")
                if k == 0 and msize != 0:
                    raise _Rejected(rline, "MSGSIZE", f"the first rule of {_where(cid, size)} "
                                    f"starts at message size {msize}; Open MPI requires 0")
                msgs.append(MsgRule(msize, alg, fan, seg, maxreq, r.comment(rline), rline))
            comms.append(CommRules(size, tuple(msgs), r.comment(sline),
                                   r.comment(mline) if mline != sline else "", sline))
        colls.append(CollRules(cid, tuple(comms), r.comment(cline),
                               r.comment(nline) if nline != cline else "", cline))
    return RulesFile(version, tuple(colls), preamble, ncol_comment)


def _preamble(lines: Sequence[bytes], header: bool) -> tuple[str, ...]:
    """Whole-line comments after the header line and before the first number."""
    out = []
    for raw in lines[1 if header else 0:]:
        text = raw.decode("utf-8", "replace").strip()
        if not text.startswith("#"):
            break
        out.append(text[1:].strip())
    return tuple(out)


def _rest(r: _Reader) -> list[Token]:
    out = []
    while (got := r.s.next_long()) is not None:
        out.append(Token(got[0], got[1], "unread"))
    return out


def _where(cid: int, comm_size: int) -> str:
    name = COLLTYPES[cid] if 0 <= cid < COLLCOUNT else f"collective {cid}"
    return f"{name} (id {cid}) comm size {comm_size}"


def _ids_text() -> str:
    return ", ".join(f"{i} {n}" for i, n in enumerate(COLLTYPES) if i < 16)


def _explain_rejection(data: bytes, version: int | None, problems: list[Problem]) -> None:
    head = data.find(HEADER)
    if head > 0 and version is None:
        line = data.count(b"\n", 0, head) + 1
        problems.append(Problem(
            "rejected", line, "header",
            f"'rule-file-version-' on line {line} is not the very first bytes of the file: "
            "Open MPI then reads its '-N' as a negative count (move it to the first line, "
            "with nothing before it, not even a comment, blank or space)"))


def _layout_problems(tokens: Sequence[Token], version: int | None) -> list[Problem]:
    """Numbers that belong to different entries on one line, or one rule over several lines:
    the counts do not match the entries, so Open MPI reads them as something else."""
    problems: list[Problem] = []
    by_line: dict[int, list[Token]] = {}
    for t in tokens:
        by_line.setdefault(t.line, []).append(t)
    for line, toks in sorted(by_line.items()):
        rules = [t for t in toks if t.role == "MSGSIZE"]
        if len(toks) >= 4 and (len(rules) != 1 or toks[0].role != "MSGSIZE"
                               or len({t.entry for t in toks}) > 1):
            roles = " ".join(t.role for t in toks)
            hint = ""
            if len(toks) == 5 and not version:
                hint = ("; a fifth number (MAXREQ) needs the rule-file-version-2 header, "
                        "without it the fifth is read as the next rule's MSGSIZE")
            elif len(toks) >= 8 and (version or 1) > 1:
                hint = "; with version 2, a number after SEGSIZE on the same line is MAXREQ"
            problems.append(Problem("misread", line, toks[0].role,
                                    f"line {line} holds {len(toks)} numbers read as {roles}: "
                                    f"the counts do not match the entries{hint}"))
    entries: dict[int, set[int]] = {}
    for t in tokens:
        if t.role in ("MSGSIZE", "ALG", "FANINOUT", "SEGSIZE", "MAXREQ"):
            entries.setdefault(t.entry, set()).add(t.line)
    reported = {p.line for p in problems}
    for lines in entries.values():
        if len(lines) > 1 and not lines & reported:
            first = min(lines)
            problems.append(Problem("misread", first, "MSGSIZE",
                                    f"the rule read from line {first} spans lines "
                                    f"{first}-{max(lines)}: the counts do not match the entries"))
            reported |= lines
    return problems


# --- writing ------------------------------------------------------------------------------

def format_rules(rules: RulesFile) -> str:
    """The canonical text: header, preamble comments, one entry per line, comments aligned."""
    lines: list[tuple[str, str]] = []  # (numbers, comment)
    head = [f"rule-file-version-{rules.version}"] if rules.version else []
    out = head + [f"# {c}" if c else "#" for c in rules.preamble]
    lines.append((str(len(rules.collectives)), rules.count_comment))
    for coll in rules.collectives:
        lines.append((f"{coll.coll_id}", coll.comment))
        lines.append((f"{len(coll.comms)}", coll.count_comment))
        for comm in coll.comms:
            lines.append((f"{comm.comm_size}", comm.comment))
            lines.append((f"{len(comm.rules)}", comm.count_comment))
            lines += _rule_lines(comm.rules)
    width = max(len(n) for n, _ in lines)
    out += [f"{n:<{width}}  # {c}" if c else n for n, c in lines]
    return "\n".join(out) + "\n"


def _rule_lines(rules: Sequence[MsgRule]) -> list[tuple[str, str]]:
    cols = [[str(r.size), str(r.alg), str(r.faninout), str(r.segsize)]
            + ([str(r.max_requests)] if r.max_requests is not None else []) for r in rules]
    widths = [max(len(c[i]) for c in cols if i < len(c)) for i in range(max(map(len, cols)))]
    text = [" ".join(v.ljust(widths[i]) if i < len(c) - 1 else v for i, v in enumerate(c))
            for c in cols]
    return [(t, r.comment) for t, r in zip(text, rules, strict=True)]
