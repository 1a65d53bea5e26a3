"""Which algorithm variants, sizes and launch dimensions a spec asks for."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from collbench.catalog import components
from collbench.catalog.algorithms import DEFAULT, Algorithm, Catalog
from collbench.catalog.collectives import COLLECTIVES, Kind
from collbench.errors import UserError, did_you_mean
from collbench.plan.model import LAUNCH, MPIT, Point
from collbench.sizes import format_size
from collbench.spec import AlgorithmChoice, Spec

# --- expansion ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Variant:
    algorithm: Algorithm
    segsize: int = 0  # of a han setting: coll_han_<coll>_segsize
    fanout: int = 0
    han: components.HanSetting | None = None  # coll/han's own setting: under han only


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
    han = _han_setting(catalog, coll, entry, where)
    if han is not None:
        return han
    alg = catalog.resolve(coll, entry.name, where)
    if (entry.segsize or entry.fanout) and not alg.segmentable:
        key = "segsize" if entry.segsize else "fanout"
        valid = [a.name for a in catalog.of(coll) if a.segmentable]
        raise UserError(
            f"{where}.{key}: {alg.name} takes no segment size or fanout ({coll} in "
            f"{catalog.implementation} {catalog.version}); valid: {', '.join(valid) or 'none'}")
    return [_Variant(alg, s, f) for s in entry.segsize or [0] for f in entry.fanout or [0]]


def _han_setting(catalog: Catalog, coll: str, entry: AlgorithmChoice,
                 where: str) -> list[_Variant] | None:
    """The variants of a coll/han setting ("simple", "intra+up=adapt", docs/components.md),
    None when `entry` names no han algorithm (a coll/tuned one, or a mistake)."""
    han = catalog.han.get(coll, ())
    if not han or not isinstance(entry.name, str) or _in_catalog(catalog, coll, entry.name):
        return None
    names = tuple(a.name for a in han)
    if entry.name.strip().lower().split("+")[0] not in names:
        return None
    setting = components.parse_han_setting(  # a level's tuned:ALG names one of catalog's
        entry.name, coll, names, lambda c: tuple(a.name for a in catalog.of(c)))
    if isinstance(setting, str):
        raise UserError(f"{where}: {setting} (coll/han settings: docs/components.md)")
    base = next(a for a in han if a.name == setting.algorithm)
    alg = Algorithm(coll, setting.name, base.id, False, base.segmentable)
    if entry.fanout or (entry.segsize and not alg.segmentable):
        key = "fanout" if entry.fanout else "segsize"
        raise UserError(f"{where}.{key}: coll/han's {setting.algorithm} {coll} takes no "
                        f"{key}; valid: segsize with intra for "
                        f"{', '.join(sorted(components.HAN_SEGMENTED))}")
    return [_Variant(alg, s, 0, setting) for s in entry.segsize or [0]]


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
    asked = spec.measure.components or ()
    if any(v.han for v in out) and "han" not in asked:
        name = next(v.algorithm.name for v in out if v.han)
        raise UserError(f"{source}: {prefix}: {name!r} is a coll/han setting, measured "
                        f"under han only; valid: add \"han\" to measure.components")
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
        forced = [v.algorithm for v in vs if v.algorithm.name != DEFAULT and v.han is None]
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
