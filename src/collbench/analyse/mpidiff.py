"""What changed between two installs of one MPI (`collbench diff-mpi A B`).

Decisions: what "default" runs per collective x nprocs x size in each version, read from
the version's own rules without running anything. Open MPI: coll/tuned's fixed rules and
han's hierarchy (catalog/han_plan.py). MPICH: the MPIR collective-selection table
compiled into the library (tune/mpich.builtin_table), walked as csel.c does (the first
child whose condition holds). Intel MPI ships its decisions as compressed binary tuning
files of no documented format: its defaults are traced instead, by running the kernel on
this machine (tune/impi_decisions.py, given as `traced`).

Measured: on a results folder that measured both (`[measure] mpi`), each "default" point
of B against A with compare's own test (exact Mann-Whitney, Holm within the size, the
ratio's interval), the first size that changed per context, and the decision switch that
explains it where the tables show one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from collbench import points as door
from collbench.analyse import dimensions
from collbench.analyse.compare import _order, _point, _ratios, _row_label, block_title
from collbench.analyse.rows import fetch
from collbench.catalog import han_plan
from collbench.catalog import ompi_decisions as od
from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.mpi_install import MpiSpec, parse_spec, prefix_of
from collbench.catalog.mpich_csel import decide as mpich_decide
from collbench.errors import UserError
from collbench.store import Store

DEFAULT_NPROCS: Final = (2, 4, 8, 16, 32, 64)
DEFAULT_SIZES: Final = tuple(1 << i for i in range(0, 23))  # 1 B .. 4 MiB
MAX_NPROCS: Final = 1 << 20
MAX_SIZE: Final = 1 << 40
COLUMNS: Final = ("collective", "nprocs", "sizes", "a", "b")
MEASURED_COLUMNS: Final = ("context", "size_bytes", "a_us", "b_us", "ratio", "p_value",
                           "verdict", "first_changed", "switch")


@dataclass(frozen=True)
class Change:
    """Sizes [size_from, size_to] where A's default and B's differ at this nprocs."""

    collective: str
    nprocs: int
    size_from: int
    size_to: int
    a: str
    b: str


@dataclass(frozen=True)
class PointChange:
    context: str  # compare's block title: 'bcast np=2'
    collective: str
    nprocs: int
    size_bytes: int
    a_value: float
    b_value: float
    ratio: float  # B / A: > 1 is slower in B
    p_value: float | None  # Holm-adjusted (None: fewer than 2 repetitions on a side)
    significant: bool | None
    first_changed: bool  # the smallest size of this context that changed significantly
    switch: str  # 'binomial -> scatter_ring_allgather', or '' when the tables show none

    @property
    def verdict(self) -> str:
        if self.significant is None:
            return "untested"
        if not self.significant:
            return "same"
        return "regression" if self.ratio > 1 else "improvement"


# --- decisions --------------------------------------------------------------------------
class Traced(Protocol):
    """Decisions found by running the MPI (Intel MPI: tune/impi_decisions.py)."""

    def collectives(self) -> list[str]: ...

    def decide(self, collective: str, nprocs: int, size: int) -> str: ...


class Decider:
    """Default algorithm per (collective, nprocs, size) for one MPI install."""

    def __init__(self, spec: MpiSpec, nodes: int = 1, traced: Traced | None = None) -> None:
        self.spec, self.nodes, self.traced = spec, nodes, traced
        self._table: dict[str, Any] | None = None
        if spec.implementation == "openmpi":
            od.series(spec.version)  # one line for a series without known rules
        elif spec.implementation == "mpich":
            self._table = _mpich_table(spec)
        elif traced is None:
            raise UserError(f"{spec.requirement}: no decision table; Intel MPI keeps its "
                            "defaults in compressed binary tuning files (etc/tuning_*.dat); "
                            "valid: openmpi==VERSION or mpich==VERSION, or Intel MPI traced "
                            "(collbench diff-mpi)")
        elif nodes != 1:
            raise UserError(f"diff-mpi: --nodes {nodes}: Intel MPI's decisions are traced "
                            "on this machine; valid: --nodes 1")

    def collectives(self) -> list[str]:
        if self.traced is not None:
            return self.traced.collectives()
        if self._table is None:
            series = od.series(self.spec.version)
            return [c for c in COLLECTIVES if c in od.RULES[series]]
        return [c for c in COLLECTIVES if f"collective={c}" in self._table]

    def decide(self, collective: str, nprocs: int, size: int) -> str:
        if self.traced is not None:
            return self.traced.decide(collective, nprocs, size)
        if self._table is None:
            ppn = -(-nprocs // self.nodes)
            d = han_plan.default_choice(self.spec.version, collective, nprocs, size,
                                        self.nodes, ppn)
            return d.algorithm if d.component == "tuned" else f"{d.algorithm}@han"
        return mpich_decide(self._table, collective, nprocs, size, self.nodes)


def _mpich_table(spec: MpiSpec) -> dict[str, Any]:
    from collbench.catalog.mpi import find_mpi
    from collbench.catalog.mpich_csel import builtin_table

    prefix = prefix_of(spec)
    if not (prefix / "bin").is_dir():
        raise UserError(f"{spec.requirement}: not installed ({prefix}); its decisions are "
                        "compiled into its library; valid: install it first with "
                        f"collbench mpi install {spec.requirement}")
    return builtin_table(find_mpi(prefix))[0]


def check_pair(a: str, b: str) -> tuple[MpiSpec, MpiSpec]:
    sa, sb = parse_spec(a, "diff-mpi A"), parse_spec(b, "diff-mpi B")
    if sa.implementation != sb.implementation:
        raise UserError(f"diff-mpi: {a} and {b} are two implementations; valid: two versions "
                        "of one MPI (their decisions come from different rules)")
    if sa.version == sb.version:
        raise UserError(f"diff-mpi: A and B are both {a}; valid: two versions")
    return sa, sb


def decision_changes(a: Decider, b: Decider, collectives: Sequence[str] | None = None,
                     nprocs_list: Sequence[int] = DEFAULT_NPROCS,
                     sizes: Sequence[int] = DEFAULT_SIZES) -> list[Change]:
    """Where A's default and B's differ, as size ranges of the given sizes."""
    common = [c for c in a.collectives() if c in set(b.collectives())]
    colls = list(collectives) if collectives else common
    for c in colls:
        if c not in common:
            raise UserError(f"diff-mpi: --collective {c}: not decided by both; valid: "
                            + ", ".join(common))
    out: list[Change] = []
    for coll in colls:
        for p in nprocs_list:
            run: Change | None = None
            for s in sorted(sizes):
                da, db = a.decide(coll, p, s), b.decide(coll, p, s)
                if da != db and run is not None and (run.a, run.b) == (da, db):
                    run = Change(coll, p, run.size_from, s, da, db)
                    continue
                if run is not None:
                    out.append(run)
                run = Change(coll, p, s, s, da, db) if da != db else None
            if run is not None:
                out.append(run)
    return out


def change_rows(changes: Sequence[Change], a: str, b: str) -> list[dict[str, Any]]:
    return [{"collective": c.collective, "nprocs": c.nprocs,
             "sizes": str(c.size_from) if c.size_from == c.size_to
             else f"{c.size_from}-{c.size_to}", "a": c.a, "b": c.b} for c in changes]


# --- measured ---------------------------------------------------------------------------
def measured_changes(store: Store, a: MpiSpec, b: MpiSpec, stat: str = "avg",
                     confidence: float = 0.95, deciders: tuple[Decider, Decider] | None = None,
                     ) -> list[PointChange]:
    """Every default point measured under both A and B, B against A (compare's test)."""
    rows = fetch(store, None, None)
    column = door.figure_of(stat, rows)
    keys = {a.key, b.key}
    # The component leaves the label: default@han (5.0 on nodes) is still 'default'.
    chosen_rows = [dict(r, component="") for r in rows
                   if r["algorithm"] == DEFAULT and dimensions.mpi_label(r) in keys]
    present = {dimensions.mpi_label(r) for r in chosen_rows}
    if present != keys:
        lacking = sorted(keys - present)
        raise UserError(f"{store.root}: no default rows of {', '.join(lacking)}; valid: a "
                        "folder whose [measure] mpi lists both")
    base = dimensions.resolve(f"mpi={a.key}", chosen_rows)
    groups = door.pool(dimensions.rewrite(chosen_rows, base, _row_label), column)
    points = [p for g in groups if (p := _point(g, confidence)) is not None]
    ratios, _ = _ratios(points, a.key, confidence)
    out: list[PointChange] = []
    seen: set[str] = set()
    for r in sorted(ratios, key=lambda r: (_order(r.point), r.point.size_bytes)):
        p = r.point
        title = block_title(p.collective, p.nprocs, p.nodes, p.ppn, p.mapping, p.binding,
                                p.params)
        first = bool(r.significant) and title not in seen
        if first:
            seen.add(title)
        switch = ""
        if deciders is not None:
            try:
                da = deciders[0].decide(p.collective, p.nprocs, p.size_bytes)
                db = deciders[1].decide(p.collective, p.nprocs, p.size_bytes)
            except UserError:
                da = db = ""
            switch = f"{da} -> {db}" if da != db else ""
        out.append(PointChange(title, p.collective, p.nprocs, p.size_bytes, r.baseline.value,
                               p.value, r.ratio, r.p_value, r.significant, first, switch))
    return out


def measured_rows(changes: Sequence[PointChange], everything: bool) -> list[dict[str, Any]]:
    return [{"context": c.context, "size_bytes": c.size_bytes, "a_us": round(c.a_value, 3),
             "b_us": round(c.b_value, 3), "ratio": round(c.ratio, 3),
             "p_value": None if c.p_value is None else round(c.p_value, 4),
             "verdict": c.verdict, "first_changed": "yes" if c.first_changed else "",
             "switch": c.switch}
            for c in changes if everything or c.significant]
