"""A Selection (collbench.tune.select) as an Open MPI dynamic rules file.

Message sizes become what Open MPI's dynamic decision counts (catalog.collectives.
rules_bytes: total bytes for gather/scatter/allgather/alltoall). Fan-in/out, segment size
and max-requests are what the measured, forced algorithm received, so the file reproduces
the measurement: a chain measured with Open MPI's default fanout gets that default (4)
written out, because FANINOUT 0 would mean one chain. The version-2 header (with MAXREQ)
is written for Open MPI >= 4.1.8 / 5.0.7, the classic format for older releases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.collectives import COLLECTIVES, RulesBytes, rules_bytes
from collbench.catalog.ompi_info import listing
from collbench.errors import UserError
from collbench.sizes import format_size
from collbench.tune.check import USES_FANINOUT, USES_MAXREQ, supports_header
from collbench.tune.rules import CollRules, CommRules, MsgRule, RulesFile, format_rules
from collbench.tune.select import Choice, Selection
from collbench.version import __version__

FALLBACK_FANOUT: Final = 4  # coll_tuned_<coll>_algorithm_chain_fanout in 4.1-5.0
KNOMIAL: Final = ("bcast", 7)


@dataclass(frozen=True)
class Written:
    rules: RulesFile
    text: str
    notes: tuple[str, ...]
    extra_mca: tuple[tuple[str, str], ...]  # settings the file cannot carry (knomial radix)


def tuned_defaults(ompi_info: Path | None) -> dict[str, str]:
    """coll/tuned MCA parameter values of this Open MPI (empty when ompi_info fails)."""
    if ompi_info is None:
        return {}
    values = {}
    for line in listing(ompi_info).text.splitlines():
        parts = line.split(":")
        if len(parts) >= 7 and parts[5] == "value" and parts[4].startswith("coll_tuned_"):
            values[parts[4]] = ":".join(parts[6:])
    return values


def activation(path: Path) -> list[tuple[str, str]]:
    """The MCA settings that make Open MPI read the file."""
    return [("coll_tuned_use_dynamic_rules", "1"),
            ("coll_tuned_dynamic_rules_filename", str(path.resolve()))]


def build(selection: Selection, *, version: int | None, source: str,
          defaults: Mapping[str, str] | None = None, path: Path | None = None) -> Written:
    """The rules file for a selection; version None = classic, 2 = rule-file-version-2."""
    if selection.mpi not in ("openmpi", "unknown"):
        raise UserError(f"{source}: measured with {selection.mpi} {selection.mpi_version}; "
                        "an Open MPI rules file needs Open MPI measurements; valid: "
                        "--mpich for MPICH")
    defaults = defaults or {}
    notes = list(selection.notes)
    radix: set[int] = set()
    colls: list[CollRules] = []
    names = sorted({c for c, _ in selection.tables}, key=_rules_id)
    for coll in names:
        info = COLLECTIVES.get(coll)
        if info is None or info.ompi_rules_id is None:
            notes.append(f"{coll}: Open MPI's rules file has no entry for it; left out")
            continue
        # Written even where the default won everywhere: the file then says "measured, kept
        # Open MPI's choice", and rules verify checks that too.
        sets = sorted((n, cs) for (c, n), cs in selection.tables.items() if c == coll)
        comms = []
        for nprocs, choices in sets:
            rules = _rules(coll, nprocs, choices, version, defaults, notes, radix)
            comms.append(CommRules(nprocs, tuple(rules), _comm_comment(nprocs, sets),
                                   "message sizes"))
        colls.append(CollRules(info.ompi_rules_id, tuple(comms), coll, "communicator sizes"))
    extra: tuple[tuple[str, str], ...] = ()
    if len(radix) == 1:
        extra = (("coll_tuned_bcast_knomial_radix", str(radix.pop())),)
    elif radix:
        notes.append(f"bcast knomial was chosen with radixes {sorted(radix)}; a rules file "
                     "cannot carry the radix and one MCA value serves all: left at default")
    out = RulesFile(version, tuple(colls), _preamble(selection, source, path, extra),
                    "collectives")
    return Written(out, format_rules(out), tuple(dict.fromkeys(notes)), extra)


def _rules_id(coll: str) -> int:
    rid = COLLECTIVES[coll].ompi_rules_id if coll in COLLECTIVES else None
    return 99 if rid is None else rid


def choose_version(mpi_version: str, requested: str) -> int | None:
    """'auto': version 2 where this Open MPI reads it; '1': classic; '2': version 2."""
    if requested == "1":
        return None
    if requested == "2":
        return 2
    return 2 if supports_header(mpi_version) else None


def _rules(coll: str, nprocs: int, choices: Sequence[Choice], version: int | None,
           defaults: Mapping[str, str], notes: list[str], radix: set[int]) -> list[MsgRule]:
    if COLLECTIVES[coll].rules_bytes is RulesBytes.ZERO and len(choices) > 1:
        notes.append(f"{coll} np={nprocs}: Open MPI's rules see 0 bytes for every "
                     f"{coll}, so one algorithm must serve all sizes; kept the default")
        choices = [Choice(0, DEFAULT, 0)]
    out: list[MsgRule] = []
    for i, ch in enumerate(choices):
        size = rules_bytes(coll, ch.threshold, nprocs) if i else 0
        alg = ch.algorithm_id or 0
        if ch.algorithm != DEFAULT and not alg:
            raise UserError(f"{coll} {ch.algorithm}: no Open MPI algorithm id recorded with "
                            "the measurements; the rules file needs one")
        fan = ch.fanout
        if alg and not fan and (coll, alg) in USES_FANINOUT:
            fan = _int(defaults.get(f"coll_tuned_{coll}_algorithm_chain_fanout"),
                       FALLBACK_FANOUT)
        if (coll, alg) == KNOMIAL and ch.fanout:
            radix.add(ch.fanout)
            fan = 0
        maxreq = None
        if version is not None and version >= 2:
            maxreq = _int(defaults.get(f"coll_tuned_{coll}_algorithm_max_requests"), 0) \
                if alg and coll in USES_MAXREQ else 0
        rule = MsgRule(size, alg, fan, ch.segsize if alg else 0, maxreq,
                       _rule_comment(coll, nprocs, ch, choices, i))
        if out and rule.size <= out[-1].size:
            out[-1] = rule  # two per-rank sizes that count the same: the larger wins
        else:
            out.append(rule)
    return out


def _int(value: str | None, fallback: int) -> int:
    try:
        return int(value) if value is not None else fallback
    except ValueError:
        return fallback


def _rule_comment(coll: str, nprocs: int, ch: Choice, choices: Sequence[Choice],
                  i: int) -> str:
    nxt = choices[i + 1].threshold if i + 1 < len(choices) else None
    span = (f"{format_size(ch.threshold)}-{format_size(nxt - 1)}" if nxt is not None
            else f">= {format_size(ch.threshold)}")
    label = ch.algorithm + (f" seg={ch.segsize}" if ch.segsize else "") + \
        (f" fanout={ch.fanout}" if ch.fanout else "")
    if ch.algorithm == DEFAULT:
        label = "Open MPI's default"
    gain = (f", {ch.ratio:.2f}x the default's time" if ch.ratio is not None
            and ch.algorithm != DEFAULT else "")
    per_rank = "" if COLLECTIVES[coll].rules_bytes is RulesBytes.PER_RANK else " per rank"
    return f"{label}{gain} ({span}{per_rank})"


def _comm_comment(nprocs: int, sets: Sequence[tuple[int, Sequence[Choice]]]) -> str:
    sizes = [n for n, _ in sets]
    i = sizes.index(nprocs)
    if len(sizes) == 1:
        used = "every communicator size"
    elif i == 0:
        used = f"np <= {sizes[1] - 1}"
    elif i + 1 == len(sizes):
        used = f"np >= {nprocs}"
    else:
        used = f"np {nprocs}-{sizes[i + 1] - 1}"
    return f"measured np={nprocs}; used for {used}"


def _preamble(selection: Selection, source: str, path: Path | None,
              extra: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    tested = (f"switches only where significantly faster than the default "
              f"({selection.repetitions} repetitions)" if selection.tested
              else "fastest per size, NOT tested for significance")
    where = str(path.resolve()) if path else "<this file>"
    lines = [
        f"Open MPI coll/tuned rules written by collbench {__version__} from {source}",
        f"measured: {selection.mpi} {selection.mpi_version}; {tested}",
        "message sizes are bytes as Open MPI counts them: bcast/reduce/allreduce the buffer,",
        "gather/scatter/allgather/alltoall the whole buffer (bytes per rank x ranks)",
        f"use: --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename "
        f"{where}",
    ]
    lines += [f"also: --mca {k} {v} (a rules file cannot carry it)" for k, v in extra]
    lines += [f"evidence: {e}" for e in selection.evidence]
    return tuple(line.replace("#", "") for line in lines)
