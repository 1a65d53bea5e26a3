"""Expand a spec into launches (one mpirun each) and points (collective × algorithm × size).

Launch dimensions: nprocs × map_by × bind_to × mca.sweep (cartesian, `zip` groups vary
together) × repetition. Points inside a launch: collective × algorithm variant × size.
How algorithms are forced decides how points are split into launches:

- "mpit": the kernel switches Open MPI algorithms at run time (MPI_T), so one launch holds
  every switchable algorithm, plus default points that need no forcing;
- "launch": one launch per algorithm variant, forced by MCA parameters (Open MPI) or
  MPIR_CVAR_* environment variables (MPICH);
- "none": default algorithms only, nothing forced.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Final

from collbench.catalog import mpich
from collbench.catalog.algorithms import DEFAULT, Algorithm, Catalog
from collbench.catalog.collectives import COLLECTIVES, OSU_BW_WINDOW, Kind, RulesBytes, osu_defaults
from collbench.catalog.openmpi import libnbc_mca
from collbench.errors import UserError, did_you_mean
from collbench.sizes import format_size, parse_size
from collbench.spec import AlgorithmChoice, Spec

PLAN_FORMAT: Final = 2
# What each plan.json format holds; a new format adds a line and a reader for the old one.
PLAN_HISTORY: Final[dict[int, str]] = {
    1: "campaign, seed, backend, launches: [{launch_id, repetition, nprocs, mapping, "
       "binding, oversubscribe, mca, env, swept, selection, timeout_s, validate, samples, "
       "points: [{collective, algorithm, algorithm_id, segsize, fanout, size_bytes, "
       "iterations, warmup}]}]; non-blocking points (ibcast, ...) add test_calls, compute, "
       "hide_steps (absent on the others); a workload launch adds program: {name, args, "
       "params, metrics, primary} (absent on kernel launches)",
    2: "as 1; a launch of a campaign with [measure] mpi adds mpi, the key of the MPI it "
       "runs (openmpi-4.1.8; absent otherwise); "
       "a launch of a campaign with [measure] ppn adds ppn, its ranks per node (absent "
       "otherwise); blocking collective points add timing: \"completion\" ([measure] timing; "
       "absent: osu) and precision, max_iterations, max_seconds ([measure] precision; "
       "absent: fixed counts). Format 1 plans are read as they are.",
}
READABLE_PLAN_FORMATS: Final = (1, 2)
MPIT: Final = "mpit"
LAUNCH: Final = "launch"
NONE: Final = "none"

# Rough cost model for estimate_seconds (Hockney): latency and bandwidth of one step.
ALPHA_S: Final = 2e-6
BETA_BYTES_PER_S: Final = 2e9
OVERSUBSCRIBED_SLOWDOWN: Final = 2.0


@dataclass(frozen=True)
class Point:
    collective: str
    algorithm: str  # as the MPI spells it; "default" = the MPI's own choice
    algorithm_id: int | None  # Open MPI id (0 = default); None where ids do not exist
    segsize: int  # 0 = unsegmented / MPI default
    fanout: int  # 0 = MPI default
    size_bytes: int
    iterations: int
    warmup: int
    # Non-blocking collectives only (None/0 on the others): the kernel's job-line options.
    test_calls: int | None = None  # MPI_Test calls in the compute phase (OSU -t)
    compute: str | None = None  # "auto", "<v>us" or "<v>x"
    hide_steps: int = 0  # steps of the max-hideable-compute sweep (0: none)
    # Blocking collectives: "completion" also runs the synchronised-start loop.
    timing: str = "osu"
    # Blocking collectives: iterate until the median's CI is within +-precision (None: the
    # fixed `iterations`, which is then the first batch), at most max_* of each.
    precision: float | None = None
    max_iterations: int = 0
    max_seconds: float = 0.0

    def job_line(self) -> str:
        line = (f"{self.collective} {self.algorithm_id or 0} {self.segsize} {self.fanout} "
                f"{self.size_bytes} {self.iterations} {self.warmup}")
        if self.timing != "osu":
            line += f" timing={self.timing}"
        if self.precision is not None:
            line += (f" precision={self.precision:.6g} max_iterations={self.max_iterations} "
                     f"max_seconds={self.max_seconds:.6g}")
        if self.test_calls is None:
            return line
        return (f"{line} test_calls={self.test_calls} compute={self.compute or 'auto'} "
                f"hide_steps={self.hide_steps}")

    def to_json(self) -> dict[str, Any]:
        """As stored in plan.json: blocking points without the non-blocking keys."""
        d = asdict(self)
        if self.timing == "osu":  # plan.json as before completion timing existed
            del d["timing"]
        if self.precision is None:  # and before precision-driven iterations
            for key in ("precision", "max_iterations", "max_seconds"):
                del d[key]
        if self.test_calls is None:
            for key in ("test_calls", "compute", "hide_steps"):
                del d[key]
        return d

    def work_seconds(self, nprocs: int) -> float:
        """Modelled time of the whole point: (warm-up + iterations) × one iteration; a
        non-blocking point runs the pure loop, the overlapped loop (pure + compute) and
        hide_steps more overlapped loops (compute k/K of the pure time, on average (K+1)/2K)."""
        comm = self.modelled_seconds(nprocs)
        per = comm
        if self.test_calls is not None:
            k = self.hide_steps
            per = (2 + k) * comm + _compute_seconds(self.compute, comm) + (
                comm * (k + 1) / 2 if k else 0.0)
        return (self.iterations + self.warmup) * per

    def modelled_seconds(self, nprocs: int) -> float:
        """Modelled time of one iteration: α·⌈log2 P⌉ + bytes/β, plus OSU's barrier.

        A rough planning aid, not a prediction: bytes is the message size, times P for the
        operations where every rank's block travels (gather, scatter, all-to-all, ...).
        """
        steps = max(1, math.ceil(math.log2(max(nprocs, 2))))
        coll = COLLECTIVES.get(self.collective)
        m = self.size_bytes
        if coll is not None and coll.kind is Kind.P2P:
            if self.collective == "bw":
                return OSU_BW_WINDOW * m / BETA_BYTES_PER_S + 2 * ALPHA_S
            return 2 * (ALPHA_S + m / BETA_BYTES_PER_S)  # ping-pong round trip
        spread = coll is not None and (coll.kind is Kind.ALL or coll.rules_bytes in (
            RulesBytes.TIMES_P, RulesBytes.SUM_COUNTS))
        volume = m * nprocs if spread else m
        return 2 * ALPHA_S * steps + volume / BETA_BYTES_PER_S


def _compute_seconds(compute: str | None, comm_s: float) -> float:
    """The dummy compute of one overlapped iteration: auto = the pure time, <v>x, <v>us."""
    if compute is None or compute == "auto":
        return comm_s
    if compute.endswith("x"):
        return float(compute[:-1]) * comm_s
    return float(compute.removesuffix("us")) * 1e-6


@dataclass(frozen=True)
class ProgramRun:
    """What a workload launch runs instead of the kernel (spec [workload]): the program's
    arguments for this launch, and how its output becomes a row."""

    name: str  # the row's collective column
    args: tuple[str, ...]  # after the executable, placeholders substituted
    params: tuple[tuple[str, str], ...]  # this launch's workload.params, as text, sorted
    metrics: tuple[tuple[str, str], ...] = ()  # (name, regex); empty: a JSON object line
    primary: str | None = None  # the metric stored as avg_us (None: the first usual one)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "args": list(self.args), "params": dict(self.params),
                "metrics": dict(self.metrics), "primary": self.primary}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> ProgramRun:
        return ProgramRun(str(data["name"]), tuple(str(a) for a in data["args"]),
                          tuple(sorted((str(k), str(v)) for k, v in data["params"].items())),
                          tuple((str(k), str(v)) for k, v in data["metrics"].items()),
                          None if data["primary"] is None else str(data["primary"]))


@dataclass(frozen=True)
class Launch:
    launch_id: str  # f"{index:04d}-{sha256(content)[:8]}", index = position in run order
    repetition: int  # 0-based
    nprocs: int
    mapping: str  # --map-by
    binding: str  # --bind-to
    oversubscribe: bool
    mca: tuple[tuple[str, str], ...]  # every --mca pair: fixed + swept + forcing, sorted
    env: tuple[tuple[str, str], ...]  # extra environment (MPICH forcing), sorted
    swept: tuple[tuple[str, str], ...]  # this launch's mca.sweep values, sorted
    selection: str  # "mpit" | "launch" | "none"
    points: tuple[Point, ...]
    timeout_s: float
    validate: bool
    samples: bool
    program: ProgramRun | None = None  # a workload launch: this program, not the kernel
    mpi: str | None = None  # [measure] mpi: the key of the MPI this launch runs with
    ppn: int | None = None  # [measure] ppn: ranks per node (None: the launcher fills slots)

    def job_lines(self) -> list[str]:
        """Kernel job file: `collective algorithm_id segsize fanout size iterations warmup`."""
        return [p.job_line() for p in self.points]

    def estimate_seconds(self, startup_s: float = 1.5) -> float:
        """Rough wall time: start-up plus modelled iterations (see Point.modelled_seconds)."""
        work = sum(p.work_seconds(self.nprocs) for p in self.points)
        return startup_s + work * (OVERSUBSCRIBED_SLOWDOWN if self.oversubscribe else 1.0)

    def to_json(self) -> dict[str, Any]:
        return {
            "launch_id": self.launch_id, "repetition": self.repetition, "nprocs": self.nprocs,
            "mapping": self.mapping, "binding": self.binding,
            "oversubscribe": self.oversubscribe, "mca": dict(self.mca), "env": dict(self.env),
            "swept": dict(self.swept), "selection": self.selection,
            "timeout_s": self.timeout_s, "validate": self.validate, "samples": self.samples,
            "points": [p.to_json() for p in self.points],
            **({"program": self.program.to_json()} if self.program is not None else {}),
            **({"mpi": self.mpi} if self.mpi is not None else {}),
            **({"ppn": self.ppn} if self.ppn is not None else {}),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Launch:
        def pairs(key: str) -> tuple[tuple[str, str], ...]:
            return tuple(sorted((str(k), str(v)) for k, v in data[key].items()))

        return Launch(
            launch_id=str(data["launch_id"]), repetition=int(data["repetition"]),
            nprocs=int(data["nprocs"]), mapping=str(data["mapping"]),
            binding=str(data["binding"]), oversubscribe=bool(data["oversubscribe"]),
            mca=pairs("mca"), env=pairs("env"), swept=pairs("swept"),
            selection=str(data["selection"]), timeout_s=float(data["timeout_s"]),
            validate=bool(data["validate"]), samples=bool(data["samples"]),
            points=tuple(Point(**p) for p in data["points"]),
            program=ProgramRun.from_json(data["program"]) if "program" in data else None,
            mpi=str(data["mpi"]) if data.get("mpi") is not None else None,
            ppn=int(data["ppn"]) if data.get("ppn") is not None else None,
        )


@dataclass(frozen=True)
class Plan:
    campaign: str
    seed: int
    backend: str
    launches: tuple[Launch, ...]
    # What planning left out and why (not stored: the same spec on the same layout says it).
    notes: tuple[str, ...] = field(default=(), compare=False)

    def points_total(self) -> int:
        return sum(len(launch.points) for launch in self.launches)

    def estimate_seconds(self, startup_s: float = 1.5) -> float:
        """Rough total wall time; see Launch.estimate_seconds."""
        return sum(launch.estimate_seconds(startup_s) for launch in self.launches)

    def to_json(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, "campaign": self.campaign, "seed": self.seed,
                "backend": self.backend, "launches": [x.to_json() for x in self.launches]}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Plan:
        """The plan recorded by to_json; UserError when it is not one."""
        if data.get("format") not in READABLE_PLAN_FORMATS:
            raise UserError(f"plan format {data.get('format')!r} is not supported "
                            f"(valid: {', '.join(map(str, READABLE_PLAN_FORMATS))})")
        try:
            return Plan(str(data["campaign"]), int(data["seed"]), str(data["backend"]),
                        tuple(Launch.from_json(x) for x in data["launches"]))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise UserError(f"malformed plan: {type(e).__name__}: {e}") from None


# --- expansion ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Variant:
    algorithm: Algorithm
    segsize: int = 0
    fanout: int = 0


@dataclass(frozen=True)
class _Block:
    """One collective × algorithm variant, sizes ascending (as OSU runs them)."""

    collective: str
    variant: _Variant
    points: tuple[Point, ...]

    @property
    def is_default(self) -> bool:
        return self.variant.algorithm.name == DEFAULT


def _expand_entry(catalog: Catalog, coll: str, entry: AlgorithmChoice,
                  where: str) -> list[_Variant]:
    if entry.is_all():
        return [_Variant(catalog.default(coll)), *(_Variant(a) for a in catalog.of(coll))]
    alg = catalog.resolve(coll, entry.name, where)
    if (entry.segsize or entry.fanout) and not alg.segmentable:
        key = "segsize" if entry.segsize else "fanout"
        valid = [a.name for a in catalog.of(coll) if a.segmentable]
        raise UserError(
            f"{where}.{key}: {alg.name} takes no segment size or fanout ({coll} in "
            f"{catalog.implementation} {catalog.version}); valid: {', '.join(valid) or 'none'}")
    return [_Variant(alg, s, f) for s in entry.segsize or [0] for f in entry.fanout or [0]]


def _tolerated(spec: Spec, mpi: str | None, coll: str, entry: AlgorithmChoice) -> bool:
    """A named algorithm this MPI lacks is left out, not refused, when an exclude entry
    with this MPI's key (and no other key but collective and algorithm) names it."""
    for ex in spec.exclude:
        crit = ex.criteria()
        if mpi is None or mpi not in crit.get("mpi", []) or \
                set(crit) - {"mpi", "collective", "algorithm"}:
            continue
        if coll in crit.get("collective", [coll]) and any(
                str(r).strip().lower() == str(entry.name).strip().lower()
                for r in crit.get("algorithm", [entry.name])):
            return True
    return False


