"""`tune --impi` where Intel MPI's default won: the preset that runs what the default runs.

Once I_MPI_TUNING names a file, a rule of preset 0 is Intel MPI's generic choice, not its
tuned default (`rules verify --impi`, 2021.18.1: bcast at 2 ranks, 8 KiB to 64 KiB, runs
binomial under a file's 0 and scatter + recursive doubling without a file). A file that
said 0 there would run something never measured. So at every measured size where the
default won, the default and each preset measured there run once more under impitrace
(tune/impi_verify.py), and the file names, size by size, the fastest measured preset whose
functions are the default's. Where no measured preset calls them (Intel's shared-memory
SHMGR bcast at 4 KiB), the file names the fastest measured preset there and the notes say,
per range, how much slower than the default it measured: every rule runs something
measured, and its cost is stated.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from collbench.analyse.compare import PointStat
from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.impi import FALLBACK_VAR, PRESET, adjust_var
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.kernel.build import KernelBuildError
from collbench.plan import Launch
from collbench.tune import campaign
from collbench.tune.impi import COLL_NAMES
from collbench.tune.impi_verify import (
    TRACE_ITERATIONS,
    TRACED,
    WATCHED,
    Arm,
    build_library,
    short_names,
    traced_run,
)
from collbench.tune.select import Choice, Selection

Key = tuple[str, int]  # (collective, nprocs)
Medians = Mapping[tuple[str, int, int], Mapping[int, float]]  # (coll, np, size) -> id -> value
Traced = Mapping[tuple[str, int, int, int], frozenset[str]]  # (coll, np, size, id) -> functions
MAX_NOTE_FNS: Final = 120
SUBSTITUTE: Final = "the fastest measured preset there"  # in a substitute's note


@dataclass(frozen=True)
class Stand:
    """What the file names at one measured size where the default won."""

    size: int
    preset: int
    default_fns: str  # the default's functions there ('' where none was traced)
    same: bool  # the preset calls exactly the default's functions
    ratio: float  # the preset's measured value / the default's (> 1: slower)


def medians(points: Sequence[PointStat]) -> dict[tuple[str, int, int], dict[int, float]]:
    """The measured value per (collective, np, size) and preset id (0: the default); where
    several placements hold a point, the slowest (a substitute is not ranked on luck)."""
    out: dict[tuple[str, int, int], dict[int, float]] = {}
    for p in points:
        if p.n < 1 or p.segsize or p.fanout:
            continue
        text = p.algorithm.removeprefix(PRESET)
        ident = 0 if p.algorithm == DEFAULT else int(text) if text.isdigit() else None
        if ident is None:
            continue
        here = out.setdefault((p.collective, p.nprocs, p.size_bytes), {})
        here[ident] = max(here.get(ident, 0.0), p.value)
    return out


def default_sizes(selection: Selection, measured: Medians) -> dict[Key, list[int]]:
    """Per written collective and np: the measured sizes of the ranges where the default
    won (a collective that kept the default everywhere is not written at all)."""
    changed = {c for (c, _), cs in selection.tables.items() if c in COLL_NAMES
               and any(x.algorithm != DEFAULT for x in cs)}
    out: dict[Key, list[int]] = {}
    for (coll, nprocs), choices in selection.tables.items():
        if coll not in changed:
            continue
        for here, nxt in zip(choices, [*choices[1:], None], strict=True):
            if here.algorithm != DEFAULT:
                continue
            top = nxt.threshold if nxt else 1 << 62
            sizes = sorted(s for c, n, s in measured if (c, n) == (coll, nprocs)
                           and here.threshold <= s < top and 0 in measured[(c, n, s)])
            if not sizes:
                raise UserError(f"tune --impi: {coll} np={nprocs} from {here.threshold} B: "
                                "the default won with no measured size; valid: a "
                                "results folder whose default rows are there")
            out.setdefault((coll, nprocs), []).extend(sizes)
    return out


def trace(mpi: MpiInstall, wanted: Mapping[Key, Sequence[int]], measured: Medians,
          timeout: float = 300) -> Traced:
    """One traced launch of the default per np, and one per (collective, preset measured
    at those sizes), forced as a campaign forces it (fallback check on)."""
    wanted = {k: v for k, v in wanted.items() if k[0] in TRACED}
    if not wanted:
        return {}  # impitrace watches none of them: every default range is a substitute
    try:
        library = build_library(mpi.mpicc)
    except KernelBuildError as e:
        raise UserError(f"tune --impi: the impitrace library did not build: "
                        f"{str(e).splitlines()[0]}") from None
    out: dict[tuple[str, int, int, int], frozenset[str]] = {}
    work = Path(tempfile.mkdtemp(prefix="collbench-tune-impi-"))
    try:
        for nprocs in sorted({n for _, n in wanted}):
            here = {c: s for (c, n), s in wanted.items() if n == nprocs}
            pts = [(c, s) for c, ss in sorted(here.items()) for s in ss]
            arms = [(0, "", Arm("default", (_launch(nprocs, pts, 0, timeout),)))]
            for coll, sizes in sorted(here.items()):
                for ident in sorted({i for s in sizes for i in measured[(coll, nprocs, s)]
                                     if i}):
                    at = [(coll, s) for s in sizes if ident in measured[(coll, nprocs, s)]]
                    arms.append((ident, coll, Arm(f"{coll}-{PRESET}{ident}", (
                        _launch(nprocs, at, ident, timeout),))))
            for ident, coll, arm in arms:
                seen, failed = traced_run(mpi, library, work, arm, nprocs, WATCHED)
                # a preset's failed trace leaves it unmatched: it can only be a substitute,
                # ranked on what the campaign measured of it
                if failed and not ident:
                    raise UserError(f"tune --impi: the traced run of Intel MPI's default "
                                    f"(np={nprocs}) failed: {failed}")
                for c in ([coll] if coll else list(here)):
                    asked = sorted({p.size_bytes for p in arm.launches[0].points
                                    if p.collective == c})
                    for size, fns in _by_size(seen, c, asked).items():
                        out[(c, nprocs, size, ident)] = fns
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not any(v for (*_, i), v in out.items() if i == 0):
        raise UserError("tune --impi: impitrace saw no algorithm function of Intel MPI's "
                        "default (a libmpi without its symbol table?); valid: an Intel MPI "
                        "2021 whose libmpi keeps its symbols, as the PyPI wheels do")
    return out


def _by_size(seen: Mapping[tuple[str, int], frozenset[str]], coll: str,
             sizes: Sequence[int]) -> dict[int, frozenset[str]]:
    """The traced functions per kernel size: impitrace records count x type size, which is
    the kernel's size for most collectives; where no traced byte count is one (a size per
    rank counted otherwise), they pair in order, as tune/impi_decisions.py pairs them."""
    got = sorted(b for c, b in seen if c == coll)
    if not set(sizes) & set(got) and len(got) == len(sizes):
        return {s: seen[(coll, b)] for s, b in zip(sizes, got, strict=True)}
    return {s: seen[(coll, s)] for s in sizes if (coll, s) in seen}


def _launch(nprocs: int, pts: Sequence[tuple[str, int]], ident: int,
            timeout: float) -> Launch:
    env = [(adjust_var(pts[0][0]), str(ident)), (FALLBACK_VAR, "1")] if ident else []
    return campaign.launch(nprocs, [campaign.point(c, f"{PRESET}{ident}" if ident else
                                                   "default", ident or None, s,
                                                   TRACE_ITERATIONS, 1) for c, s in pts],
                           (), "none", 0, timeout, env=env)


def stand(coll: str, nprocs: int, size: int, measured: Medians, traced: Traced) -> Stand:
    """The fastest measured preset that calls the default's functions at this size, else
    the fastest measured preset (a substitute, with its measured cost)."""
    values = measured[(coll, nprocs, size)]
    base = values[0]
    default = traced.get((coll, nprocs, size, 0), frozenset())
    presets = sorted((v, i) for i, v in values.items() if i)
    if not presets:
        raise UserError(f"tune --impi: {coll} np={nprocs} {size} B: the default won and no "
                        "preset was measured there, so no rule can run what was measured; "
                        f"valid: measure presets at this size, or leave {coll} to Intel MPI "
                        "(--collective for the others)")
    same = [(v, i) for v, i in presets if default
            and traced.get((coll, nprocs, size, i)) == default]
    v, i = (same or presets)[0]
    return Stand(size, i, short_names(default), bool(same), v / base if base > 0 else 1.0)


def resolve(selection: Selection, measured: Medians, traced: Traced
            ) -> tuple[Selection, tuple[str, ...]]:
    """The selection with every default range of a written collective replaced by the
    presets chosen size by size (a new range where the choice changes), and one note per
    range saying what was written there and why."""
    tables = dict(selection.tables)
    notes: list[str] = []
    wanted = default_sizes(selection, measured)
    for (coll, nprocs), sizes in wanted.items():
        stands = {s: stand(coll, nprocs, s, measured, traced) for s in sizes}
        out: list[Choice] = []
        old = selection.tables[(coll, nprocs)]
        for here, nxt in zip(old, [*old[1:], None], strict=True):
            if here.algorithm != DEFAULT:
                out.append(here)
                continue
            top = nxt.threshold if nxt else 1 << 62
            mine = [stands[s] for s in sizes if here.threshold <= s < top]
            for k, st in enumerate(mine):
                out.append(Choice(here.threshold if k == 0 else st.size, f"{PRESET}{st.preset}",
                                  st.preset, size_to=st.size, ratio=st.ratio))
            notes += _notes(coll, nprocs, mine)
        tables[(coll, nprocs)] = _merge(out)
    return replace(selection, tables=tables), tuple(notes)


def _merge(choices: Sequence[Choice]) -> tuple[Choice, ...]:
    out: list[Choice] = []
    for c in choices:
        if out and out[-1].algorithm == c.algorithm:
            last = out[-1]
            worst = max((r for r in (last.ratio, c.ratio) if r is not None), default=None)
            out[-1] = replace(last, size_to=max(last.size_to, c.size_to), ratio=worst)
        else:
            out.append(c)
    return tuple(out)


def _notes(coll: str, nprocs: int, stands: Sequence[Stand]) -> list[str]:
    """One line per run of sizes with the same preset and the same kind of match."""
    out: list[str] = []
    groups: list[list[Stand]] = []
    for st in stands:
        if groups and (groups[-1][-1].preset, groups[-1][-1].same,
                       groups[-1][-1].default_fns) == (st.preset, st.same, st.default_fns):
            groups[-1].append(st)
        else:
            groups.append([st])
    for g in groups:
        span = f"{g[0].size} B" if len(g) == 1 else f"{g[0].size}-{g[-1].size} B"
        fns = g[0].default_fns[:MAX_NOTE_FNS]
        head = f"{coll} np={nprocs} {span}: the default won"
        worst = max(st.ratio for st in g)
        if not fns:
            out.append(f"{head}, but impitrace saw none of its functions there, so what it "
                       f"runs is not known; wrote {PRESET}{g[0].preset}, {SUBSTITUTE}, measured "
                       f"{worst:.2f}x the default's time")
        elif g[0].same:
            out.append(f"{head}; wrote {PRESET}{g[0].preset}, which runs the default's "
                       f"functions there ({fns})")
        else:
            out.append(f"{head}, but no measured preset runs what it runs ({fns}); wrote "
                       f"{PRESET}{g[0].preset}, {SUBSTITUTE}, measured "
                       f"{worst:.2f}x the default's time (a file cannot name the default: "
                       "its 0 is Intel MPI's generic choice)")
    return out
