"""`collbench rules verify --impi FILE -n N`: prove, size by size, that Intel MPI runs the
preset an I_MPI_TUNING file names.

Intel MPI reports no algorithm (I_MPI_DEBUG at levels 5 to 1000 names none), so the kernel
runs under the impitrace LD_PRELOAD library (impitrace.c), which puts breakpoints on the
algorithm functions of Intel's libmpi (from its symbol table) and records the ones each
measured call runs. Each preset leaves its own set of functions: at 2 ranks on one node,
bcast 16 KiB runs MPIR_Bcast_intra_binomial under presets 1, 4, 7 and the default,
..._scatter_ring_allgather under 3 and 6 (2021.18.1). For every point the kernel runs three
ways: with the file, with the preset the file names forced (I_MPI_ADJUST_<COLL>, the
fallback check on) and with neither. The file's rule took effect where the file's run calls
the forced preset's functions; the proof is conclusive where the default calls others. A
rule of preset 0 (Intel's own choice) must run the default's functions.

Points: for each collective of the file and each -n, every msg_size key of the rules that
apply (Intel's lookup: tune/impi_check.rule_for) and the size just above it, plus the
collective's smallest size: the sizes where a wrong reading of the file would show.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.buildcache import cache_key, cached_build
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.impi import FALLBACK_VAR, PRESET, adjust_var
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.kernel.build import KernelBuildError, mpi_fingerprint
from collbench.plan import Launch
from collbench.tune import campaign
from collbench.tune.impi import COLL_NAMES, activation
from collbench.tune.impi_check import Reading, rule_for
from collbench.tune.rules import MsgRule
from collbench.tune.verify import Boundary, Outcome, Verification

SOURCE_NAME: Final = "impitrace.c"
LIBRARY_NAME: Final = "libimpitrace.so"
ENV_VAR: Final = "COLLBENCH_IMPITRACE"
COLLS_VAR: Final = "COLLBENCH_IMPITRACE_COLLS"
TRACE_ITERATIONS: Final = 3
MAX_SIZE: Final = 64 << 20  # a boundary above this is not run
HOW: Final = ("method: trace (impitrace LD_PRELOAD: breakpoints on the algorithm functions of "
              "Intel's libmpi); ran: the functions the file's run called, which must be those "
              "of the preset it names, forced by I_MPI_ADJUST_<COLL>; without file: Intel "
              "MPI's default")

Seen = dict[tuple[str, int], frozenset[str]]  # (collective, bytes) -> functions called
TRACED: Final = ("allgather", "allreduce", "alltoall", "barrier", "bcast", "gather", "reduce",
                 "reduce_scatter_block", "scatter")  # the collectives impitrace.c wraps
# Every traced run watches the algorithms of all of them: a preset may run another
# collective's algorithm inside its call (allreduce preset 3, Reduce + Bcast, calls
# Bcast_intra_* functions, 2021.18.1), which a watch of allreduce alone would not see.
WATCHED: Final = ",".join(COLL_NAMES[c] for c in TRACED)


@dataclass(frozen=True)
class Arm:
    label: str
    launches: tuple[Launch, ...]


def build_library(mpicc: Path, cache_dir: Path | None = None) -> Path:
    """Compile libimpitrace.so with Intel MPI's wrapper compiler (cached like the kernel)."""
    from importlib import resources

    src = Path(str(resources.files("collbench.tune").joinpath(SOURCE_NAME)))
    return cached_build(
        "impitrace", LIBRARY_NAME, cache_key(mpi_fingerprint(mpicc), src.read_bytes()),
        lambda out: [str(mpicc), "-shared", "-fPIC", "-O2", "-Wall", "-o", str(out), str(src)],
        "the impitrace library", cache_dir, error=KernelBuildError).path


def parse_trace(text: str, nprocs: int) -> Seen:
    """The functions each (collective, bytes) call on the measured communicator ran (a dup
    of MPI_COMM_WORLD of `nprocs` ranks; the kernel's bookkeeping runs on the world)."""
    out: dict[tuple[str, int], set[str]] = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) != 7 or f[1] != "D" or not f[3].isdigit() or not f[4].isdigit() \
                or len(f[3]) > 15 or len(f[4]) > 9:  # bytes and ranks beyond belief
            continue
        if int(f[4]) == nprocs and f[2] in COLLECTIVES:
            out.setdefault((f[2], int(f[3])), set()).add(f[5][:200])
    return {k: frozenset(v) for k, v in out.items()}


