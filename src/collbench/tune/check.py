"""`collbench rules check`: everything Open MPI would reject, ignore or misread in a rules file.

The reader (collbench.tune.rules) finds what makes Open MPI drop the whole file; this module
adds what depends on the MPI in use: whether it understands the version header, which
algorithm ids each collective has, and how the lookup treats unordered sizes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.catalog.algorithms import Catalog
from collbench.errors import UserError
from collbench.inputs import read_bytes
from collbench.tune.rules import COLLTYPES, CollRules, MsgRule, Problem, Reading, parse_rules

# Version 2 headers (MAXREQ) are read from these releases on (open-mpi/ompi PR #12827).
HEADER_SINCE: Final = ((4, 1, 8), (5, 0, 7))
# Which tuning fields each algorithm reads in do_this (coll_tuned_<coll>_intra_do_this).
USES_FANINOUT: Final = {("bcast", 2), ("reduce", 2)}  # chain: number of chains
USES_MAXREQ: Final = {"alltoall", "reduce"}


@dataclass(frozen=True)
class Report:
    path: Path
    reading: Reading
    mpi: str  # "Open MPI 5.0.11" or what the checks assumed

    @property
    def rejected(self) -> bool:
        return any(p.severity == "rejected" for p in self.reading.problems)

    @property
    def ok(self) -> bool:
        return not any(p.severity in ("rejected", "misread") for p in self.reading.problems)


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def supports_header(version: str) -> bool:
    """Does this Open MPI read `rule-file-version-2` (and MAXREQ)?"""
    v = version_tuple(version)
    if not v:
        return False
    return v >= (5, 0, 7) if v >= (5, 0, 0) else v >= (4, 1, 8) and v < (5, 0, 0)


def read_file(path: Path) -> bytes:
    return read_bytes(path, "rules file")


def check(path: Path, catalog: Catalog) -> Report:
    """Read the file as Open MPI does, then check it against this Open MPI's catalog."""
    data = read_file(path)
    if data.lstrip().startswith(b"{"):
        raise UserError(f"{path}:1: this is a JSON rules file (Open MPI 6.0 and main); "
                        "rules check reads the classic text format; valid: a file written "
                        "by `collbench tune`")
    reading = parse_rules(data)
    mpi = f"Open MPI {catalog.version}"
    if catalog.implementation != "openmpi":
        mpi = f"{catalog.implementation} {catalog.version} is not Open MPI: checked against " \
              "Open MPI 5.0's algorithm table"
    extra: list[Problem] = []
    if reading.rules is not None:
        if reading.rules.version is not None and catalog.implementation == "openmpi" \
                and not supports_header(catalog.version):
            extra.append(Problem("rejected", 1, "header", (
                f"Open MPI {catalog.version} does not know the rule-file-version header "
                "(4.1.8 / 5.0.7 and later do): it reads '-2' as a negative count; write "
                "the file without it (collbench tune does for this MPI)")))
        if reading.rules.version not in (None, 1, 2):
            extra.append(Problem("note", 1, "header", (
                f"rule-file-version-{reading.rules.version}: Open MPI 5.0 knows versions 1 "
                "and 2 and treats any higher one as 2")))
        extra += _semantic(reading.rules.collectives, catalog)
    reading.problems += extra
    reading.problems.sort(key=lambda p: (p.severity != "rejected", p.line))
    return Report(path, reading, mpi)