def _in_catalog(catalog: Catalog, coll: str, name: str | int) -> bool:
    try:
        catalog.resolve(coll, name, "")
    except UserError:
        return False
    return True


def _variants(spec: Spec, catalog: Catalog, coll: str, source: str,
              mpi: str | None = None) -> list[_Variant]:
    chosen = spec.measure.algorithms
    if isinstance(chosen, dict):
        entries = chosen.get(coll, [AlgorithmChoice(name=DEFAULT)])
        prefix = f"measure.algorithms.{coll}"
    else:
        entries, prefix = chosen, "measure.algorithms"
    out: list[_Variant] = []
    for i, entry in enumerate(entries):
        if not entry.is_all() and _tolerated(spec, mpi, coll, entry) and \
                not _in_catalog(catalog, coll, entry.name):
            continue
        where = f"{source}: {prefix}[{i}]" + (f" (measure.mpi {mpi})" if mpi else "")
        for v in _expand_entry(catalog, coll, entry, where):
            if v not in out:
                out.append(v)
    return out


def _sizes(spec: Spec, coll: str, source: str) -> list[int]:
    if COLLECTIVES[coll].kind is Kind.SYNC:
        return [0]  # barrier moves no data: one point
    least = COLLECTIVES[coll].min_size
    sizes = [s for s in spec.measure.sizes if s >= least]
    if not sizes:
        raise UserError(f"{source}: measure.sizes: {coll} needs sizes of at least {least} B; "
                        f"got {', '.join(format_size(s) for s in spec.measure.sizes)}")
    return sizes


