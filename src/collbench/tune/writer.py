"""A Selection (collbench.tune.select) as an Open MPI dynamic rules file.

Message sizes become what Open MPI's dynamic decision counts (catalog.collectives.
rules_bytes: total bytes for gather/scatter/allgather/alltoall). Fan-in/out, segment size
and max-requests are what the measured, forced algorithm received, so the file reproduces
the measurement: a chain measured with Open MPI's default fanout gets that default (4)
written out, because FANINOUT 0 would mean one chain. The version-2 header (with MAXREQ)
is written for Open MPI >= 4.1.8 / 5.0.7, the classic format for older releases.

Nothing extends silently beyond what was measured: Open MPI applies the first communicator
set to every smaller communicator and the last to every larger one, so the file closes the
measured range with sets that keep Open MPI's fixed decision (algorithm 0) below the
smallest and above the largest measured process count; `extrapolate=True` (tune
--extrapolate) leaves them out, and the header and notes say how far the rules then reach.

A selection from a SimGrid campaign of collbench's Open MPI ports (`simulated_openmpi`)
is written for the Open MPI series simulated, its header marking it predicted.
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


def simulated_openmpi(provenance: Mapping[str, object]) -> str | None:
    """The Open MPI series a SimGrid campaign simulated with collbench's ports of coll/tuned
    (run.simgrid.ompi_version); None for any other folder or SMPI's own collectives."""
    sim = provenance.get("simgrid")
    mpi = provenance.get("mpi")
    if not isinstance(sim, Mapping) or not isinstance(mpi, Mapping) or \
            mpi.get("implementation") != "smpi":
        return None
    version = sim.get("ompi_version")
    return version if isinstance(version, str) and version else None


def build(selection: Selection, *, version: int | None, source: str,
          defaults: Mapping[str, str] | None = None, path: Path | None = None,
          predicted: str | None = None, extrapolate: bool = False) -> Written:
    """The rules file for a selection; version None = classic, 2 = rule-file-version-2.
    `predicted`: what the choices were predicted from (a simulation, a model), said in the
    header; `extrapolate`: let the measured sets reach every communicator size."""
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
        comms = _bounded(coll, comms, version, extrapolate, notes)
        colls.append(CollRules(info.ompi_rules_id, tuple(comms), coll, "communicator sizes"))
    extra: tuple[tuple[str, str], ...] = ()
    if len(radix) == 1:
        extra = (("coll_tuned_bcast_knomial_radix", str(radix.pop())),)
    elif radix:
        notes.append(f"bcast knomial was chosen with radixes {sorted(radix)}; a rules file "
                     "cannot carry the radix and one MCA value serves all: left at default")
    reach = _reach(selection, extrapolate, predicted is not None)
    out = RulesFile(version, tuple(colls), _preamble(selection, source, path, extra,
                                                     predicted, reach), "collectives")
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


def _default_rule(version: int | None) -> MsgRule:
    return MsgRule(0, 0, 0, 0, 0 if version is not None and version >= 2 else None,
                   "Open MPI's fixed decision")


def _bounded(coll: str, comms: list[CommRules], version: int | None, extrapolate: bool,
             notes: list[str]) -> list[CommRules]:
    """The measured sets closed by fixed-decision sets below and above (module docstring);
    with `extrapolate`, the measured sets alone, with their reach said in the comments."""
    lo, hi = comms[0].comm_size, comms[-1].comm_size
    if extrapolate:
        def says(c: CommRules, used: str) -> CommRules:
            return CommRules(c.comm_size, c.rules, c.comment.split("; used for")[0] +
                             f"; used for {used}", c.count_comment)
        if len(comms) == 1:
            comms[0] = says(comms[0], f"every np: EXTRAPOLATED beyond np {lo}")
            return comms
        comms[0] = says(comms[0], f"np <= {comms[1].comm_size - 1}: EXTRAPOLATED below np {lo}")
        comms[-1] = says(comms[-1], f"np >= {hi}: EXTRAPOLATED above np {hi}")
        return comms
    keep = _default_rule(version)
    out = []
    for i, c in enumerate(comms):  # each set now reaches up to the next one only
        top = comms[i + 1].comm_size - 1 if i + 1 < len(comms) else c.comm_size
        span = f"np {c.comm_size}" if top == c.comm_size else f"np {c.comm_size}-{top}"
        out.append(CommRules(c.comm_size, c.rules, f"measured np={c.comm_size}; used for "
                             f"{span}", c.count_comment))
    if lo > 2:
        out.insert(0, CommRules(2, (keep,), f"not measured (np 2-{lo - 1}): Open MPI's fixed "
                                "decision", "message sizes"))
    out.append(CommRules(hi + 1, (keep,), f"not measured (np >= {hi + 1}): Open MPI's fixed "
                         "decision; tune --extrapolate applies the measured sets there",
                         "message sizes"))
    return out


def _reach(selection: Selection, extrapolate: bool, predicted: bool = False,
           mpi: str = "Open MPI", own: str = "Open MPI's fixed decision") -> str:
    """One line on how far the rules reach beyond the measured process counts (`own`: what
    `mpi` runs outside them when the file does not extrapolate)."""
    counts = sorted({n for _, n in selection.tables})
    if not counts:
        return "measured: no communicator size"
    lo, hi = counts[0], counts[-1]
    measured = f"{'predicted' if predicted else 'measured'} at np {', '.join(map(str, counts))}"
    if extrapolate:
        return (f"EXTRAPOLATED (--extrapolate): {measured}; {mpi} applies the np={hi} "
                f"rules to every larger communicator (np={max(1024, 4 * hi):,} too) and the "
                f"np={lo} rules to every smaller one")
    span = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return (f"{measured}; outside np {span} this file keeps {own} "
            "(--extrapolate to apply the measured rules there)")


def reach_note(selection: Selection, extrapolate: bool, predicted: bool = False,
               mpi: str = "Open MPI", own: str = "Open MPI's fixed decision") -> str:
    """What `tune` prints about the reach of the rules (the header's line)."""
    return _reach(selection, extrapolate, predicted, mpi, own)


def _preamble(selection: Selection, source: str, path: Path | None,
              extra: Sequence[tuple[str, str]], predicted: str | None = None,
              reach: str = "") -> tuple[str, ...]:
    tested = (f"switches only where significantly faster than the default "
              f"({selection.repetitions} repetitions)" if selection.tested
              else "fastest per size, NOT tested for significance")
    where = str(path.resolve()) if path else "<this file>"
    lines = [
        f"Open MPI coll/tuned rules written by collbench {__version__} from {source}",
        f"PREDICTED, not measured: {predicted}; {tested}" if predicted else
        f"measured: {selection.mpi} {selection.mpi_version}; {tested}",
        *([reach] if reach else []),
        "message sizes are bytes as Open MPI counts them: bcast/reduce/allreduce the buffer,",
        "gather/scatter/allgather/alltoall the whole buffer (bytes per rank x ranks)",
        f"use: --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_dynamic_rules_filename "
        f"{where}",
    ]
    lines += [f"also: --mca {k} {v} (a rules file cannot carry it)" for k, v in extra]
    lines += [f"evidence: {e}" for e in selection.evidence]
    return tuple(line.replace("#", "") for line in lines)