def boundaries(reading: Reading, nprocs_list: Sequence[int]) -> tuple[list[Boundary], list[str]]:
    points: list[Boundary] = []
    skipped: list[str] = []
    for coll in sorted({e.collective for e in reading.entries}):
        if coll not in COLLECTIVES:
            skipped.append(f"{coll}: the kernel does not measure it")
            continue
        least = COLLECTIVES[coll].min_size
        keys = {e.msg_size for e in reading.entries if e.collective == coll and e.reached}
        sizes = {least} | {s for k in keys if k >= 0 for s in (k, k + 1) if s >= least}
        for nprocs in nprocs_list:
            for size in sorted(sizes):
                if size * nprocs > MAX_SIZE:
                    skipped.append(f"{coll} np={nprocs} size {size}: above "
                                   f"{MAX_SIZE >> 20} MiB, not run")
                    continue
                preset = rule_for(reading.entries, coll, nprocs, size)
                if preset is None:
                    continue
                comm = next((e.comm_size for e in reading.entries if e.collective == coll
                             and e.reached and (e.comm_size in (-1, nprocs))), -1)
                points.append(Boundary(coll, nprocs, size, size, MsgRule(size, preset, 0, 0),
                                       comm))
    return points, skipped


def _launch(nprocs: int, ps: Sequence[Boundary], timeout: float, algorithm: str = "default",
            alg_id: int = 0, env: Sequence[tuple[str, str]] = ()) -> Launch:
    return campaign.launch(nprocs, [campaign.point(p.collective, algorithm, alg_id or None,
                                                   p.size, TRACE_ITERATIONS, 1) for p in ps],
                           (), "none", 0, timeout, env=env)


def _forced(path: Path, label: str, ps: Sequence[Boundary], nprocs: int,
            timeout: float) -> Arm:
    """The points' preset forced as a campaign forces it, with the file loaded too:
    I_MPI_ADJUST_<COLL> wins over the file (2021.18.1: bcast and allreduce), so a preset
    that runs another collective inside (allreduce's Reduce + Bcast) runs it as the file's
    run does."""
    coll, preset = ps[0].collective, ps[0].rule.alg
    forcing = [*activation(path), (adjust_var(coll), str(preset)), (FALLBACK_VAR, "1")]
    return Arm(label, (_launch(nprocs, ps, timeout, f"{PRESET}{preset}", preset, forcing),))


def _arms(path: Path, points: Sequence[Boundary], nprocs: int, timeout: float) -> list[Arm]:
    """The file's run, the default's and one forced run per (collective, preset)."""
    here = [p for p in points if p.nprocs == nprocs]
    arms = [Arm("file", (_launch(nprocs, here, timeout, env=activation(path)),)),
            Arm("default", (_launch(nprocs, here, timeout),))]
    for coll, preset in sorted({(p.collective, p.rule.alg) for p in here if p.rule.alg}):
        ps = [p for p in here if (p.collective, p.rule.alg) == (coll, preset)]
        arms.append(_forced(path, f"{coll}-{PRESET}{preset}", ps, nprocs, timeout))
    return arms


def traced_run(mpi: MpiInstall, library: Path, work: Path, arm: Arm, nprocs: int,
            colls: str) -> tuple[Seen, str]:
    """The arm's functions per point, or ({}, why) where its launch failed (a forced preset
    that cannot run here: the fallback check stops it, and its reason says so)."""
    folder, prefix = work / f"np{nprocs}-{arm.label}", work / f"np{nprocs}-{arm.label}.trace"
    shutil.rmtree(folder, ignore_errors=True)
    env = shutil.which("env") or "/usr/bin/env"
    name = f"rules-verify-impi-np{nprocs}-{arm.label}"
    store, summary = campaign.run(
        folder, name, 0, list(arm.launches), mpi,
        campaign.spec_text("generated by collbench rules verify --impi", name,
                           arm.launches, 0), str(folder),
        wrapper=(env, f"LD_PRELOAD={library}", f"{ENV_VAR}={prefix}", f"{COLLS_VAR}={colls}"))
    if summary.by_status.get("ok") != len(arm.launches):
        errors = [str(r.get("error")) for f in store.launch_files()
                  for r in map(json.loads, f.read_text().splitlines()) if r.get("error")]
        return {}, ((errors[-1].splitlines() or [""])[-1] if errors else "the launch failed")
    seen: Seen = {}
    for rank in range(nprocs):
        trace = Path(f"{prefix}.{rank}")
        if trace.exists():
            for key, fns in parse_trace(trace.read_text(errors="replace"), nprocs).items():
                seen[key] = seen.get(key, frozenset()) | fns
    return seen, ""