def _modes(spec: Spec, catalog: Catalog, variants: dict[str, list[_Variant]],
           source: str) -> dict[str, str]:
    """How each collective's non-default algorithms are forced: MPIT or LAUNCH."""
    wanted, impl = spec.run.selection, f"{catalog.implementation} {catalog.version}"
    modes: dict[str, str] = {}
    for coll, vs in variants.items():
        forced = [v.algorithm for v in vs if v.algorithm.name != DEFAULT]
        if wanted == MPIT and forced:
            if catalog.implementation != "openmpi":
                raise UserError(
                    f"{source}: run.selection: 'mpit' needs Open MPI's writable MPI_T control "
                    f"variables; {impl} forces algorithms at launch; valid: auto, launch")
            if not all(a.runtime_switchable for a in forced):
                raise UserError(
                    f"{source}: run.selection: 'mpit' cannot switch {coll} algorithms at run "
                    f"time in {impl} (read-only control variable); valid: auto, launch")
        switchable = catalog.implementation == "openmpi" and all(
            a.runtime_switchable for a in catalog.of(coll))
        modes[coll] = MPIT if wanted == MPIT or (wanted == "auto" and switchable) else LAUNCH
    return modes


def _algorithm_matches(ref: str | int, alg: Algorithm) -> bool:
    if isinstance(ref, int):
        return alg.id == ref
    return ref.strip().lower() in (alg.name.lower(), str(alg.id))


