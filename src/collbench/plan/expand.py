"""make_plan: the spec expanded into launches, each with its points."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import random
import secrets
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from collbench.catalog import components, mpich
from collbench.catalog.algorithms import Algorithm, Catalog
from collbench.catalog.collectives import COLLECTIVES, Kind, osu_defaults
from collbench.errors import UserError, did_you_mean
from collbench.plan.forcing import (
    _check_mca_allowed,
    _forcing,
    _merge_mca,
    _moves_data,
    _user_forced,
)
from collbench.plan.model import LAUNCH, MAX_LAUNCHES, MAX_POINTS, MPIT, NONE, Launch, Plan, Point
from collbench.plan.programs import program_launches
from collbench.plan.variants import (
    _Block,
    _check_excluded_algorithms,
    _combinations,
    _excluded,
    _modes,
    _sizes,
    _Variant,
    _variants,
)
from collbench.spec import Spec

# A simulation repeats to the last digit: OSU's 1,000 iterations buy nothing there and cost
# minutes per point at tens of ranks (SMPI simulates every message of every iteration).
# One warm-up, then one timed call: every algorithm of bcast, reduce, allgather, alltoall
# and barrier at 16 ranks on orfeo-thin gave the same figures to 4 decimals as 5 + 20.
SIMULATED_COUNTS: Final = (1, 1)


class _Expander:
    """Holds what every launch of one make_plan call shares."""

    def __init__(self, spec: Spec, catalog: Catalog, source: str, cores: int,
                 mpi: str | None = None, nodes: int | None = None,
                 simulated: bool = False) -> None:
        self.spec, self.catalog, self.source, self.cores = spec, catalog, source, cores
        self.simulated = simulated
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
        _check_components(spec, catalog, where)
        self.criteria = [entry.criteria() for entry in spec.exclude]

    def _point(self, coll: str, v: _Variant, size: int,
               nb: tuple[int, str] | None = None) -> Point:
        it_osu, wu_osu = SIMULATED_COUNTS if self.simulated else osu_defaults(coll, size)
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
                if v.han is not None and at.get("component") != "han":
                    continue  # coll/han's own setting: a variant of component han only
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
        modes = self.modes
        if dims.get("component") not in (None, components.DEFAULT, "tuned"):
            # coll/han (or another) serves the measured communicator and builds its own
            # sub-communicators at its first call: a forced tuned algorithm reaches them
            # only when set for the whole launch (measured: MPI_T did not, on 2 hosts)
            modes = {c: LAUNCH for c in modes}
        switching = any(modes[b.collective] == MPIT for b in forced)
        # Default points ride in the MPI_T launch when their control variable is writable.
        mpit = [b for b in blocks if (switching and b.variant.algorithm.runtime_switchable
                                      if b.is_default else modes[b.collective] == MPIT)]
        groups = [(MPIT, mpit), (NONE, [b for b in blocks if b.is_default and b not in mpit])]
        by_variant: dict[tuple[str, _Variant], list[_Block]] = {}
        for b in forced:  # a variant's blocks (one per non-blocking setting): one launch
            if modes[b.collective] == LAUNCH:
                by_variant.setdefault((b.collective, b.variant), []).append(b)
        groups += [(LAUNCH, bs) for bs in by_variant.values()]
        return [self._launch(sel, bs, dims, swept, repetition) for sel, bs in groups if bs]

    def _launch(self, selection: str, blocks: list[_Block], dims: dict[str, Any],
                swept: dict[str, str], repetition: int) -> Launch:
        spec, nprocs = self.spec, dims["nprocs"]
        mca, env = _forcing(selection, blocks[0], self.catalog, self.source,
                            (nprocs, dims.get("ppn")))
        mca = _merge_mca(spec, swept, mca, self.source)
        component = dims.get("component")
        asked_mca, asked_env = components.request_settings(component)
        mca, env = {**mca, **asked_mca}, {**env, **asked_env}
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
            samples=spec.measure.samples, mpi=self.mpi, ppn=dims.get("ppn"),
            component=None if component in (None, components.DEFAULT) else component,
            monitoring=spec.run.monitoring)


def _check_components(spec: Spec, catalog: Catalog, source: str) -> None:
    """[measure] components asks Open MPI's component selection; nothing else has one."""
    asked = [c for c in spec.measure.components or () if c != components.DEFAULT]
    if not asked:
        return
    why = catalog.components_why_not()
    if why:
        raise UserError(f"{source}: measure.components: {asked[0]!r} cannot be asked for: "
                        f"{why}; valid: [\"default\"]")


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
              nodes: int | None = None, simulated: bool = False) -> Plan:
    """Every launch of the campaign, in run order; UserError naming the spec key at fault.

    `cores` (default: this machine's) decides oversubscribe = "auto". The seed is the spec's,
    or a fresh one recorded in Plan.seed; the same spec and seed give the same plan.
    `catalogs` ([measure] mpi: MPI key -> its catalogue, `catalog` unused) makes the MPI a
    launch dimension: each MPI's launches are planned with its own algorithms and forcing,
    and carry its key. `nodes`: the nodes every launch runs on when the backend knows it (1:
    this machine), so algorithms the layout rules out are skipped (Plan.notes says why).
    `simulated`: iterations and warm-up the spec leaves to OSU's default are SIMULATED_COUNTS.
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
        expanders = [_Expander(spec, cat, source, cores or os.cpu_count() or 1, key, nodes,
                               simulated) for key, cat in per_mpi]
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
