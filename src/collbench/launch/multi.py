"""Several MPIs in one campaign ([measure] mpi): one backend per MPI behind one backend.

Each MPI has a backend of its own (made from the same name, with that MPI), and so its own
kernel build, launcher flags, provenance and identity. `MultiMpi` passes each launch to
the backend of the MPI the launch names (`Launch.mpi`), with that MPI's kernel (or
workload program) in place of the binary the runner hands it. It runs launches one at a
time; a batch backend (Slurm) runs one MPI per campaign.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.errors import UserError
from collbench.kernel.build import KernelBinary
from collbench.launch.base import (
    Backend,
    Call,
    Identity,
    KernelCall,
    LaunchBackend,
    LaunchOutcome,
    ProgramCall,
    kernel_record,
)

if TYPE_CHECKING:
    from collbench.plan import Launch
    from collbench.spec.workload import Workload
    from collbench.store import Store


class MultiMpi(LaunchBackend):
    """The backends of several MPIs (MPI key -> backend), in the spec's order."""

    def __init__(self, parts: Mapping[str, LaunchBackend]) -> None:
        first = next(iter(parts.values()))
        super().__init__(first.setup)
        self.parts = dict(parts)
        self.first = first
        self.binaries: dict[str, KernelBinary] = {}

    def part(self, launch: Launch) -> LaunchBackend:
        if launch.mpi not in self.parts:
            raise UserError(f"launch {launch.launch_id} names MPI {launch.mpi!r}; this "
                            f"campaign measures {', '.join(self.parts)}")
        return self.parts[launch.mpi]

    def _call(self, launch: Launch, call: Call) -> Call:
        """The call with this launch's MPI's binary in place of the campaign's."""
        binary = self.binaries.get(str(launch.mpi))
        if binary is None:
            return call
        if isinstance(call, KernelCall):
            return replace(call, kernel=binary.path)
        if isinstance(call, ProgramCall):
            return replace(call, program=binary.path)
        return call

    # --- building and describing: every MPI's -------------------------------------------
    def build_kernel(self) -> KernelBinary:
        self.binaries = {k: p.build_kernel() for k, p in self.parts.items()}
        return self._first_binary()

    def build_program(self, workload: Workload) -> KernelBinary:
        self.binaries = {k: p.build_program(workload) for k, p in self.parts.items()}
        return self._first_binary()

    def _first_binary(self) -> KernelBinary:
        first = next(iter(self.binaries.values()))
        # "fresh" when any MPI compiled, so the campaign says it built something
        return replace(first, fresh=any(b.fresh for b in self.binaries.values()))

    def compiler(self) -> Path:
        return self.first.compiler()

    def identity(self) -> Identity:
        return self.first.identity()

    def identities(self) -> dict[str, Identity]:
        return {k: p.identity() for k, p in self.parts.items()}

    def provenance(self, kernel: KernelBinary) -> dict[str, Any]:
        prov = self.first.provenance(self.binaries.get(next(iter(self.parts)), kernel))
        prov["mpis"] = mpis_record({k: (p, self.binaries.get(k, kernel))
                                    for k, p in self.parts.items()})
        return prov

    def campaign_meta(self) -> dict[str, Any]:
        return self.first.campaign_meta()

    def describe(self) -> str:
        return self.first.describe()

    def created(self, store: Store) -> None:
        for p in self.parts.values():
            p.created(store)

    def ready(self, store: Store) -> None:
        for p in self.parts.values():
            p.ready(store)

    # --- launching: the launch's MPI's backend ------------------------------------------
    def command(self, launch: Launch, call: Call) -> list[str]:
        return self.part(launch).command(launch, self._call(launch, call))

    def environment(self, launch: Launch) -> list[tuple[str, str]]:
        return self.part(launch).environment(launch)

    def nodes(self, launch: Launch) -> int:
        return self.part(launch).nodes(launch)

    def placement_problem(self, launch: Launch) -> str | None:
        return self.part(launch).placement_problem(launch)

    def run(self, launch: Launch, call: Call,
            interrupted: Callable[[], bool]) -> LaunchOutcome:
        return self.part(launch).run(launch, self._call(launch, call), interrupted)


def mpis_record(parts: Mapping[str, tuple[Backend, KernelBinary]]) -> dict[str, Any]:
    """The provenance record's mpis: per MPI key, what it is and its kernel build."""
    return {k: {"identity": vars(b.identity()), "mpi": b.mpi.as_dict(),
                "kernel": kernel_record(binary)} for k, (b, binary) in parts.items()}


def multi(parts: Mapping[str, LaunchBackend]) -> MultiMpi:
    """A MultiMpi named as its parts are (the name campaign.json records, and resume
    makes the parts from)."""
    name = next(iter(parts.values())).name
    cls = type(f"MultiMpi_{name}", (MultiMpi,), {"name": name})
    backend: MultiMpi = cls(parts)
    return backend