def short_names(fns: frozenset[str]) -> str:
    """'Bcast_intra_binomial Bcast_intra_knomial': the functions, sorted, without MPIR_."""
    return " ".join(sorted(f.removeprefix("MPIR_").removeprefix("MPIDI_") for f in fns))


def _text(fns: frozenset[str] | None) -> str:
    return "-" if fns is None else short_names(fns) or "not seen"


def judge(p: Boundary, ran: frozenset[str] | None, forced: frozenset[str] | None,
          default: frozenset[str] | None, forced_failed: str = "") -> Outcome:
    preset = p.rule.alg
    expected = f"{PRESET}{preset}" if preset else "0 (Intel MPI's choice)"
    if forced_failed and preset:  # the reason, also where the file's run fell back unseen
        return Outcome(p, expected, _text(ran), _text(default), False,
                       f"forced alone it does not run here: {forced_failed[:300]}")
    if not ran and preset and not forced and default:  # both ran functions it does not watch
        return Outcome(p, expected, _text(ran), _text(default), None,
                       "neither the file's run nor the forced preset's called a function "
                       "impitrace watches: not conclusive")
    if not ran:
        return Outcome(p, expected, _text(ran), _text(default), False,
                       "no call with these bytes was traced")
    if preset == 0:
        same = ran == default
        return Outcome(p, expected, _text(ran), _text(default), same,
                       "" if same else "preset 0 should run what Intel MPI runs without the file")
    if not forced:
        return Outcome(p, expected, _text(ran), _text(default), False,
                       "the forced preset's run traced no call")
    ok: bool | None = ran == forced
    detail = "" if ok else f"the forced preset runs {_text(forced)}"
    if ok and forced == default:
        ok, detail = None, "the preset runs the default's functions here: not conclusive"
    return Outcome(p, expected, _text(ran), _text(default), ok, detail)


def verify(reading: Reading, path: Path, nprocs_list: Sequence[int], mpi: MpiInstall, *,
           timeout: float = 300, keep: Path | None = None) -> Verification:
    if mpi.implementation != "impi":
        raise UserError(f"rules verify --impi: --mpi is {mpi.implementation} {mpi.version}; "
                        "valid: an Intel MPI (--mpi impi==VERSION)")
    points, skipped = boundaries(reading, nprocs_list)
    if not points:
        raise UserError(f"{path}: no rule for a collective collbench measures at "
                        f"np={','.join(map(str, nprocs_list))}; nothing to verify")
    try:
        library = build_library(mpi.mpicc)
    except KernelBuildError as e:
        raise UserError(f"rules verify --impi: the impitrace library did not build: "
                        f"{str(e).splitlines()[0]}") from None
    work = keep or Path(tempfile.mkdtemp(prefix="collbench-verify-impi-"))
    result = Verification("trace", how=HOW)
    try:
        for nprocs in sorted({p.nprocs for p in points}):
            runs = {a.label: traced_run(mpi, library, work, a, nprocs, WATCHED)
                    for a in _arms(path, points, nprocs, timeout)}
            for label in ("file", "default"):
                if runs[label][1]:
                    raise UserError(f"rules verify --impi: the traced {label} run failed "
                                    f"(np={nprocs}): {runs[label][1]}")
            if not any(runs["file"][0].values()) and not any(runs["default"][0].values()):
                raise UserError("rules verify --impi: impitrace saw no algorithm function "
                                "(a libmpi without its symbol table?); nothing is proven")
            here = [p for p in points if p.nprocs == nprocs]
            for p in here:
                key = (p.collective, p.size)
                label = f"{p.collective}-{PRESET}{p.rule.alg}"
                forced, failed = runs.get(label, ({}, ""))
                if failed and sum(q.rule.alg == p.rule.alg and q.collective == p.collective
                                  for q in here) > 1:
                    # the forced launch stopped at its first point that cannot run: this
                    # point in a launch of its own (only where one failed)
                    one = f"{label}-{p.size}"
                    if one not in runs:
                        runs[one] = traced_run(mpi, library, work,
                                               _forced(path, one, [p], nprocs, timeout),
                                               nprocs, WATCHED)
                    forced, failed = runs[one]
                result.outcomes.append(judge(p, runs["file"][0].get(key), forced.get(key),
                                             runs["default"][0].get(key), failed))
        result.skipped += skipped
        return result
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)
