"""Measured data -> the algorithm to use per collective, communicator size and size range.

Public API (used by `collbench tune` and by `tune --adaptive`):

    select(store, options) -> Selection
    select_from(comparison, algorithm_ids, options) -> Selection

A Selection maps (collective, nprocs) to a list of Choice, ascending by `threshold`:
each Choice says "from `threshold` bytes per rank (OSU's count) up to the next Choice's
threshold, run `algorithm` (Open MPI id `algorithm_id`) with `segsize` and `fanout`".
The first threshold is always 0; adjacent sizes with the same choice are merged; a
threshold sits at the first measured size where the new choice wins. "default" (id 0)
means "the MPI's own decision". Thresholds are in bytes per rank as OSU counts them;
`collbench.catalog.collectives.rules_bytes` converts them to what a rules file counts.

Switching away from the default needs evidence: the fastest algorithm must be
significantly faster than the default (collbench compare's exact Mann-Whitney test with
Holm correction and the ratio's confidence interval, docs/statistics.md), and at least
`min_gain` faster. With a single repetition nothing can be tested: select refuses unless
`significance=False`, which takes the fastest algorithm per size untested. Simulated
results (SimGrid) are exact: select takes the fastest per size from one repetition and
says so in its notes ("simulated: exact").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from collbench import points
from collbench.analyse.compare import Best, Comparison, PointStat, RatioStat, block_title, compare
from collbench.analyse.smoothing import Smoothing, smooth
from collbench.analyse.stability import SIMULATED, SIMULATED_NOTICE, noise_evidence
from collbench.catalog import components
from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.collectives import COLLECTIVES
from collbench.errors import UserError
from collbench.records import mpi_implementation
from collbench.store import Store

AlgorithmIds = Mapping[tuple[str, str], int | None]  # (collective, algorithm) -> Open MPI id


@dataclass(frozen=True)
class Options:
    significance: bool = True  # False: take the fastest per size, untested
    confidence: float = 0.95
    min_gain: float = 0.0  # switch only if at least this fraction faster than the default
    stat: str = "avg"  # compared column: avg (OSU's), median, min, max
    collectives: tuple[str, ...] = ()  # empty: every measured collective
    map_by: str | None = None  # pick one placement where several were measured
    bind_to: str | None = None
    max_regret: float = 0.05  # smoothing: accept up to this much slower to switch less


@dataclass(frozen=True)
class Choice:
    threshold: int  # bytes per rank (OSU's count) from which this choice applies
    algorithm: str  # as the MPI spells it; "default" = the MPI's own decision
    algorithm_id: int | None  # Open MPI id (0 = default); None where ids do not exist
    segsize: int = 0
    fanout: int = 0
    size_to: int = 0  # largest measured size this choice covers (for reports)
    ratio: float | None = None  # median time / default's at the sizes covered (worst one)


@dataclass(frozen=True)
class Selection:
    """Per (collective, nprocs): choices ascending by threshold, the first at 0."""

    mpi: str  # implementation that was measured: "openmpi", "mpich", ...
    mpi_version: str
    repetitions: int
    tested: bool  # False: chosen without significance tests
    tables: Mapping[tuple[str, int], tuple[Choice, ...]]
    notes: tuple[str, ...] = field(default_factory=tuple)
    smoothing: Mapping[tuple[str, int], Smoothing] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()  # what weakens the evidence (oversubscription, smoothing)
    # (collective, nprocs) whose default was coll/han's hierarchy (Open MPI 5.0 on several
    # nodes): a coll/tuned rule reaches the top level there only through han's rules file
    han_defaults: frozenset[tuple[str, int]] = frozenset()
    # (collective, nprocs) where a coll/han algorithm (simple@han) won somewhere: every
    # measured size with the han algorithm that won there (None: none did); han's rules
    # file runs it (`han @simple`) where the table keeps the default
    han_picks: Mapping[tuple[str, int], tuple[tuple[int, str | None], ...]] = field(
        default_factory=dict)

    def switches(self) -> int:
        """Number of ranges that leave the default."""
        return sum(c.algorithm != DEFAULT for cs in self.tables.values() for c in cs)


NO_TEST_NOTE: Final = ("{root}: 1 repetition per point, so no difference can be tested; rerun "
                       "with run.repetitions >= 6 (docs/statistics.md), or pass "
                       "--no-significance to take the fastest algorithm per size untested")


def select(store: Store, options: Options = Options()) -> Selection:
    """Compare every algorithm with the default (collbench compare) and choose per size."""
    comparison = compare(store, baseline=DEFAULT, stat=options.stat,
                         confidence=options.confidence)
    simulated = _simulated(store)
    if simulated and options.significance:  # exact figures: nothing to test, no repetitions
        options = replace(options, significance=False)
    if comparison.repetitions < 2 and options.significance:
        raise UserError(NO_TEST_NOTE.format(root=store.root))
    ids, mpi, version = _measured_ids(store)
    selection = select_from(comparison, ids, options, mpi, version)
    if simulated:
        selection = replace(selection, notes=(SIMULATED_NOTE, *selection.notes))
    try:
        cores = store.provenance().get("cores")
    except UserError:
        cores = None
    noisy = None if simulated else noise_evidence(comparison.warnings)
    if noisy:
        selection = replace(selection, evidence=(noisy, *selection.evidence))
    # A simulation's provenance names the host that simulated, not the simulated cores.
    if isinstance(cores, int) and cores > 0 and not simulated:
        over = sorted(f"{c} np={n}" for c, n in selection.tables if n > cores)
        if over:
            selection = replace(selection, evidence=(
                f"measured oversubscribed ({', '.join(over)} on {cores} cores): timings are "
                "noisy and these choices rest on them", *selection.evidence))
    return selection


def select_from(comparison: Comparison, algorithm_ids: AlgorithmIds,
                options: Options = Options(), mpi: str = "openmpi",
                mpi_version: str = "") -> Selection:
    """The choices a Comparison (baseline "default") supports; see the module docstring."""
    if not _is_default(comparison.baseline):
        raise ValueError(f"select needs a comparison against {DEFAULT!r}, "
                         f"not {comparison.baseline!r}")
    notes: list[str] = []
    nonblocking = sorted({b.key[0] for b in comparison.best
                          if b.key[0] in COLLECTIVES and COLLECTIVES[b.key[0]].nonblocking})
    if nonblocking:
        notes.append(f"{', '.join(nonblocking)}: non-blocking; Open MPI's libnbc reads no rules "
                     "file, so they are left out (force their algorithms with "
                     "coll_libnbc_<coll>_algorithm; docs/nonblocking.md)")
    ratios = {id(r.point): r for r in comparison.ratios}
    by_context = _contexts(comparison.best, options)
    tables: dict[tuple[str, int], tuple[Choice, ...]] = {}
    smoothing: dict[tuple[str, int], Smoothing] = {}
    # smoothing may only bridge with what a coll/tuned rule runs: not a han variant
    runnable = replace(comparison, points=tuple(
        p for p in comparison.points if p.label == comparison.baseline
        or _is_default(p.label) or not components.label_suffix(p.component)))
    han_regimes = {(p.collective, p.nprocs) for p in comparison.points
                   if p.algorithm == DEFAULT and p.component == "han"}
    han_picks: dict[tuple[str, int], tuple[tuple[int, str | None], ...]] = {}
    for (coll, nprocs), bests in sorted(by_context.items()):
        won: dict[int, str] | None = {} if (coll, nprocs) in han_regimes else None
        picked = [_pick(b, comparison, ratios, options, notes, won) for b in bests]
        if won:
            han_picks[(coll, nprocs)] = tuple((b.key[7], won.get(b.key[7])) for b in bests)
        if options.max_regret > 0:
            picked, smoothing[(coll, nprocs)] = smooth(
                picked, bests, runnable, ratios, max_regret=options.max_regret,
                min_gain=options.min_gain, significance=options.significance)
        tables[(coll, nprocs)] = _merge(coll, picked, algorithm_ids, mpi)
    if not tables:
        raise UserError("nothing to tune: no measured collective matches "
                        f"{', '.join(options.collectives) or 'the selection'}")
    if any(b.key[2] and b.key[2] > 1 for bs in by_context.values() for b in bs):
        notes.append("measured on several nodes: Open MPI's HAN component hands sub-"
                     "communicators (ranks per node, node count) to coll/tuned, whose rules "
                     "are matched on those sizes, not the job size")
    evidence = tuple(
        f"smoothing: {c} np={n}: {sm.switches_before} -> {sm.switches_after} switches between "
        f"neighbouring sizes, at most {sm.max_regret:.1%} slower than the choice without "
        "smoothing at any size"
        for (c, n), sm in sorted(smoothing.items()) if sm.switches_after < sm.switches_before)
    han = frozenset((p.collective, p.nprocs) for p in comparison.points
                    if p.algorithm == DEFAULT and p.component == "han"
                    and (p.collective, p.nprocs) in tables)
    return Selection(mpi, mpi_version, comparison.repetitions,
                     options.significance and comparison.repetitions >= 2, tables,
                     tuple(dict.fromkeys(notes)), smoothing, evidence, han, han_picks)


# --- helpers ------------------------------------------------------------------------------

SIMULATED_NOTE: Final = (f"{SIMULATED_NOTICE}; the fastest algorithm per size is chosen "
                         "without significance tests")


def _simulated(store: Store) -> bool:
    """Every ok row comes from a simulator (analyse.stability.SIMULATED): exact figures."""
    con = points.connect(store)
    try:
        backends = {str(b) for (b,) in con.execute(
            f"SELECT DISTINCT backend FROM {points.VIEW} WHERE status = 'ok'").fetchall()}
    finally:
        con.close()
    return bool(backends) and backends <= SIMULATED

def _measured_ids(store: Store) -> tuple[dict[tuple[str, str], int | None], str, str]:
    con = points.connect(store)
    try:
        rows = con.execute("SELECT DISTINCT collective, algorithm, algorithm_id, mpi, "
                           f"mpi_version FROM {points.VIEW} WHERE status = 'ok'").fetchall()
    finally:
        con.close()
    ids = {(str(c), str(a)): (int(i) if i is not None else None) for c, a, i, _, _ in rows}
    # the mpi column is the MPI's key (openmpi-4.1.8) since records format 2
    mpis = sorted({(mpi_implementation(str(m)), str(v)) for *_, m, v in rows})
    if len(mpis) > 1:
        raise UserError(f"{store.root}: measurements of several MPIs "
                        f"({', '.join(f'{m} {v}' for m, v in mpis)}); tune one at a time")
    mpi, version = mpis[0] if mpis else ("unknown", "")
    return ids, mpi, version


def _contexts(best: Sequence[Best], options: Options) -> dict[tuple[str, int], list[Best]]:
    """Best per size grouped by (collective, nprocs); one placement/params context each."""
    groups: dict[tuple[str, int], dict[tuple[object, ...], list[Best]]] = {}
    for b in best:
        coll, nprocs, _, _, mapping, binding, _ = b.key[:7]
        if options.collectives and coll not in options.collectives:
            continue
        if coll in COLLECTIVES and COLLECTIVES[coll].nonblocking:
            continue  # libnbc reads no rules file: nothing to tune (select_from says so)
        if options.map_by and mapping != options.map_by:
            continue
        if options.bind_to and binding != options.bind_to:
            continue
        groups.setdefault((coll, nprocs), {}).setdefault(b.key[:7], []).append(b)
    out: dict[tuple[str, int], list[Best]] = {}
    for key, contexts in groups.items():
        if len(contexts) > 1:
            titles = "; ".join(block_title(*k) for k in contexts)  # type: ignore[arg-type]
            raise UserError(
                f"{key[0]} np={key[1]} was measured in {len(contexts)} contexts ({titles}); "
                "a rules file has one table per collective and size: choose one with "
                "--map-by/--bind-to (MCA settings: compare them with `collbench study`)")
        (only,) = contexts.values()
        out[key] = sorted(only, key=lambda b: b.key[7])
    return out


def _pick(b: Best, comparison: Comparison, ratios: Mapping[int, RatioStat],
          options: Options, notes: list[str], han_won: dict[int, str] | None = None
          ) -> tuple[int, PointStat, float | None]:
    """(size, chosen point, its ratio to the default) for one measured size; where a coll/han
    algorithm won and `han_won` is given (han's default measured: han's rules file is
    written), the size -> that algorithm goes into `han_won`."""
    size = b.key[7]
    pts = [p for p in comparison.points if p.size_key == b.key]
    default = next((p for p in pts if p.label == comparison.baseline), None)
    title = f"{block_title(*b.key[:7])} size {size}"
    if not options.significance:
        if not _tuned_can_run(b.winner, default, title, notes, han_won, size):
            assert default is not None
            return size, default, 1.0
        r = ratios.get(id(b.winner))
        return size, b.winner, r.ratio if r else None
    if default is None:
        raise UserError(f"{title}: the default was not measured, so no switch can be tested; "
                        "measure algorithms 'all' (or 'default' beside the others)")
    if b.significant is None and b.winner is not default:
        notes.append(f"{title}: fewer than 2 ok repetitions; kept the default")
        return size, default, 1.0
    chosen = next((p for p in pts if p.label == b.recommended), default)
    if not _tuned_can_run(chosen, default, title, notes, han_won, size):
        return size, default, 1.0
    r = ratios.get(id(chosen))
    if chosen is not default and r is not None and r.ratio > 1 - options.min_gain:
        return size, default, 1.0
    return size, chosen, r.ratio if r else 1.0


def _is_default(label: str) -> bool:
    """'default', or the default served by a component the label names ('default@han')."""
    return label.split("@", 1)[0] == DEFAULT


def _tuned_can_run(chosen: PointStat, default: PointStat | None, title: str,
                   notes: list[str], han_won: dict[int, str] | None = None,
                   size: int = 0) -> bool:
    """Whether a coll/tuned rule can make Open MPI run `chosen`; notes what it takes: a
    coll/han algorithm goes into `han_won` (han's rules file: `han @simple`), another han
    setting is a note with the MCA settings that run it for the whole job."""
    if chosen is default or default is None:
        return True
    setting = components.han_setting_of(chosen.algorithm) \
        if chosen.component == "han" else None
    if setting is not None and han_won is not None and not (
            setting.low or setting.up or chosen.segsize):
        han_won[size] = setting.algorithm
        notes.append(f"{title}: {chosen.label} is fastest; han's rules file runs it there "
                     f"(han @{setting.algorithm}), the coll/tuned rules keep the default")
        return False
    if setting is not None:  # +low/+up/segsize: MCA settings for the whole job
        notes.append(han_setting_note(chosen.collective, chosen.label, setting,
                                      chosen.segsize, title))
        return False
    if components.label_suffix(chosen.component):  # e.g. binomial@han: han's setting
        notes.append(f"{title}: {chosen.label} is fastest, a coll/{chosen.component} setting "
                     "no coll/tuned rules file selects; kept the default")
        return False
    return True


def han_setting_note(collective: str, label: str, setting: components.HanSetting,
                     segsize: int, title: str) -> str:
    """What to run with where a coll/han setting won that han's rules file cannot name (its
    rules choose a component, and han's algorithm, per size; not han's levels or segment
    size): han reads those once per job, for every size and communicator."""
    flags = " ".join(f"--mca {k} {v}" for k, v in setting.mca(collective, segsize).items())
    forced = ", ".join(f"{alg} at the {level} level's" for level, alg in setting.levels.items())
    levels = (f" plus a coll/tuned rules file with {forced} communicator size (docs/"
              "components.md, per-level algorithms)") if forced else ""
    return (f"{title}: {label} is fastest, a coll/han setting that no rules file selects "
            f"(han's rules file picks components and han's algorithm only); kept the default "
            f"in the rules; to "
            f"use it for the whole job (every size): mpirun {flags}{levels}")


def _merge(coll: str, picked: Sequence[tuple[int, PointStat, float | None]],
           ids: AlgorithmIds, mpi: str) -> tuple[Choice, ...]:
    out: list[Choice] = []
    for size, p, ratio in picked:
        alg_id = 0 if p.algorithm == DEFAULT and mpi == "openmpi" else ids.get((coll, p.algorithm))
        here = Choice(0 if not out else size, p.algorithm, alg_id, p.segsize, p.fanout, size,
                      ratio)
        last = out[-1] if out else None
        if last and (last.algorithm, last.segsize, last.fanout) == (p.algorithm, p.segsize,
                                                                    p.fanout):
            worst = max((x for x in (last.ratio, ratio) if x is not None), default=None)
            out[-1] = Choice(last.threshold, last.algorithm, last.algorithm_id, last.segsize,
                             last.fanout, size, worst)
        else:
            out.append(here)
    return tuple(out)
