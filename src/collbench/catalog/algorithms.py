"""Algorithms per collective for one MPI, and name/id resolution with helpful errors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from collbench.catalog.collectives import COLLECTIVES
from collbench.errors import UserError, did_you_mean

DEFAULT = "default"


@dataclass(frozen=True)
class Algorithm:
    collective: str
    name: str  # as the MPI spells it
    id: int | None  # Open MPI's numeric id; None where the MPI has no ids (MPICH)
    runtime_switchable: bool  # can be changed inside a launch (MPI_T cvar writable)
    segmentable: bool  # accepts a segment size / fanout


@dataclass(frozen=True)
class Catalog:
    implementation: str
    version: str
    source: str  # where the table came from (ompi_info, or a built-in table)
    algorithms: Mapping[str, tuple[Algorithm, ...]] = field(default_factory=dict)
    # coll/han's own algorithms (Open MPI 5.0), variants of component han only
    han: Mapping[str, tuple[Algorithm, ...]] = field(default_factory=dict)

    def collectives(self) -> tuple[str, ...]:
        """Every operation the kernel can measure (also those with no algorithm choice)."""
        return tuple(COLLECTIVES)

    def components_why_not(self) -> str | None:
        """Why `[measure] components` cannot ask this MPI for a coll component (None: it
        can: Open MPI's component selection, docs/components.md)."""
        if self.implementation == "openmpi":
            return None
        return f"coll components are Open MPI's and this campaign runs {self.implementation}"

    def applicable(self, algorithm: Algorithm, nprocs: int) -> bool:
        """False where the algorithm refuses this process count (Open MPI's two_proc)."""
        return not (algorithm.name == "two_proc" and nprocs != 2)

    def of(self, collective: str) -> tuple[Algorithm, ...]:
        return self.algorithms.get(collective, ())

    def default(self, collective: str) -> Algorithm:
        switchable = self.implementation == "openmpi" and all(
            a.runtime_switchable for a in self.of(collective)
        )
        return Algorithm(collective, DEFAULT, 0 if self.implementation == "openmpi" else None,
                         switchable, False)

    def resolve(self, collective: str, ref: str | int, where: str) -> Algorithm:
        """The algorithm named or numbered `ref`; a UserError naming the valid choices."""
        if (isinstance(ref, str) and ref.strip().lower() == DEFAULT) or ref == 0:
            return self.default(collective)
        algs = self.of(collective)
        for a in algs:
            if (isinstance(ref, int) and a.id == ref) or (
                isinstance(ref, str) and ref.strip().lower() in (a.name.lower(), str(a.id))
            ):
                return a
        if not algs:
            raise UserError(
                f"{where}: {self.implementation} {self.version} has no algorithm choice for "
                f"{collective}; use 'default'"
            )
        valid = [DEFAULT] + [f"{a.name}" + (f" ({a.id})" if a.id is not None else "")
                             for a in algs]
        raise UserError(
            f"{where}: {ref!r} is not {'an' if collective[0] in 'aeiou' else 'a'} "
            f"{collective} algorithm of {self.implementation} "
            f"{self.version}; valid: {', '.join(valid)}"
            f"{did_you_mean(str(ref), [a.name for a in algs])}"
        )
