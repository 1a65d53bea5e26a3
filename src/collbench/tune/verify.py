"""`collbench rules verify`: prove, size by size, that Open MPI runs what a rules file says.

Points: for every collective in the file that the kernel measures and every -n, the rule set
Open MPI picks for that communicator size, and in it each threshold and the size just below
it (bytes per rank, converted from the file's counting with catalog.collectives).

Method "trace" (Open MPI): the kernel runs once with the file active and once without, under
the algtrace LD_PRELOAD library, which records the algorithm, fan-in/out and segment size
each ompi_coll_tuned_<coll>_intra_do_this call receives. A rule with ALG != 0 must be run
exactly; a rule with ALG 0 must run what Open MPI runs without the file.
With coll/han's rules file (`--han`, Open MPI 5.0 on several nodes, docs/components.md)
each point also has the component the han file hands the measured communicator to; the
kernel's probe says which one served it, and a tuned rule is judged on the calls at the top
level only (on the measured communicator's size; han's sub-communicators are smaller).
Method "timing" (where the library cannot work: another MPI, or no call intercepted): per
point the file's arm, the forced algorithm and the default are timed over repetitions and
compared (collbench compare); the file matches where it is not significantly different from
the forced algorithm, and the proof is conclusive where the default differs.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from collbench.analyse.compare import compare
from collbench.catalog.algorithms import Catalog
from collbench.catalog.collectives import COLLECTIVES, RulesBytes, rules_bytes
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.kernel.build import KernelBuildError
from collbench.tune import campaign, shim
from collbench.tune.han import HanRules
from collbench.tune.han import activation as han_activation
from collbench.tune.rules import COLLTYPES, CommRules, MsgRule, RulesFile
from collbench.tune.writer import activation

TRACE_ITERATIONS: Final = 3
MAX_BYTES: Final = 256 * 2**20  # skip boundary points whose buffers would exceed this
RULES_ARM: Final = "rules-file"


@dataclass(frozen=True)
class Boundary:
    collective: str
    nprocs: int
    size: int  # bytes per rank (OSU)
    nbytes: int  # as the rules count it
    rule: MsgRule  # the rule Open MPI should pick
    comm_size: int  # key of the rule set picked
    component: str | None = None  # what the han file hands the communicator to (--han)


@dataclass
class Outcome:
    point: Boundary
    expected: str
    ran: str  # with the file
    default: str  # without the file
    ok: bool | None  # None: inconclusive (timing method)
    detail: str = ""
    served: str = ""  # the component that served it with the files (the kernel's probe)


@dataclass
class Verification:
    method: str  # "trace" or "timing"
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    why_method: str = ""
    how: str = ""  # what the trace method traced, where not Open MPI's algtrace

    @property
    def mismatches(self) -> int:
        return sum(o.ok is False for o in self.outcomes)


# --- what Open MPI looks up ---------------------------------------------------------------

def comm_set(rules: RulesFile, coll_id: int, nprocs: int) -> CommRules | None:
    """The set Open MPI 5.0 uses: the last one, scanning in order, whose key <= nprocs
    (stopping at the first larger key); the first set also serves smaller communicators."""
    coll = rules.find(coll_id)
    if coll is None or not coll.comms:
        return None
    best = coll.comms[0]
    for comm in coll.comms:
        if comm.comm_size > nprocs:
            break
        best = comm
    return best


def message_rule(comm: CommRules, nbytes: int) -> MsgRule:
    """The last rule, scanning in order, whose size <= nbytes (stopping at the first larger)."""
    best = comm.rules[0]
    for r in comm.rules:
        if r.size > nbytes:
            break
        best = r
    return best


def per_rank_sizes(collective: str, nbytes: int, nprocs: int) -> tuple[int, int]:
    """(smallest per-rank size counted >= nbytes, largest counted < nbytes)."""
    kind = COLLECTIVES[collective].rules_bytes
    if kind in (RulesBytes.TIMES_P, RulesBytes.SUM_COUNTS):
        return math.ceil(nbytes / nprocs), (nbytes - 1) // nprocs
    if collective == "reduce_scatter_block":
        return math.ceil(nbytes / nprocs) * nprocs, (nbytes - 1) // nprocs * nprocs
    return nbytes, nbytes - 1


def boundaries(rules: RulesFile, nprocs_list: Sequence[int], han: HanRules | None = None
               ) -> tuple[list[Boundary], list[str]]:
    points: list[Boundary] = []
    skipped: list[str] = []
    for coll in rules.collectives:
        name = COLLTYPES[coll.coll_id]
        if name not in COLLECTIVES:
            skipped.append(f"{name}: the kernel does not measure it")
            continue
        least = COLLECTIVES[name].min_size
        for nprocs in nprocs_list:
            comm = comm_set(rules, coll.coll_id, nprocs)
            if comm is None:
                continue
            sizes: set[int] = set()
            if COLLECTIVES[name].rules_bytes is RulesBytes.ZERO:
                sizes.add(least)
            for r in comm.rules:
                at, below = per_rank_sizes(name, r.size, nprocs)
                sizes |= {s for s in (at, below) if s >= least}
            for h in _han_sizes(han, name, nprocs):  # han counts OSU's bytes per rank
                sizes |= {s for s in (h, h - 1) if s >= least}
            sizes.add(max(least, nprocs if name == "reduce_scatter_block" else least))
            for size in sorted(sizes):
                nbytes = rules_bytes(name, size, nprocs)
                if nbytes > MAX_BYTES or size * nprocs > MAX_BYTES:
                    skipped.append(f"{name} np={nprocs} size {size}: above "
                                   f"{MAX_BYTES >> 20} MiB, not run")
                    continue
                points.append(Boundary(name, nprocs, size, nbytes,
                                       message_rule(comm, nbytes), comm.comm_size,
                                       han.component(name, nprocs, size) if han else None))
    return points, skipped


def _han_sizes(han: HanRules | None, collective: str, nprocs: int) -> list[int]:
    """The message-size thresholds of the han rules that apply at this communicator size."""
    if han is None:
        return []
    out = []
    for c in han.collectives:
        for lv in c.levels if c.collective == collective else ():
            configs = [x for x in lv.configs if x.size <= nprocs and
                       lv.name == "global_communicator"]
            if configs:
                out += [r.size for r in configs[-1].rules if r.size > 0]
    return out


# --- running ------------------------------------------------------------------------------

def _traced_run(mpi: MpiInstall, library: Path, work: Path, label: str, nprocs: int,
                points: Sequence[Boundary], mca: Sequence[tuple[str, str]],
                timeout: float, hosts: campaign.Hosts | None = None
                ) -> tuple[list[shim.Trace], dict[tuple[str, int], str]]:
    """One launch of the kernel whose ranks (not mpirun) preload the algtrace library, run
    as a campaign of its own in work/np<N>-<label>; the traces of its ranks, and the
    component each (collective, size) row says served it."""
    jobs = [campaign.point(p.collective, "default", 0, p.size, TRACE_ITERATIONS, 1)
            for p in points if p.nprocs == nprocs]
    la = campaign.launch(nprocs, jobs, mca, "none", 0, timeout, hosts=hosts)
    folder, prefix = work / f"np{nprocs}-{label}", work / f"np{nprocs}-{label}.trace"
    shutil.rmtree(folder, ignore_errors=True)  # traces are taken afresh each time
    env = shutil.which("env") or "/usr/bin/env"
    name = f"rules-verify-trace-np{nprocs}-{label}"
    store, summary = campaign.run(
        folder, name, 0, [la], mpi,
        campaign.spec_text("generated by collbench rules verify (trace method)", name, [la], 0,
                           hosts),
        str(folder), wrapper=(env, f"LD_PRELOAD={library}", f"{shim.ENV_VAR}={prefix}"),
        hosts=hosts)
    if summary.by_status.get("ok") != 1:
        errors = [str(r.get("error")) for f in store.launch_files()
                  for r in map(json.loads, f.read_text().splitlines()) if r.get("error")]
        tail = (errors[-1].splitlines() or [""])[-1] if errors else ""
        raise UserError(f"rules verify: the traced kernel run failed "
                        f"({', '.join(summary.by_status)}, np={nprocs}): {tail}")
    served = {(str(r["collective"]), int(r["size_bytes"])): str(r.get("component") or "")
              for f in store.launch_files() for r in map(json.loads, f.read_text().splitlines())}
    return shim.read_traces(prefix, range(nprocs)), served


def _seen(traces: Sequence[shim.Trace], coll: str, nbytes: int,
          nprocs: int) -> set[tuple[int, int, int]]:
    """Decisions on the measured communicator (its size: coll/han's sub-communicators,
    where tuned also decides, are smaller)."""
    return {(c.algorithm, c.faninout, c.segsize) for t in traces for c in t.calls
            if not c.world and c.collective == coll and c.bytes == nbytes
            and c.comm_size in (nprocs, 0)}


def _name(catalog: Catalog, coll: str, alg: int) -> str:
    if alg == 0:
        return "0 (Open MPI's choice)"
    for a in catalog.of(coll):
        if a.id == alg:
            return f"{alg} {a.name}"
    return f"{alg} (unknown)"


def _describe(catalog: Catalog, coll: str, calls: set[tuple[int, int, int]]) -> str:
    if not calls:
        return "not seen"
    return " | ".join(f"{_name(catalog, coll, a)}" + (f" f={f}" if f else "")
                      + (f" seg={s}" if s else "") for a, f, s in sorted(calls))


def by_trace(rules: RulesFile, path: Path, points: Sequence[Boundary], mpi: MpiInstall,
             catalog: Catalog, extra_mca: Sequence[tuple[str, str]], timeout: float,
             work: Path, hosts: campaign.Hosts | None = None,
             han_path: Path | None = None) -> Verification | None:
    """The trace method; None where no call was intercepted (then use the timing method)."""
    library = shim.build_shim(mpi.mpicc)
    base = [*extra_mca]
    files = [*activation(path), *(han_activation(han_path) if han_path else [])]
    if hosts is None and any(p.nprocs > (os.cpu_count() or 1) for p in points):
        # Not a measurement: yielding keeps oversubscribed ranks from crawling.
        base.append(("mpi_yield_when_idle", "1"))
    result = Verification("trace")
    for nprocs in sorted({p.nprocs for p in points}):
        here = [p for p in points if p.nprocs == nprocs]
        with_file, served = _traced_run(mpi, library, work, "rules", nprocs, here,
                                        [*base, *files], timeout, hosts)
        without, _ = _traced_run(mpi, library, work, "default", nprocs, here, base, timeout,
                                 hosts)
        if not any(c for t in with_file + without for c in t.calls if not c.world):
            return None
        for p in here:
            seen = _seen(with_file, p.collective, p.nbytes, nprocs)
            default = _seen(without, p.collective, p.nbytes, nprocs)
            ran_by = served.get((p.collective, p.size), "")
            outcome = (_judge_han(p, seen, ran_by, catalog) if p.component is not None
                       else _judge(p, seen, default, catalog))
            result.outcomes.append(replace(outcome, served=ran_by))
    return result


def _judge_han(p: Boundary, seen: set[tuple[int, int, int]], served: str,
               catalog: Catalog) -> Outcome:
    """With han's file: the component it names must serve the measured communicator, and
    where that is coll/tuned, the tuned file's rule must run on it."""
    r = p.rule
    if p.component != "tuned":
        ok = served == p.component
        return Outcome(p, f"coll/{p.component}", _describe(catalog, p.collective, seen), "-",
                       ok, "" if ok else f"coll/{served or '?'} served it, not "
                       f"coll/{p.component}")
    expected = f"coll/tuned: {_name(catalog, p.collective, r.alg)}" + (
        f" f={r.faninout}" if r.faninout else "") + (f" seg={r.segsize}" if r.segsize else "")
    ran = _describe(catalog, p.collective, seen)
    if served != "tuned":
        return Outcome(p, expected, ran, "-", False,
                       f"coll/{served or '?'} served it, not coll/tuned")
    if len(seen) != 1:
        return Outcome(p, expected, ran, "-", False,
                       "no tuned decision on the measured communicator" if not seen else
                       "ranks or calls disagree")
    (alg, fan, seg), = seen
    ok = not r.alg or (alg, fan, seg) == (r.alg, r.faninout, r.segsize)
    return Outcome(p, expected, ran, "-", ok, "" if ok else "the file's rule was not run")