def _check_excluded_algorithms(spec: Spec, variants: list[dict[str, list[_Variant]]],
                               source: str) -> None:
    """Every algorithm an exclude entry names is measured (by at least one MPI)."""
    for i, entry in enumerate(spec.exclude):
        colls = entry.collective or spec.measure.collectives
        measured = [v.algorithm for per in variants for c in colls for v in per[c]]
        names = list(dict.fromkeys(a.name for a in measured))
        for ref in entry.algorithm or []:
            if not any(_algorithm_matches(ref, a) for a in measured):
                raise UserError(
                    f"{source}: exclude[{i}].algorithm: {ref!r} is not measured; valid: "
                    f"{', '.join(names)}{did_you_mean(str(ref), names)}")


def _excluded(criteria: list[dict[str, list[Any]]], at: dict[str, Any], alg: Algorithm) -> bool:
    return any(
        all(any(_algorithm_matches(r, alg) for r in values) if key == "algorithm"
            else at[key] in values for key, values in crit.items())
        for crit in criteria
    )


def _combinations(spec: Spec) -> list[dict[str, Any]]:
    """Every launch-dimension combination (without repetition), zip groups in lockstep."""
    dims = spec.launch_dimensions()
    zipped = {name: tuple(group) for group in spec.zip for name in group}
    groups: list[tuple[str, ...]] = []
    for name in dims:
        group = zipped.get(name, (name,))
        if group not in groups:
            groups.append(group)
    axes = [list(zip(*(dims[n] for n in g), strict=True)) for g in groups]
    return [
        {n: v for g, values in zip(groups, combo, strict=True)
         for n, v in zip(g, values, strict=True)}
        for combo in itertools.product(*axes)
    ]


def _truthy(value: str) -> str:
    low = value.strip().lower()
    return {"true": "1", "yes": "1", "on": "1", "false": "0", "no": "0", "off": "0"}.get(low, low)


