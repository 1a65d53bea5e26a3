"""What every launch backend is, and how one is made from its name.

A backend is complete after one call, `create(name, setup)`: it reads what it needs from
the spec (a platform, an allocation), says how plans are made for it (`planning`), builds
its kernel, describes itself for provenance and resume checks, writes and reads its own
files in the results folder, and shows its dry run. How it runs launches comes in two
kinds, and the runner dispatches on them once:

- LaunchBackend: one launch at a time, to completion (`run`);
- BatchBackend: a scheduler takes every launch at once and reports each as it ends
  (collbench.launch.batch).
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from collbench import provenance, registry
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary, build_kernel

if TYPE_CHECKING:
    from collbench.catalog.algorithms import Catalog
    from collbench.catalog.mpi import MpiInstall
    from collbench.plan import Launch, Plan
    from collbench.spec import Spec
    from collbench.spec.workload import Workload
    from collbench.store import Store

Status = Literal["ok", "failed", "timeout", "interrupted"]


class Call(Protocol):
    """What a backend starts for one launch: the kernel (KernelCall) or a workload's program
    (ProgramCall). A backend asks it only for its argument list and its folder, so every
    backend launches either without knowing which it is."""

    @property
    def work(self) -> Path:
        """The launch's folder: the launcher's stdout.txt/stderr.txt, the backend's files."""

    @property
    def outfile(self) -> Path:
        """What the launch leaves to be read: the kernel's JSON lines, the program's stdout."""

    def argv(self, launch: Launch) -> list[str]:
        """The command line of every rank (the executable first)."""

    def prepare(self, launch: Launch) -> None:
        """Write the inputs the launch reads into `work` (the kernel's job file)."""


@dataclass(frozen=True)
class KernelCall:
    """Everything a backend needs to start the kernel for one launch."""

    kernel: Path
    jobfile: Path
    outfile: Path
    debug: tuple[str, ...] = ()  # extra kernel arguments (test switches such as --debug hang)
    wrapper: tuple[str, ...] = ()  # runs each rank's kernel, e.g. `env LD_PRELOAD=...`

    def argv(self, launch: Launch) -> list[str]:
        args = [*self.wrapper, str(self.kernel), "--jobs", str(self.jobfile),
                "--output", str(self.outfile)]
        if launch.selection == "mpit":
            args.append("--mpit")
        if launch.validate:
            args.append("--validate")
        if launch.samples:
            args.append("--samples")
        if launch.monitoring:  # per-point pml/monitoring files in the work folder
            args += ["--monitor", str(self.work)]
        return args + list(self.debug)

    @property
    def work(self) -> Path:
        return self.jobfile.parent

    def prepare(self, launch: Launch) -> None:
        self.jobfile.write_text("\n".join(launch.job_lines()) + "\n")


@dataclass(frozen=True)
class ProgramCall:
    """Everything a backend needs to start a workload's program for one launch: the
    executable and the launch's own arguments (launch.program.args)."""

    program: Path
    folder: Path
    wrapper: tuple[str, ...] = ()  # runs each rank's program, e.g. `env LD_PRELOAD=...`

    @property
    def work(self) -> Path:
        return self.folder

    @property
    def outfile(self) -> Path:
        return self.folder / "stdout.txt"  # where every backend puts the launch's stdout

    def argv(self, launch: Launch) -> list[str]:
        if launch.program is None:
            raise ValueError(f"launch {launch.launch_id} runs the kernel, not a program")
        return [*self.wrapper, str(self.program), *launch.program.args]

    def prepare(self, launch: Launch) -> None:
        return None


def call_for(launch: Launch, binary: Path, work: Path, debug: tuple[str, ...] = (),
             wrapper: tuple[str, ...] = ()) -> KernelCall | ProgramCall:
    """The call that starts this launch: the campaign's binary is the kernel (with the
    launch's job file) or, for a workload launch, the program (with its arguments)."""
    if launch.program is not None:
        return ProgramCall(binary, work, wrapper)
    return KernelCall(binary, work / "jobs.txt", work / "kernel.jsonl", debug, wrapper)


@dataclass
class LaunchOutcome:
    status: Status
    command: list[str]
    returncode: int | None
    wall_s: float
    stderr_tail: str = ""
    hosts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BackendSetup:
    """What a backend is made from.

    `store` is the results folder the campaign lives in (it may not exist yet: a new
    campaign, a dry run); when `resume` is set, the backend takes its own stored state from
    it (e.g. the simulated platform) instead of the spec."""

    spec: Spec
    mpi: MpiInstall
    source: str  # where the spec came from, for messages and relative paths
    store: Store
    platform: str | None = None  # a simulated platform given on the command line
    resume: bool = False


