"""Command lines and batch scripts of the Slurm backend (no Slurm needed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.errors import UserError
from collbench.launch.local import mpirun_command
from collbench.launch.slurm import markers
from collbench.launch.slurm.backend import prepare_work
from collbench.launch.slurm.commands import PROBE, Shape, launch_command, srun_mpi
from collbench.spec.slurm import SlurmConfig
from collbench.store import Store
from tests.launch.slurm.util import FakeSlurm, call, fake_mpi, launch, slurm_backend, spec

CFG = SlurmConfig()
WORK = Path("/r/work/0000-aaaaaaaa")


@pytest.mark.parametrize(("mapping", "nprocs", "distribution", "nodes"), [
    ("core", 4, "block:block", "2"), ("core", 2, "block:block", "1"),
    ("node", 2, "cyclic:block", "2"), ("socket", 4, "block:cyclic", "2"),
])
def test_srun_places_ranks_as_map_by_asks(mapping: str, nprocs: int, distribution: str,
                                          nodes: str) -> None:
    la = launch(mapping=mapping, nprocs=nprocs, binding="socket")
    argv, env = launch_command(CFG, fake_mpi(), la, call(WORK), Shape(2, 2), "pmix")
    assert argv[:9] == ["srun", "--mpi=pmix", "--kill-on-bad-exit=1", "-n", str(nprocs),
                        "-N", nodes, f"--distribution={distribution}", "--cpu-bind=sockets"]
    # every rank records its node, then becomes the kernel with the usual arguments
    assert argv[9:13] == ["sh", "-c", PROBE, str(WORK)]
    assert argv[13:] == call(WORK).argv(la)
    assert env == {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}  # srun takes no --mca


def test_srun_overcommits_only_when_the_spec_oversubscribes() -> None:
    plain, _ = launch_command(CFG, fake_mpi(), launch(), call(WORK), Shape(2, 2), "pmix")
    over, _ = launch_command(CFG, fake_mpi(), launch(oversubscribe=True, nprocs=8), call(WORK),
                             Shape(2, 2), "pmix")
    assert "--overcommit" not in plain and "--overcommit" in over


def test_mpirun_launcher_is_the_local_command_with_the_probe() -> None:
    cfg = SlurmConfig(launcher="mpirun")
    la = launch(env=(("UCX_TLS", "sm,self"),))
    argv, env = launch_command(cfg, fake_mpi(), la, call(WORK), Shape(2, 2), "pmix")
    local = mpirun_command(fake_mpi(), la, call(WORK))  # the local backend's, less its
    # one-host start-up settings (a Slurm allocation may span nodes)
    kernel = call(WORK).argv(la)
    assert argv == [*local[:-len(kernel)], "sh", "-c", PROBE, str(WORK), *kernel]
    # mpirun takes nodes and slots from the allocation: nothing may fight that
    assert not {"--host", "-H", "--hostfile", "--machinefile", "-N"} & set(argv)
    assert env == {"UCX_TLS": "sm,self"}


def test_srun_mpi_auto_checks_what_srun_offers() -> None:
    assert srun_mpi(CFG, fake_mpi(), ["pmix", "none", "pmi2"]) == "pmix"
    assert srun_mpi(CFG, fake_mpi(), None) == "pmix"  # no srun here to ask
    mpich = fake_mpi().__class__("mpich", "4.2", Path("/m"), Path("/m/mpicc"),
                                 Path("/m/mpirun"), None, "prefix")
    assert srun_mpi(CFG, mpich, ["pmi2", "none"]) == "pmi2"
    with pytest.raises(UserError, match=r"no pmix plugin.*launcher = \"mpirun\""):
        srun_mpi(CFG, fake_mpi(), ["none", "pmi2"])
    assert srun_mpi(SlurmConfig(srun_mpi="none"), fake_mpi(), ["none"]) == "none"


def test_script_has_every_sbatch_option(fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    sp = spec('partition = "THIN"\naccount = "proj-1"\nqos = "normal"\n'
              'constraint = "intel&ib"\nexclusive = true\ntasks_per_node = 24\n'
              'extra_sbatch = ["--mem=4G", "#SBATCH --comment=two words"]')
    text = slurm_backend(sp, tmp_path).scripts([launch()], Path("/k/kernel"), ())[0]
    lines = [ln for ln in text.splitlines() if ln.startswith("#SBATCH")]
    assert lines == [
        "#SBATCH --job-name=collbench-slurm-unit", "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=24", "#SBATCH --time=0:02:00",
        f"#SBATCH --output={tmp_path}/slurm/job-%j.out", "#SBATCH --partition=THIN",
        "#SBATCH --account=proj-1", "#SBATCH --qos=normal", "#SBATCH '--constraint=intel&ib'",
        "#SBATCH --exclusive", "#SBATCH --mem=4G", "#SBATCH '--comment=two words'"]


def test_default_time_limit_holds_every_launch_timeout(fake_slurm: FakeSlurm,
                                                       tmp_path: Path) -> None:
    launches = [launch(f"000{i}-aaaaaaaa", timeout_s=600.0) for i in range(3)]
    text = slurm_backend(spec(), tmp_path).scripts(launches, Path("/k"), ())[0]
    # 3 × (600 s + 10 s kill grace + 5 s) + 60 s = 1905 s -> 32 minutes
    assert "#SBATCH --time=0:32:00" in text


def test_time_limit_packs_launches_into_jobs(fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    launches = [launch(f"000{i}-aaaaaaaa", timeout_s=100.0) for i in range(5)]
    scripts = slurm_backend(spec('time_limit = "0:05:00"'), tmp_path).scripts(
        launches, Path("/k"), ())
    # 60 s per job + 115 s per launch: two launches fit in 300 s
    assert [s.count("\ncollbench_launch ") for s in scripts] == [2, 2, 1]
    assert all("#SBATCH --time=0:05:00" in s for s in scripts)
    with pytest.raises(UserError, match=r"run.slurm.time_limit: 2 is too short"):
        slurm_backend(spec("time_limit = 2"), tmp_path).scripts(
            [launch(timeout_s=100.0)], Path("/k"), ())


def test_launches_that_do_not_fit_the_allocation_are_refused(fake_slurm: FakeSlurm,
                                                             tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"measure.nprocs: 8 processes do not fit.*2 × 2"):
        slurm_backend(spec("tasks_per_node = 2"), tmp_path).scripts(
            [launch(nprocs=8)], Path("/k"), ())


FAKE_KERNEL = """#!/bin/sh
exec "{python}" -m collbench.launch.fake -np "$FAKE_NP" "$@"
"""


def _run_script(fake_slurm: FakeSlurm, root: Path, debug: tuple[str, ...] = (),
                timeout: float = 30.0, mca: str = "") -> tuple[Path, float]:
    """Write the job script for one launch into `root` and run it with bash (fake srun)."""
    kernel = root / "fake kernel"
    kernel.parent.mkdir(parents=True, exist_ok=True)
    kernel.write_text(FAKE_KERNEL.format(python=sys.executable))
    kernel.chmod(0o755)
    la = launch(timeout_s=timeout, mca=(("btl", "self,sm"), ("coll_tuned_use_dynamic_rules",
                                                            "1"), *([("x", mca)] if mca else [])))
    text = slurm_backend(spec(), root).scripts([la], kernel, debug)[0]
    prepare_work(Store(root), la)
    script = root / "job.sh"
    script.write_text(text)
    start = time.monotonic()
    env = {**os.environ, "SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "n[1-2]",
           "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    subprocess.run(["bash", str(script)], env=env, check=True, timeout=60)
    return root / "work" / la.launch_id, time.monotonic() - start


def test_script_runs_with_awkward_paths_and_leaves_markers(fake_slurm: FakeSlurm,
                                                           tmp_path: Path) -> None:
    root = tmp_path / "it's a \"$HOME\" dir; ls"
    work, _ = _run_script(fake_slurm, root, mca="a b'c")
    fin = markers.finished(work, ["cmd"], 30.0)
    assert fin is not None and fin.outcome.status == "ok" and fin.outcome.returncode == 0
    assert fin.job_id == "77" and fin.allocation == "n[1-2]"
    assert fin.rank_hosts == [os.uname().nodename]
    assert len((work / "kernel.jsonl").read_text().splitlines()) == 2
    # run again (a resubmitted job): a launch that is done is not run twice
    before = (work / "done").read_text()
    subprocess.run(["bash", str(root / "job.sh")], check=True, timeout=60,
                   env={**os.environ, "SLURM_JOB_ID": "78"})
    assert (work / "done").read_text() == before


def test_per_launch_timeout_is_enforced_inside_the_job(fake_slurm: FakeSlurm,
                                                       tmp_path: Path) -> None:
    work, took = _run_script(fake_slurm, tmp_path / "r", ("--debug", "hang", "--debug-at", "1"),
                             timeout=1.0)
    fin = markers.finished(work, ["cmd"], 1.0)
    assert fin is not None and fin.outcome.status == "timeout"
    assert fin.outcome.returncode == markers.TIMED_OUT and took < 20
    assert len((work / "kernel.jsonl").read_text().splitlines()) == 1