def _forcing(selection: str, block: _Block, catalog: Catalog,
             source: str) -> tuple[dict[str, str], dict[str, str]]:
    """(mca, env) that make the MPI run this block's algorithm."""
    if selection == NONE:
        return {}, {}
    # With dynamic rules on, algorithm 0 means "the fixed decision rules", i.e. the default.
    dynamic = {"coll_tuned_use_dynamic_rules": "1"}
    if selection == MPIT:
        return dynamic, {}
    coll, v = block.collective, block.variant
    if v.algorithm.id is None and catalog.implementation == "openmpi":
        return dynamic, {}  # e.g. SMPI's own algorithms: the backend forces those itself
    if catalog.implementation == "openmpi" and COLLECTIVES[coll].nonblocking:
        return {libnbc_mca(coll): str(v.algorithm.id)}, {}  # libnbc: no segsize, fanout
    if catalog.implementation == "openmpi":
        prefix = f"coll_tuned_{coll}_algorithm"
        mca = {**dynamic, prefix: str(v.algorithm.id)}
        if v.segsize:
            mca[f"{prefix}_segmentsize"] = str(v.segsize)
        if v.fanout:
            mca[f"{prefix}_tree_fanout"] = mca[f"{prefix}_chain_fanout"] = str(v.fanout)
            if coll == "bcast":
                mca[f"{prefix}_knomial_radix"] = str(v.fanout)
        return mca, {}
    cvar = COLLECTIVES[coll].mpich_cvar
    if catalog.implementation == "mpich" and cvar:
        # Without these, the ch4 device may override the choice, and an algorithm that
        # cannot run silently falls back to another one, recorded under the wrong name.
        return {}, {cvar: v.algorithm.name, "MPIR_CVAR_DEVICE_COLLECTIVES": "none",
                    "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    raise UserError(f"{source}: measure.algorithms: collbench cannot force {coll} algorithms "
                    f"of {catalog.implementation} {catalog.version}; use 'default'")


def _moves_data(coll: str, size: int, nprocs: int) -> bool:
    # OSU's reduce_scatter_block gives each rank size/P bytes: below P it moves nothing.
    return not (coll in ("reduce_scatter_block", "ireduce_scatter_block") and size < nprocs)


def _check_mca_allowed(spec: Spec, catalog: Catalog, source: str) -> None:
    if (spec.mca.fixed or spec.mca.sweep) and catalog.implementation != "openmpi":
        raise UserError(f"{source}: mca: {catalog.implementation} {catalog.version} has no MCA "
                        "parameters; remove the [mca] table")


def _merge_mca(spec: Spec, swept: dict[str, str], forcing: dict[str, str],
               source: str) -> dict[str, str]:
    user = {**spec.mca.fixed, **swept}
    for key, value in forcing.items():
        if key in user and _truthy(user[key]) != _truthy(value):
            table = "sweep" if key in swept else "fixed"
            raise UserError(
                f"{source}: mca.{table}.{key}: {user[key]!r} conflicts with the algorithm "
                f"forcing ({key} = {value}); leave it to run.selection")
    return {**user, **forcing}


