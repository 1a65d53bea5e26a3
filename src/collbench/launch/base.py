"""The backend interface and registry: adding a scheduler is one module that registers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from collbench.errors import choice_error

if TYPE_CHECKING:
    from collbench.catalog.mpi import MpiInstall
    from collbench.plan import Launch

Status = Literal["ok", "failed", "timeout", "interrupted"]


@dataclass(frozen=True)
class KernelCall:
    """Everything a backend needs to start the kernel for one launch."""

    kernel: Path
    jobfile: Path
    outfile: Path
    debug: tuple[str, ...] = ()  # extra kernel arguments (test switches such as --debug hang)

    def argv(self, launch: Launch) -> list[str]:
        args = [str(self.kernel), "--jobs", str(self.jobfile), "--output", str(self.outfile)]
        if launch.selection == "mpit":
            args.append("--mpit")
        if launch.validate:
            args.append("--validate")
        if launch.samples:
            args.append("--samples")
        return args + list(self.debug)


@dataclass
class LaunchOutcome:
    status: Status
    command: list[str]
    returncode: int | None
    wall_s: float
    stderr_tail: str = ""
    hosts: list[str] = field(default_factory=list)


class Backend(ABC):
    name: str = ""

    def __init__(self, mpi: MpiInstall) -> None:
        self.mpi = mpi

    @abstractmethod
    def command(self, launch: Launch, call: KernelCall) -> list[str]:
        """The argument list that runs this launch (never a shell string)."""

    @abstractmethod
    def run(
        self, launch: Launch, call: KernelCall, interrupted: Callable[[], bool]
    ) -> LaunchOutcome:
        """Run to completion, timeout or interruption; the kernel writes call.outfile."""

    def nodes(self, launch: Launch) -> int:
        return 1


_REGISTRY: dict[str, type[Backend]] = {}


def register(cls: type[Backend]) -> type[Backend]:
    _REGISTRY[cls.name] = cls
    return cls


def get_backend(name: str, mpi: MpiInstall) -> Backend:
    # Import the built-in backends so they register themselves.
    from collbench.launch import fake, local  # noqa: F401
    from collbench.launch import simgrid as _simgrid  # noqa: F401
    from collbench.launch.slurm import backend as _slurm  # noqa: F401

    if name not in _REGISTRY:
        raise choice_error("--backend", "backend", name, sorted(_REGISTRY))
    return _REGISTRY[name](mpi)