def _semantic(colls: Sequence[CollRules], catalog: Catalog) -> list[Problem]:
    out: list[Problem] = []
    seen: dict[int, int] = {}
    for coll in colls:
        name = COLLTYPES[coll.coll_id]
        if coll.coll_id in seen:
            out.append(Problem("misread", coll.line, "COLID", (
                f"{name} (id {coll.coll_id}) appears again (first on line "
                f"{seen[coll.coll_id]}): Open MPI keeps only this later set")))
        seen[coll.coll_id] = coll.line
        algs = {a.id: a.name for a in catalog.of(name) if a.id is not None}
        if not algs:
            out.append(Problem("misread", coll.line, "COLID", (
                f"{name} (id {coll.coll_id}) has no coll/tuned algorithms in "
                f"{catalog.implementation} {catalog.version}: these rules are never used; "
                f"valid ids: {_tuned_ids(catalog)}")))
        sizes = [c.comm_size for c in coll.comms]
        for prev, comm in zip(coll.comms, coll.comms[1:], strict=False):
            if comm.comm_size <= prev.comm_size:
                out.append(Problem("misread", comm.line, "COMSIZE", (
                    f"{name}: communicator sizes {', '.join(map(str, sizes))} do not "
                    f"increase: Open MPI takes the last set whose size is <= the "
                    f"communicator's, scanning in file order, so set {comm.comm_size} "
                    f"(line {comm.line}) shadows or is shadowed by set {prev.comm_size}")))
        for comm in coll.comms:
            out += _rules(name, comm.comm_size, comm.rules, algs)
    return out


def _rules(name: str, comm_size: int, rules: Sequence[MsgRule],
           algs: dict[int, str]) -> list[Problem]:
    out: list[Problem] = []
    prev: MsgRule | None = None
    for r in rules:
        where = f"{name} comm size {comm_size}"
        if prev is not None and r.size <= prev.size:
            out.append(Problem("misread", r.line, "MSGSIZE", (
                f"{where}: message size {r.size} does not increase (previous rule "
                f"{prev.size}, line {prev.line}): Open MPI scans in file order and stops at "
                "the first larger size, so one of these rules is never used")))
        if r.alg and algs and r.alg not in algs:
            valid = ", ".join(f"{i} {n}" for i, n in sorted(algs.items()))
            out.append(Problem("misread", r.line, "ALG", (
                f"{where}: algorithm {r.alg} does not exist for {name}; the collective "
                f"fails with MPI_ERR_ARG there; valid: 0 (Open MPI's choice), {valid}")))
        if r.alg == 0 and (r.faninout or r.segsize):
            out.append(Problem("note", r.line, "ALG", (
                f"{where}: algorithm 0 hands over to Open MPI's fixed decision, which "
                "ignores this rule's fan-in/out and segment size")))
        elif r.faninout and (name, r.alg) not in USES_FANINOUT and r.alg:
            out.append(Problem("note", r.line, "FANINOUT", (
                f"{where}: {algs.get(r.alg, r.alg)} ignores FANINOUT (only bcast and reduce "
                "chain read it; bcast knomial's radix is the MCA parameter "
                "coll_tuned_bcast_knomial_radix)")))
        if r.max_requests and name not in USES_MAXREQ:
            out.append(Problem("note", r.line, "MAXREQ", (
                f"{where}: only alltoall and reduce read MAXREQ")))
        prev = r
    return out


def _tuned_ids(catalog: Catalog) -> str:
    return ", ".join(f"{i} {n}" for i, n in enumerate(COLLTYPES) if catalog.of(n))


def render_report(report: Report) -> str:
    """One line per problem, `file:line: severity: FIELD: message`, then a verdict."""
    lines = [f"{report.path}:{p.line}: {p.severity}: {p.field}: {p.message}"
             for p in report.reading.problems]
    rules = report.reading.rules
    if report.rejected:
        verdict = ("REJECTED: Open MPI ignores this whole file, silently, and runs its "
                   "built-in decisions")
    elif not report.ok:
        verdict = "ACCEPTED, BUT: Open MPI ignores or misreads the parts listed above"
    else:
        verdict = "OK: Open MPI reads every rule as written"
    if rules is not None:
        n = sum(len(c.rules) for coll in rules.collectives for c in coll.comms)
        fmt = f"rule-file-version-{rules.version}" if rules.version else "classic (no header)"
        lines.append(f"{report.path}: {fmt}, {len(rules.collectives)} collectives, {n} rules; "
                     f"checked for {report.mpi}")
    lines.append(verdict)
    return "\n".join(lines) + "\n"