class _Expander:
    """Holds what every launch of one make_plan call shares."""

    def __init__(self, spec: Spec, catalog: Catalog, source: str, cores: int,
                 mpi: str | None = None, nodes: int | None = None) -> None:
        self.spec, self.catalog, self.source, self.cores = spec, catalog, source, cores
        self.mpi = mpi  # the MPI's key in a campaign of several, else None
        self.nodes = nodes  # nodes every launch runs on, when the backend knows it
        # (collective, algorithm) -> process counts the layout rules it out at (`plan` says)
        self.skipped: dict[tuple[str, str], dict[int, None]] = {}
        colls = spec.measure.collectives
        self.variants = {c: _variants(spec, catalog, c, source, mpi) for c in colls}
        self.sizes = {c: _sizes(spec, c, source) for c in colls}
        where = f"{source} (measure.mpi {mpi})" if mpi else source
        self.modes = _modes(spec, catalog, self.variants, where)
        _check_mca_allowed(spec, catalog, where)
        self.criteria = [entry.criteria() for entry in spec.exclude]

    def _point(self, coll: str, v: _Variant, size: int,
               nb: tuple[int, str] | None = None) -> Point:
        it_osu, wu_osu = osu_defaults(coll, size)
        m = self.spec.measure
        point = Point(coll, v.algorithm.name, v.algorithm.id, v.segsize, v.fanout, size,
                      m.iterations.at(size) or it_osu, m.warmup.at(size) or wu_osu)
        if nb is None:
            if COLLECTIVES[coll].kind is Kind.P2P:
                return point
            if m.precision is not None:
                point = replace(point, iterations=m.min_iterations, precision=m.precision,
                                max_iterations=m.max_iterations, max_seconds=m.max_seconds)
            return replace(point, timing=m.timing)
        hide = m.nonblocking.hide if m.nonblocking is not None else 0
        return replace(point, test_calls=nb[0], compute=nb[1], hide_steps=hide)

    def nb_variants(self, coll: str) -> list[tuple[int, str] | None]:
        """(test_calls, compute) of a non-blocking collective's points per size: point
        dimensions, each its own block of ascending sizes; [None] for the others."""
        if not COLLECTIVES[coll].nonblocking:
            return [None]
        nb = self.spec.measure.nonblocking
        return list(nb.variants()) if nb is not None else [(0, "auto")]

    def blocks(self, at: dict[str, Any]) -> list[_Block]:
        out = []
        for coll in self.spec.measure.collectives:
            for v in self.variants[coll]:
                here = {**at, "collective": coll, "segsize": v.segsize, "fanout": v.fanout,
                        "mpi": self.mpi}
                if not self.catalog.applicable(v.algorithm, at["nprocs"]):
                    continue  # e.g. two_proc refuses P != 2: not a measurement, skip it
                if self._cannot_run_here(coll, v.algorithm, at):
                    continue  # e.g. MPICH's smp on one node
                for nb in self.nb_variants(coll):
                    points = tuple(self._point(coll, v, size, nb) for size in self.sizes[coll]
                                   if _moves_data(coll, size, at["nprocs"])
                                   and not _excluded(self.criteria, {**here, "size": size},
                                                     v.algorithm))
                    if points:
                        out.append(_Block(coll, v, points))
        return out

    def _cannot_run_here(self, coll: str, alg: Algorithm, at: Mapping[str, Any]) -> bool:
        """An algorithm the layout rules out: skipped with a reason when "all" brought it,
        refused when the spec names it."""
        if self.catalog.implementation != "mpich":
            return False
        ppn = at.get("ppn")
        nodes = -(-at["nprocs"] // ppn) if ppn else self.nodes
        why = mpich.layout_problem(alg.name, at["nprocs"], nodes)
        if why is None:
            return False
        listed = self.spec.measure.algorithms
        entries = listed.get(coll, []) if isinstance(listed, dict) else listed
        if any(str(e.name).strip().lower() == alg.name for e in entries):
            raise UserError(f"{self.source}: measure.algorithms: {coll} {why}; remove it "
                            "(or run on more nodes: [measure] ppn)")
        self.skipped.setdefault((coll, alg.name), {})[at["nprocs"]] = None
        return True

    def _forced_by_user(self, block: _Block, mca: Mapping[str, str]) -> _Block:
        """A default block that the user's [mca] settings force: recorded as the algorithm
        that runs, never as "default"."""
        forced = _user_forced(block.collective, mca, self.catalog, self.source)
        if forced is None:
            return block
        alg, segsize, fanout = forced
        points = tuple(replace(p, algorithm=alg.name, algorithm_id=alg.id, segsize=segsize,
                               fanout=fanout) for p in block.points)
        return _Block(block.collective, _Variant(alg, segsize, fanout), points)

    def launches(self, dims: dict[str, Any], repetition: int) -> list[Launch]:
        swept = {k: v for k, v in dims.items() if k in self.spec.mca.sweep}
        blocks = self.blocks({**dims, "repetition": repetition})
        forced = [b for b in blocks if not b.is_default]
        switching = any(self.modes[b.collective] == MPIT for b in forced)
        # Default points ride in the MPI_T launch when their control variable is writable.
        mpit = [b for b in blocks if (switching and b.variant.algorithm.runtime_switchable
                                      if b.is_default else self.modes[b.collective] == MPIT)]
        groups = [(MPIT, mpit), (NONE, [b for b in blocks if b.is_default and b not in mpit])]
        by_variant: dict[tuple[str, _Variant], list[_Block]] = {}
        for b in forced:  # a variant's blocks (one per non-blocking setting): one launch
            if self.modes[b.collective] == LAUNCH:
                by_variant.setdefault((b.collective, b.variant), []).append(b)
        groups += [(LAUNCH, bs) for bs in by_variant.values()]
        return [self._launch(sel, bs, dims, swept, repetition) for sel, bs in groups if bs]

    def _launch(self, selection: str, blocks: list[_Block], dims: dict[str, Any],
                swept: dict[str, str], repetition: int) -> Launch:
        spec, nprocs = self.spec, dims["nprocs"]
        mca, env = _forcing(selection, blocks[0], self.catalog, self.source)
        mca = _merge_mca(spec, swept, mca, self.source)
        if selection == NONE:
            blocks = [self._forced_by_user(b, mca) for b in blocks]
            if not all(b.is_default for b in blocks):
                selection = LAUNCH  # the user's own --mca settings force it
        oversubscribe = (nprocs > self.cores if spec.run.oversubscribe == "auto"
                         else bool(spec.run.oversubscribe))
        return Launch(
            launch_id="", repetition=repetition, nprocs=nprocs, mapping=dims["map_by"],
            binding=dims["bind_to"], oversubscribe=oversubscribe, mca=tuple(sorted(mca.items())),
            env=tuple(sorted(env.items())), swept=tuple(sorted(swept.items())),
            selection=selection, points=tuple(p for b in blocks for p in b.points),
            timeout_s=spec.run.timeout, validate=spec.measure.check_results,
            samples=spec.measure.samples, mpi=self.mpi, ppn=dims.get("ppn"))


def _user_forced(coll: str, mca: Mapping[str, str], catalog: Catalog,
                 source: str) -> tuple[Algorithm, int, int] | None:
    """(algorithm, segsize, fanout) that the user's own MCA settings force on `coll` (Open
    MPI obeys coll_tuned_<coll>_algorithm only with dynamic rules on), else None."""
    if COLLECTIVES[coll].nonblocking:  # libnbc obeys its parameter without dynamic rules
        value = mca.get(libnbc_mca(coll))
        if value is None:
            return None
        ref_nb: str | int = int(value) if value.strip().isdigit() else value
        alg_nb = catalog.resolve(coll, ref_nb, f"{source}: mca: {libnbc_mca(coll)}")
        return None if alg_nb.name == DEFAULT else (alg_nb, 0, 0)
    prefix = f"coll_tuned_{coll}_algorithm"
    value = mca.get(prefix)
    if value is None or _truthy(mca.get("coll_tuned_use_dynamic_rules", "0")) != "1":
        return None
    ref: str | int = int(value) if value.strip().isdigit() else value
    alg = catalog.resolve(coll, ref, f"{source}: mca: {prefix}")
    if alg.name == DEFAULT:
        return None

    def number(key: str) -> int:
        text = mca.get(key, "0").strip()
        try:
            return parse_size(text)
        except ValueError:
            raise UserError(f"{source}: mca: {key}: {text!r} is not a whole number of "
                            "bytes (or a count)") from None

    fanout = max(number(f"{prefix}_{k}") for k in ("tree_fanout", "chain_fanout",
                                                    "knomial_radix"))
    return alg, number(f"{prefix}_segmentsize"), fanout


def _shuffle_blocks(launch: Launch, rng: random.Random) -> Launch:
    """Shuffle the collective × variant blocks; sizes stay ascending inside each."""
    def key(p: Point) -> tuple[Any, ...]:
        return p.collective, p.algorithm, p.algorithm_id, p.segsize, p.fanout, p.test_calls, \
            p.compute

    blocks = [tuple(g) for _, g in itertools.groupby(launch.points, key=key)]
    rng.shuffle(blocks)
    return replace(launch, points=tuple(p for b in blocks for p in b))


def _with_id(index: int, launch: Launch) -> Launch:
    content = {k: v for k, v in launch.to_json().items() if k != "launch_id"}
    digest = hashlib.sha256(json.dumps(content, sort_keys=True,
                                       separators=(",", ":")).encode()).hexdigest()
    return replace(launch, launch_id=f"{index:04d}-{digest[:8]}")


# A plan is expanded in memory and stored as JSON: refuse one too large before expanding.
MAX_POINTS: Final = 2_000_000
MAX_LAUNCHES: Final = 200_000


def _check_size(spec: Spec, expander: _Expander, source: str) -> None:
    dims = spec.launch_dimensions()
    zipped = {name: group[0] for group in spec.zip for name in group}
    combos = math.prod(len(dims[n]) for n in dims if zipped.get(n, n) == n)
    per_combo = sum(len(expander.variants[c]) * len(expander.sizes[c])
                    * len(expander.nb_variants(c)) for c in spec.measure.collectives)
    launches = combos * spec.run.repetitions * (1 + sum(
        len(expander.variants[c]) for c in spec.measure.collectives))
    points = combos * spec.run.repetitions * per_combo
    if points > MAX_POINTS or launches > MAX_LAUNCHES:
        raise UserError(
            f"{source}: the plan would hold up to {points:,} points in {launches:,} launches; "
            f"collbench plans at most {MAX_POINTS:,} points and {MAX_LAUNCHES:,} launches: "
            "measure fewer sizes, algorithms, process counts, sweeps or repetitions per "
            "campaign")


def _check_exclude_mpis(spec: Spec, keys: list[str], source: str) -> None:
    for i, entry in enumerate(spec.exclude):
        for value in entry.mpi or []:
            if not keys:
                raise UserError(f"{source}: exclude[{i}].mpi: needs [measure] mpi (this "
                                "campaign measures one MPI)")
            if value not in keys:
                raise UserError(f"{source}: exclude[{i}].mpi: {value!r} is not measured; "
                                f"valid: {', '.join(keys)}{did_you_mean(value, keys)}")


def make_plan(spec: Spec, catalog: Catalog, source: str = "the spec",
              cores: int | None = None,
              catalogs: Mapping[str, Catalog] | None = None,
              nodes: int | None = None) -> Plan:
    """Every launch of the campaign, in run order; UserError naming the spec key at fault.

    `cores` (default: this machine's) decides oversubscribe = "auto". The seed is the spec's,
    or a fresh one recorded in Plan.seed; the same spec and seed give the same plan.
    `catalogs` ([measure] mpi: MPI key -> its catalogue, `catalog` unused) makes the MPI a
    launch dimension: each MPI's launches are planned with its own algorithms and forcing,
    and carry its key. `nodes`: the nodes every launch runs on when the backend knows it (1:
    this machine), so algorithms the layout rules out are skipped (Plan.notes says why).
    """
    keys = list(catalogs or {})
    expanders: list[_Expander] = []
    _check_exclude_mpis(spec, keys, source)
    if spec.workload is not None:
        programs = program_launches(spec, source, cores or os.cpu_count() or 1)
        launches = [replace(la, mpi=key) for la in programs for key in keys] if keys \
            else programs
    else:
        per_mpi: list[tuple[str | None, Catalog]] = list(catalogs.items()) if catalogs \
            else [(None, catalog)]
        expanders = [_Expander(spec, cat, source, cores or os.cpu_count() or 1, key, nodes)
                     for key, cat in per_mpi]
        _check_excluded_algorithms(spec, [e.variants for e in expanders], source)
        for expander in expanders:
            _check_size(spec, expander, source)
        launches = [launch for repetition in range(spec.run.repetitions)
                    for dims in _combinations(spec)
                    for expander in expanders
                    for launch in expander.launches(dims, repetition)]
    if not launches:
        raise UserError(f"{source}: exclude: every point is excluded; nothing to measure")
    seed = spec.run.seed if spec.run.seed is not None else secrets.randbits(32)
    if spec.run.order == "random":
        rng = random.Random(seed)
        launches = [_shuffle_blocks(launch, rng) for launch in launches]
        rng.shuffle(launches)
    notes = tuple(dict.fromkeys(
        f"{coll} {name} at np={','.join(map(str, nps))}: {mpich.LAYOUT_NOTE}; MPICH refuses "
        "it on this layout" for e in expanders for (coll, name), nps in e.skipped.items()))
    return Plan(spec.campaign.name, seed, spec.run.backend,
                tuple(_with_id(i, launch) for i, launch in enumerate(launches)), notes)


# --- workloads: a program instead of the kernel ---------------------------------------------

def _program_excluded(criteria: list[dict[str, list[Any]]], at: dict[str, Any]) -> bool:
    return any(all(at.get(key) in values for key, values in crit.items()) for crit in criteria)


def program_launches(spec: Spec, source: str, cores: int) -> list[Launch]:
    """One launch per combination of the launch dimensions (nprocs, map_by, bind_to,
    mca.sweep, workload.params) and repetition, each with one point: the program's row.
    A built-in app's process grid (dims) must hold nprocs: refused here, before anything
    runs."""
    from collbench.spec.workload import APPS, grid_problem, param_text

    wl = spec.workload
    assert wl is not None
    combos = math.prod(len(v) for v in spec.launch_dimensions().values())
    if combos * spec.run.repetitions > MAX_LAUNCHES:
        raise UserError(f"{source}: the plan would hold {combos * spec.run.repetitions:,} "
                        f"launches; collbench plans at most {MAX_LAUNCHES:,}: sweep fewer "
                        "params, process counts or repetitions per campaign")
    criteria = [entry.criteria() for entry in spec.exclude]
    dims_key = wl.app is not None and APPS[wl.app].dims
    out: list[Launch] = []
    for repetition in range(spec.run.repetitions):
        for dims in _combinations(spec):
            nprocs = dims["nprocs"]
            values = {k: param_text(dims[k]) for k in wl.params}
            if dims_key and "dims" in values:
                problem = grid_problem(values["dims"], nprocs)
                if problem:
                    raise UserError(f"{source}: workload.params.dims: {problem}; give dims "
                                    "whose product is nprocs (zip them: zip = [[\"nprocs\", "
                                    "\"dims\"]]) or exclude the pair")
            at = {**dims, **values, "repetition": repetition}
            if "size" in values:  # exclude's size is the program's size param, in bytes
                at["size"] = _int_param(values, "size")
            if _program_excluded(criteria, at):
                continue
            out.append(_program_launch(spec, dims, values, repetition, cores))
    return out


def _int_param(values: Mapping[str, str], key: str) -> int:
    text = values.get(key, "0").strip()
    try:
        return parse_size(text)
    except ValueError:
        return 0


def _program_launch(spec: Spec, dims: dict[str, Any], values: dict[str, str],
                    repetition: int, cores: int) -> Launch:
    wl = spec.workload
    assert wl is not None
    nprocs = dims["nprocs"]
    swept = {k: v for k, v in dims.items() if k in spec.mca.sweep}
    mca = {**spec.mca.fixed, **swept}
    name = wl.label()
    point = Point(name, DEFAULT, None, 0, 0, _int_param(values, "size"),
                  _int_param(values, "iterations"), _int_param(values, "warmup"))
    program = ProgramRun(name, tuple(wl.arguments(values, nprocs)),
                         tuple(sorted(values.items())),
                         tuple(wl.metric_patterns().items()), wl.primary())
    oversubscribe = (nprocs > cores if spec.run.oversubscribe == "auto"
                     else bool(spec.run.oversubscribe))
    return Launch(
        launch_id="", repetition=repetition, nprocs=nprocs, mapping=dims["map_by"],
        binding=dims["bind_to"], oversubscribe=oversubscribe, mca=tuple(sorted(mca.items())),
        env=(), swept=tuple(sorted(swept.items())), selection=NONE, points=(point,),
        timeout_s=spec.run.timeout, validate=False, samples=False, program=program,
        ppn=dims.get("ppn"))
