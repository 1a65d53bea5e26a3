"""One contract, every registered backend (as ReFrame tests its launchers): made by one
call, it plans, describes itself, builds command lines that end in the kernel's own
arguments (or a workload program's), counts nodes, shows a dry run, and (launch backends)
runs a launch — of the kernel and of a program — for real."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from collbench import registry
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary
from collbench.launch.base import (
    Backend,
    BackendSetup,
    KernelCall,
    LaunchBackend,
    ProgramCall,
    create,
)
from collbench.launch.batch import BatchBackend
from collbench.plan import Launch, Plan, Point, ProgramRun
from collbench.spec import parse_spec
from collbench.spec.workload import Workload
from collbench.store import Store
from tests.simgrid_support import SMALL

SPEC = """\
[campaign]
name = "contract"

[measure]
collectives = ["bcast"]
sizes = [8, 1024]
nprocs = [2]
iterations = 5
warmup = 1

[run.slurm]
nodes = 1
tasks_per_node = 2
srun_mpi = "pmix"

[run.simgrid]
platform = "{platform}"

[run.hosts]
hosts = ["localhost:2"]  # mpirun starts ranks here without ssh: no emulated hosts needed
"""

POINTS = (Point("bcast", "default", 0, 0, 0, 8, 5, 1),
          Point("bcast", "default", 0, 0, 0, 1024, 5, 1))
LAUNCH = Launch("0000-contract", 0, 2, "core", "core", False, (), (), (), "none", POINTS,
                60.0, False, False)
RING = ProgramRun("ring", ("size=16", "iterations=5"), (("iterations", "5"), ("size", "16")),
                  (), "avg_us")
PROGRAM_LAUNCH = Launch("0001-contract", 0, 2, "core", "core", False, (), (), (), "none",
                        (Point("ring", "default", None, 0, 0, 16, 5, 0),), 60.0, False, False,
                        RING)


def _backend(name: str, tmp_path: Path) -> Backend:
    if name == "simgrid" and shutil.which("smpirun") is None:
        pytest.skip("SimGrid SMPI is not installed")
    platform = tmp_path / "small.toml"
    platform.write_text(SMALL)
    spec = parse_spec(SPEC.format(platform=platform), str(tmp_path / "spec.toml"))
    return create(name, BackendSetup(spec, find_mpi(), str(tmp_path / "spec.toml"),
                                     Store(tmp_path / "results")))


@pytest.fixture(params=registry.names())
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return _backend(str(request.param), tmp_path)


def test_every_backend_is_one_kind(backend: Backend) -> None:
    assert isinstance(backend, LaunchBackend) != isinstance(backend, BatchBackend)
    assert backend.name in registry.names()


def test_planning_identity_and_nodes(backend: Backend) -> None:
    base = Catalog("openmpi", "5.0.11", "test", {})
    planning = backend.planning(base)
    assert planning.cores is None or planning.cores >= 2
    ident = backend.identity()
    assert ident.implementation and ident.version and ident.compiler
    assert backend.nodes(LAUNCH) >= 1


def test_command_is_a_list_ending_in_the_kernel_arguments(backend: Backend,
                                                          tmp_path: Path) -> None:
    call = KernelCall(Path("/k/collbench_kernel"), tmp_path / "jobs.txt", tmp_path / "o.jsonl")
    argv = backend.command(LAUNCH, call)
    assert all(isinstance(a, str) and "\n" not in a for a in argv)
    kernel_args = call.argv(LAUNCH)[1:]  # the fake backend runs a Python stand-in kernel
    assert argv[-len(kernel_args):] == kernel_args


def test_command_launches_a_program_as_it_launches_the_kernel(
        backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))  # the rank guard's build
    call = ProgramCall(Path("/p/ring"), tmp_path)
    argv = backend.command(PROGRAM_LAUNCH, call)
    assert all(isinstance(a, str) and "\n" not in a for a in argv)
    assert argv[-3:] == ["/p/ring", "size=16", "iterations=5"]
    kernel = backend.command(LAUNCH, KernelCall(Path("/k/collbench_kernel"),
                                                tmp_path / "jobs.txt", tmp_path / "o.jsonl"))
    # the same placement either way: only what follows the launcher's own arguments differs
    # (every real backend starts each rank of a program under the rank guard: launch/guard.py)
    own = argv[:-3]
    if backend.name in ("local", "hosts", "slurm"):
        assert Path(own[-2]).name == "rankguard" and own[-1] == str(1 << 25)  # 64 MiB / 2
        own = own[:-2]
    assert own == kernel[:len(own)] or backend.name == "simgrid"
    text = backend.dry_run(Plan("contract", 1, backend.name, (PROGRAM_LAUNCH,)),
                           Path("/p/ring"), ())
    assert "/p/ring size=16 iterations=5" in text and "--jobs" not in text


def test_dry_run_shows_the_kernel(backend: Backend) -> None:
    text = backend.dry_run(Plan("contract", 1, backend.name, (LAUNCH,)),
                           Path("/k/collbench_kernel"), ())
    assert "--jobs" in text and text.endswith("\n")


def test_duplicate_names_are_refused() -> None:
    class Again(LaunchBackend):
        name = "local"

    with pytest.raises(registry.DuplicateBackend):
        registry.register(Again)
    with pytest.raises(UserError, match="valid: local, slurm, simgrid, fake"):
        registry.load("lcoal")


@pytest.mark.mpi
@pytest.mark.parametrize("name", [n for n in registry.names() if n != "slurm"])
def test_a_launch_runs_for_real(name: str, tmp_path: Path, kernel: KernelBinary,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each launch backend runs the same launch: ok, every point written, hosts named.
    (The Slurm backend's outcomes: tests/launch/slurm, against fake and real daemons.)"""
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    backend = _backend(name, tmp_path)
    assert isinstance(backend, LaunchBackend)
    store = Store(tmp_path / "results")
    backend.ready(store)
    binary = backend.build_kernel().path if name == "simgrid" else kernel.path
    work = tmp_path / "work"
    work.mkdir()
    call = KernelCall(binary, work / "jobs.txt", work / "kernel.jsonl")
    call.jobfile.write_text("\n".join(LAUNCH.job_lines()) + "\n")
    outcome = backend.run(LAUNCH, call, lambda: False)
    assert outcome.status == "ok", outcome.stderr_tail
    assert len(call.outfile.read_text().splitlines()) == len(POINTS)
    assert outcome.hosts and outcome.command[-len(call.argv(LAUNCH)) + 1:] == call.argv(LAUNCH)[1:]


@pytest.mark.mpi
@pytest.mark.parametrize("name", [n for n in registry.names() if n != "slurm"])
def test_a_program_runs_for_real(name: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each launch backend runs a workload's program (the ring mini-app, built with the
    backend's own compiler): ok, its JSON line on stdout.txt, its arguments last."""
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    backend = _backend(name, tmp_path)
    assert isinstance(backend, LaunchBackend)
    backend.ready(Store(tmp_path / "results"))
    binary = backend.build_program(Workload(app="ring"))
    work = tmp_path / "work"
    work.mkdir()
    call = ProgramCall(binary.path, work)
    call.prepare(PROGRAM_LAUNCH)
    outcome = backend.run(PROGRAM_LAUNCH, call, lambda: False)
    assert outcome.status == "ok", outcome.stderr_tail
    import json

    line = json.loads(call.outfile.read_text().strip().splitlines()[-1])
    # the fake backend starts the program as one process (a singleton)
    assert line["valid"] is True and line["nprocs"] == (1 if name == "fake" else 2)
    assert outcome.command[-3:] == [str(binary.path), "size=16", "iterations=5"]