def _judge(p: Boundary, seen: set[tuple[int, int, int]], default: set[tuple[int, int, int]],
           catalog: Catalog) -> Outcome:
    r = p.rule
    expected = (f"{_name(catalog, p.collective, r.alg)}" + (f" f={r.faninout}" if r.faninout
                                                               else "")
                + (f" seg={r.segsize}" if r.segsize else ""))
    ran, dflt = _describe(catalog, p.collective, seen), _describe(catalog, p.collective, default)
    if not seen:
        return Outcome(p, expected, ran, dflt, False, "no call with these bytes was traced")
    if len(seen) > 1:
        return Outcome(p, expected, ran, dflt, False, "ranks or calls disagree")
    (alg, fan, seg), = seen
    if r.alg:
        ok = (alg, fan, seg) == (r.alg, r.faninout, r.segsize)
        return Outcome(p, expected, ran, dflt, ok, "" if ok else "the file's rule was not run")
    ok = {a for a, _, _ in seen} == {a for a, _, _ in default}
    return Outcome(p, expected, ran, dflt, ok,
                   "" if ok else "ALG 0 should run what Open MPI runs without the file")


def by_timing(path: Path, points: Sequence[Boundary], mpi: MpiInstall, catalog: Catalog,
              repetitions: int, timeout: float, work: Path, why: str) -> Verification:
    """The timing method: file vs forced algorithm vs default, compared over repetitions."""
    result = Verification("timing", why_method=why)
    tested = [p for p in points if p.rule.alg]
    for p in points:
        if not p.rule.alg:
            result.outcomes.append(Outcome(p, "0 (Open MPI's choice)", "-", "-", True,
                                           "ALG 0: nothing to time"))
    if not tested:
        return result
    launches = []
    for rep in range(repetitions):
        for nprocs in sorted({p.nprocs for p in tested}):
            here = [p for p in tested if p.nprocs == nprocs]
            file_mca = [("coll_tuned_use_dynamic_rules", "1"), *activation(path)[1:]]
            launches.append(campaign.launch(nprocs, [
                campaign.point(p.collective, RULES_ARM, 0, p.size) for p in here], file_mca,
                "launch", rep, timeout))
            launches.append(campaign.launch(nprocs, [
                campaign.point(p.collective, "default", 0, p.size) for p in here],
                [("coll_tuned_use_dynamic_rules", "0"), *activation(path)[1:]], "none", rep,
                timeout))
            for p in here:
                name = _name(catalog, p.collective, p.rule.alg).split(" ", 1)[-1]
                launches.append(campaign.launch(nprocs, [campaign.point(
                    p.collective, name, p.rule.alg, p.size, segsize=p.rule.segsize,
                    fanout=p.rule.faninout)], file_mca + _forcing(p), "launch", rep, timeout))
    text = campaign.spec_text("generated by collbench rules verify (timing method)",
                              "rules-verify", launches, 0)
    store, _ = campaign.run(work / "timing", "rules-verify", 0, launches, mpi, text, str(path))
    cmp = compare(store, baseline=RULES_ARM)
    for p in tested:
        rs = [r for r in cmp.ratios if r.point.collective == p.collective
              and r.point.nprocs == p.nprocs and r.point.size_bytes == p.size]
        forced = next((r for r in rs if r.point.algorithm != "default"), None)
        default = next((r for r in rs if r.point.algorithm == "default"), None)
        expected = _name(catalog, p.collective, p.rule.alg)
        if forced is None or default is None:
            result.outcomes.append(Outcome(p, expected, "not measured", "-", False))
            continue
        ran = f"{forced.ratio:.2f}x forced" + (" (differs)" if forced.significant else "")
        dflt = f"{default.ratio:.2f}x" + (" (differs)" if default.significant else "")
        ok = None if not default.significant and not forced.significant else \
            not forced.significant
        result.outcomes.append(Outcome(p, expected, ran, dflt, ok, "" if ok is not None else
                                       "default and forced time alike: not conclusive"))
    return result


