"""Command lines of the local backend (no MPI started here; the real path: test_cli_mpi.py)."""

import os
from pathlib import Path

import pytest

from collbench.catalog.algorithms import Catalog
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


@pytest.fixture
def no_user_mca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No OMPI_MCA_ variable and an empty home: nothing of the user's chooses BTLs."""
    for key in list(os.environ):
        if key.startswith("OMPI_MCA_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def test_openmpi_command_is_an_argument_list(no_user_mca: Path) -> None:
    argv = make_backend("local", mpi()).command(launch(), CALL)
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    assert argv == ["/opt/mpi/bin/mpirun", *root, "-np", "4", "--map-by", "core",
                    "--bind-to", "core", "--mca", "btl", "^ofi",
                    "--mca", "coll_tuned_use_dynamic_rules", "1",
                    "/k/collbench_kernel", "--jobs", "/w/jobs.txt", "--output", "/w/out.jsonl",
                    "--mpit"]


def btl_excluded(argv: list[str]) -> bool:
    return any(argv[i:i + 3] == ["--mca", "btl", "^ofi"] for i in range(len(argv)))


def test_ofi_btl_is_left_out_on_one_host_unless_the_user_chose_btls(
        no_user_mca: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    local = make_backend("local", mpi())
    assert btl_excluded(local.command(launch(), CALL))
    # the launch's own BTL choice or ofi BTL settings (e.g. a btl=self,tcp baseline)
    for mca in ((("btl", "self,tcp"),), (("btl_ofi_provider_include", "tcp"),)):
        assert not btl_excluded(local.command(launch(mca=mca), CALL))
    assert not btl_excluded(local.command(launch(env=(("OMPI_MCA_btl", "self,tcp"),)), CALL))
    # the user's MCA parameter file, or the environment collbench runs in
    conf = no_user_mca / ".openmpi" / "mca-params.conf"
    conf.parent.mkdir()
    conf.write_text("# mine\nbtl = self,tcp\n")
    assert not btl_excluded(local.command(launch(), CALL))
    conf.write_text("# btl = self,tcp\nmpi_yield_when_idle = 1\n")
    assert btl_excluded(local.command(launch(), CALL))
    monkeypatch.setenv("OMPI_MCA_btl", "self,vader,tcp")
    assert not btl_excluded(local.command(launch(), CALL))
    monkeypatch.delenv("OMPI_MCA_btl")
    # MPICH has no BTLs
    assert not btl_excluded(make_backend("local", mpi("mpich", "4.2.0")).command(
        launch(mca=()), CALL))


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


@pytest.fixture
def no_user_impi(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("I_MPI_PIN", "I_MPI_FABRICS")):
            monkeypatch.delenv(key)


def test_intel_hydra_pins_by_environment_and_runs_shm_ofi(no_user_impi: None) -> None:
    la = launch(selection="launch", mca=(), env=(("I_MPI_ADJUST_BCAST", "3"),
                                                 ("I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK", "1")))
    local = make_backend("local", mpi("impi", "2021.18.1"))
    argv = local.command(la, CALL)
    assert argv[:3] == ["/opt/mpi/bin/mpirun", "-np", "4"]
    assert "-map-by" not in argv and "-bind-to" not in argv  # Intel's Hydra has neither
    genv = [tuple(argv[i + 1:i + 3]) for i, a in enumerate(argv) if a == "-genv"]
    assert genv == [("I_MPI_FABRICS", "shm:ofi"), ("I_MPI_PIN_DOMAIN", "core"),
                    ("I_MPI_ADJUST_BCAST", "3"), ("I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK", "1")]
    assert "/k/collbench_kernel" in argv
    # mapping "node" is one rank per host in turn; binding none is no pinning
    spread = local.command(launch(mca=(), mapping="node", binding="none"), CALL)
    assert spread[spread.index("-ppn") + 1] == "1"
    assert spread[spread.index("I_MPI_PIN") + 1] == "0"


def test_the_users_fabrics_and_pinning_are_left_alone(no_user_impi: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    local = make_backend("local", mpi("impi", "2021.18.1"))
    mine = local.command(launch(mca=(), env=(("I_MPI_FABRICS", "shm"),)), CALL)
    assert mine.count("I_MPI_FABRICS") == 1 and mine[mine.index("I_MPI_FABRICS") + 1] == "shm"
    monkeypatch.setenv("I_MPI_PIN_PROCESSOR_LIST", "0,1")
    argv = local.command(launch(mca=()), CALL)
    assert not any(a.startswith("I_MPI_PIN") for a in argv)


def test_intel_mpi_forcing_in_the_environment_is_refused_when_planning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("I_MPI_ADJUST_ALLREDUCE", "2")
    with pytest.raises(UserError, match=r"^I_MPI_ADJUST_ALLREDUCE='2' in the environment"):
        make_backend("local", mpi("impi", "2021.18.1")).planning(Catalog("impi", "x", "t", {}))
    make_backend("local", mpi()).planning(Catalog("openmpi", "5.0.11", "t", {}))  # not Intel


def test_unknown_backend_names_the_choices() -> None:
    with pytest.raises(UserError, match=r"valid: local, slurm, simgrid, fake"):
        make_backend("lcoal", mpi())


LAUNCHER = """#!/bin/sh
# A stand-in for mpirun: PMIx's start-up race (exit 213) while {fails} > runs so far, then
# the kernel's one output line.
n=$(cat "{count}" 2>/dev/null || echo 0); echo $((n + 1)) > "{count}"
if [ "$n" -lt {fails} ]; then
  echo "PMIx: listener thread failed to start" >&2; exit {code}
fi
echo '{{"status": "ok"}}' > "{out}"
"""


@pytest.mark.parametrize(("fails", "code", "runs", "returncode"), [
    (1, 213, 2, 0),  # the race once: started again, measured
    (5, 213, 3, 213),  # every time: given up after 2 more starts, reported as failed
    (1, 1, 1, 1),  # another failure: not retried
])
def test_a_launch_lost_to_pmix_start_up_is_started_again(
        tmp_path: Path, fails: int, code: int, runs: int, returncode: int) -> None:
    from collbench.launch.local import run_mpirun

    out, count = tmp_path / "out.jsonl", tmp_path / "count"
    script = tmp_path / "mpirun"
    script.write_text(LAUNCHER.format(fails=fails, code=code, count=count, out=out))
    script.chmod(0o755)
    call = KernelCall(Path("/k/collbench_kernel"), tmp_path / "jobs.txt", out)
    outcome = run_mpirun([str(script)], mpi(), launch(), call, lambda: False, ["vm"])
    assert int(count.read_text()) == runs
    assert outcome.returncode == returncode
    assert out.exists() == (returncode == 0)


def test_each_start_of_mpirun_has_a_tmpdir_of_its_own(tmp_path: Path) -> None:
    """mpirun names its session directory by its pid under TMPDIR; a fresh TMPDIR per start
    keeps a stale one left by a killed mpirun out of its way (test_session_dir.py)."""
    from collbench.launch.local import run_mpirun
    from collbench.launch.process import TMP_PREFIX

    out, count, seen = tmp_path / "out.jsonl", tmp_path / "count", tmp_path / "seen"
    script = tmp_path / "mpirun"
    script.write_text(LAUNCHER.format(fails=1, code=213, count=count, out=out).replace(
        "n=$(", f'test -d "$TMPDIR" && echo "$TMPDIR" >> "{seen}"\nn=$('))
    script.chmod(0o755)
    call = KernelCall(Path("/k/collbench_kernel"), tmp_path / "jobs.txt", out)
    assert run_mpirun([str(script)], mpi(), launch(), call, lambda: False, ["vm"]).returncode == 0
    dirs = [Path(line) for line in seen.read_text().split()]
    assert len(dirs) == 2 and len(set(dirs)) == 2  # the retry got a fresh one too
    assert all(d.name.startswith(TMP_PREFIX) and not d.exists() for d in dirs)