@dataclass(frozen=True)
class Planning:
    catalog: Catalog  # the algorithms this backend can run
    cores: int | None  # cores that decide oversubscribe = "auto"; None: this machine's


@dataclass(frozen=True)
class Identity:
    """The MPI that produced a campaign's numbers: rows carry it, resume compares it."""

    implementation: str
    version: str
    compiler: str  # the wrapper compiler the kernel was built with

    def describe(self) -> str:
        return f"{self.implementation} {self.version} ({self.compiler})"


class Backend(ABC):
    name: ClassVar[str] = ""

    def __init__(self, setup: BackendSetup) -> None:
        self.setup = setup
        self.spec = setup.spec
        self.mpi = setup.mpi

    # --- planning, building, describing ----------------------------------------------
    def planning(self, base: Catalog) -> Planning:
        """The catalogue and core count a plan for this backend is made with; UserError
        naming the spec key where the spec asks what this backend cannot do."""
        return Planning(base, None)

    def build_kernel(self) -> KernelBinary:
        return build_kernel(self.mpi.mpicc, probe=True)

    def compiler(self) -> Path:
        """The MPI's C compiler wrapper a workload's program is built with."""
        return self.mpi.mpicc

    def build_program(self, workload: Workload) -> KernelBinary:
        """A workload's program, built with this backend's compiler (cached per compiler)."""
        from collbench.launch.program import build_program

        return build_program(self.compiler(), workload, self.setup.source)

    def identity(self) -> Identity:
        return Identity(self.mpi.implementation, self.mpi.version, str(self.mpi.mpicc))

    def provenance(self, kernel: KernelBinary) -> dict[str, Any]:
        return provenance.collect(self.mpi, kernel_record(kernel))

    def campaign_meta(self) -> dict[str, Any]:
        """What this backend adds to the campaign's record (campaign.json)."""
        return {}

    def describe(self) -> str:
        """One line said before launches run ("" for nothing)."""
        return ""

    def created(self, store: Store) -> None:
        """The campaign folder was just created: store this backend's own files."""
        return None

    def ready(self, store: Store) -> None:
        """Before launches run (new or resumed campaign): restore what a kill may have
        left missing."""
        return None

    # --- launching --------------------------------------------------------------------
    @abstractmethod
    def command(self, launch: Launch, call: Call) -> list[str]:
        """The argument list that runs this launch (never a shell string)."""

    def environment(self, launch: Launch) -> list[tuple[str, str]]:
        """Environment the launcher gets beyond collbench's own (shown in dry runs)."""
        return list(launch.env)

    def nodes(self, launch: Launch) -> int:
        return 1

    def placement_problem(self, launch: Launch) -> str | None:
        """Why the launcher would refuse this launch's placement (None: it would not, or
        this backend cannot tell before running)."""
        return None

    def dry_run(self, plan: Plan, kernel: Path, debug: tuple[str, ...]) -> str:
        """What a run would start, as text; nothing is started or written."""
        lines = []
        for la in plan.launches:
            work = self.setup.store.work_dir(la.launch_id).resolve()
            call = call_for(la, kernel, work, debug)
            env = [f"{k}={v}" for k, v in self.environment(la)]
            lines.append(f"# {la.launch_id}: {len(la.points)} points")
            lines.append(shlex.join([*(["env", *env] if env else []),
                                     *self.command(la, call)]))
        return "\n".join(lines) + "\n"


class LaunchBackend(Backend):
    """Runs one launch at a time, to completion, timeout or interruption."""

    @abstractmethod
    def run(self, launch: Launch, call: Call,
            interrupted: Callable[[], bool]) -> LaunchOutcome:
        """Run to completion, timeout or interruption; stdout and stderr go to files in
        call.work (stdout.txt, stderr.txt), the kernel writes call.outfile."""


def kernel_record(kernel: KernelBinary) -> dict[str, Any]:
    return {"path": str(kernel.path), "fingerprint": kernel.fingerprint,
            "compile_command": kernel.compile_command}


def create(name: str, setup: BackendSetup, where: str = "--backend") -> Backend:
    """The backend registered as `name`, made for this campaign."""
    cls = registry.load(name, where)
    backend = cls(setup)
    if not isinstance(backend, Backend):
        raise UserError(f"backend {name!r}: {cls.__qualname__} is not a collbench backend")
    return backend


def register(cls: type[Backend]) -> type[Backend]:
    """Add a backend class at run time (plugins use the entry-point group instead)."""
    registry.register(cls)
    return cls
