"""Command lines of the local backend (no MPI started here; the real path: test_cli_mpi.py)."""

import os
from pathlib import Path

import pytest

from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.launch.base import KernelCall
from collbench.plan import Launch, Point
from tests.backend_support import make_backend

POINT = Point("bcast", "binomial", 6, 0, 0, 1024, 100, 10)


def launch(**kw: object) -> Launch:
    base: dict[str, object] = dict(
        launch_id="0001-abcdef12", repetition=0, nprocs=4, mapping="core", binding="core",
        oversubscribe=False, mca=(("coll_tuned_use_dynamic_rules", "1"),), env=(), swept=(),
        selection="mpit", points=(POINT,), timeout_s=60.0, validate=False, samples=False)
    base.update(kw)
    return Launch(**base)  # type: ignore[arg-type]


def mpi(impl: str = "openmpi", version: str = "5.0.11") -> MpiInstall:
    b = Path("/opt/mpi/bin")
    return MpiInstall(impl, version, b, b / "mpicc", b / "mpirun", None, "prefix")  # type: ignore[arg-type]


CALL = KernelCall(Path("/k/collbench_kernel"), Path("/w/jobs.txt"), Path("/w/out.jsonl"))


def test_openmpi_command_is_an_argument_list() -> None:
    argv = make_backend("local", mpi()).command(launch(), CALL)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert argv == ["/opt/mpi/bin/mpirun", *root, "-np", "4", "--map-by", "core",
                    "--bind-to", "core", "--mca", "coll_tuned_use_dynamic_rules", "1",
                    "/k/collbench_kernel", "--jobs", "/w/jobs.txt", "--output", "/w/out.jsonl",
                    "--mpit"]


def test_openmpi5_oversubscription_uses_modifiers() -> None:
    argv = make_backend("local", mpi()).command(launch(oversubscribe=True), CALL)
    assert argv[argv.index("--map-by") + 1] == "core:OVERSUBSCRIBE"
    assert argv[argv.index("--bind-to") + 1] == "core:overload-allowed"
    unbound = make_backend("local", mpi()).command(launch(oversubscribe=True, binding="none"),
                                                  CALL)
    assert unbound[unbound.index("--bind-to") + 1] == "none"


def test_openmpi4_oversubscription_flag() -> None:
    argv = make_backend("local", mpi(version="4.1.6")).command(launch(oversubscribe=True), CALL)
    assert "--oversubscribe" in argv and "core:OVERSUBSCRIBE" not in argv


def test_forced_algorithm_env_and_kernel_switches() -> None:
    la = launch(selection="launch", validate=True, samples=True,
                mca=(("coll_tuned_bcast_algorithm", "6"), ("coll_tuned_use_dynamic_rules", "1")),
                env=(("UCX_TLS", "sm,self"),))
    argv = make_backend("local", mpi()).command(la, CALL)
    assert argv[argv.index("coll_tuned_bcast_algorithm") + 1] == "6"
    assert argv[argv.index("-x") + 1] == "UCX_TLS"
    assert "--mpit" not in argv and "--validate" in argv and "--samples" in argv


def test_mpich_hydra_command_forces_by_environment() -> None:
    la = launch(selection="launch", mca=(),
                env=(("MPIR_CVAR_BCAST_INTRA_ALGORITHM", "binomial"),))
    argv = make_backend("local", mpi("mpich", "4.2.0")).command(la, CALL)
    assert argv[:7] == ["/opt/mpi/bin/mpirun", "-np", "4", "-map-by", "core", "-bind-to",
                        "core"]
    i = argv.index("-genv")
    assert argv[i + 1:i + 3] == ["MPIR_CVAR_BCAST_INTRA_ALGORITHM", "binomial"]


def test_unknown_backend_names_the_choices() -> None:
    with pytest.raises(UserError, match=r"valid: local, slurm, simgrid, fake"):
        make_backend("lcoal", mpi())