def _forcing(p: Boundary) -> list[tuple[str, str]]:
    prefix = f"coll_tuned_{p.collective}_algorithm"
    mca = [(prefix, str(p.rule.alg))]
    if p.rule.segsize:
        mca.append((f"{prefix}_segmentsize", str(p.rule.segsize)))
    if p.rule.faninout:
        mca += [(f"{prefix}_chain_fanout", str(p.rule.faninout)),
                (f"{prefix}_tree_fanout", str(p.rule.faninout))]
    return mca


def verify(rules: RulesFile, path: Path, nprocs_list: Sequence[int], mpi: MpiInstall,
           catalog: Catalog, *, method: str = "auto", repetitions: int = 5,
           timeout: float = 300, extra_mca: Sequence[tuple[str, str]] = (),
           keep: Path | None = None,
           log: Callable[[str], None] = lambda s: None,
           hosts: campaign.Hosts | None = None,
           han: tuple[HanRules, Path] | None = None) -> Verification:
    points, skipped = boundaries(rules, nprocs_list, han[0] if han else None)
    if (han or hosts) and method == "timing":
        raise UserError("rules verify: --method timing works on this machine and with coll/"
                        "tuned's file only; valid: --method trace (or auto) with --han or "
                        "--hostfile")
    if not points:
        raise UserError(f"{path}: no collective in the file that collbench measures at "
                        f"np={','.join(map(str, nprocs_list))}; nothing to verify")
    work = keep or Path(tempfile.mkdtemp(prefix="collbench-verify-"))
    try:
        result: Verification | None = None
        why = ""
        if method in ("auto", "trace"):
            if mpi.implementation != "openmpi":
                why = f"{mpi.implementation} is not Open MPI: no do_this to intercept"
            else:
                try:
                    result = by_trace(rules, path, points, mpi, catalog, extra_mca, timeout,
                                      work, hosts, han[1] if han else None)
                    why = "" if result else "algtrace intercepted no call"
                except KernelBuildError as e:
                    why = f"the algtrace library did not build: {str(e).splitlines()[0]}"
            if result is None and method == "trace":
                raise UserError(f"rules verify: --method trace cannot work here: {why}")
        if result is None and (han or hosts):
            raise UserError(f"rules verify: the trace method cannot work here ({why}), and "
                            "the timing method does not run with --han or --hostfile; valid: "
                            "an Open MPI whose coll/tuned calls the algtrace library sees")
        if result is None:
            log(f"timing method: {why or 'asked for'}")
            result = by_timing(path, points, mpi, catalog, repetitions, timeout, work, why)
        result.skipped += skipped
        return result
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def render(v: Verification) -> str:
    from collbench.tables import text_table

    rows = [{"collective": o.point.collective, "np": o.point.nprocs,
             "size/rank": o.point.size, "rules bytes": o.point.nbytes,
             "set": o.point.comm_size, "file says": o.expected,
             "ran" if v.method == "trace" else "file vs forced": o.ran,
             "without file" if v.method == "trace" else "default vs file": o.default,
             "ok": {True: "yes", False: "NO", None: "?"}[o.ok], "note": o.detail,
             **({"served by": o.served} if any(x.point.component for x in v.outcomes)
                else {})}
            for o in v.outcomes]
    cols = list(rows[0]) if rows else []
    how = v.how or ("method: trace (algtrace LD_PRELOAD: the algorithm each "
                    "ompi_coll_tuned_<coll>_intra_do_this call received)"
                    if v.method == "trace" else
                    "method: timing (file vs forced algorithm vs default, compared over "
                    "repetitions)"
                    f"{'; ' + v.why_method if v.why_method else ''}")
    out = [how, "", text_table(rows, cols), ""]
    out += [f"skipped: {s}" for s in v.skipped]
    inconclusive = sum(o.ok is None for o in v.outcomes)
    if v.mismatches:
        out.append(f"MISMATCH: {v.mismatches} of {len(v.outcomes)} points did not run what "
                   "the file says")
    else:
        out.append(f"verified: {len(v.outcomes) - inconclusive} of {len(v.outcomes)} points "
                   "run what the file says" + (f"; {inconclusive} inconclusive"
                                               if inconclusive else ""))
    return "\n".join(out) + "\n"
