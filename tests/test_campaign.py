"""The one way into a campaign: every command that opens a folder refuses another MPI on
resume, and studies and adaptive tuning run on every backend because the opener, not the
command, configures it (SimGrid's platform from [run.simgrid], Slurm's allocation)."""

from __future__ import annotations

import ast
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.errors import UserError
from collbench.plan import Plan
from tests.conftest import mpi_tool
from tests.launch.slurm.util import launch
from tests.simgrid_support import (  # noqa: F401 (fixtures)
    SMALL,
    needs_smpi,
    sim_env,
    smpi_cache,
    smpi_kernel,
    smpi_tools,
)

SPEC = """\
[campaign]
name = "opener"

[measure]
collectives = ["bcast"]
algorithms = ["default", "binomial", "pipeline"]
sizes = [8, 64, 512]
nprocs = 2
iterations = 5
warmup = 1

[run]
backend = "{backend}"
repetitions = 2
timeout = 60
seed = 3
{extra}
"""

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "osu-7.4"

STUDY = """
[[study.parameters]]
name = "map_by"
values = ["socket"]
"""


def spec(tmp_path: Path, backend: str = "fake", extra: str = "", study: str = "") -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(backend=backend, extra=extra) + study)
    return path


def other_mpi(folder: Path) -> None:
    """Make the folder say it was run with another MPI version."""
    prov = folder / "provenance.json"
    data = json.loads(prov.read_text())
    data["mpi"]["version"] = "4.1.6"
    prov.write_text(json.dumps(data))


def test_opener_refuses_another_mpi_for_code_built_plans(tmp_path: Path) -> None:
    """tune validate and rules verify open their folders like this."""
    source = SpecSource.from_file(spec(tmp_path))
    plan = Plan("opener", 1, "fake", (launch("0000-aaaaaaaa", nprocs=2),))
    request = Request(tmp_path / "res", resume=True, backend="fake")
    camp = open_campaign(source, find_mpi(), request, plan=plan, say=lambda _: None)
    assert camp.created and [la.launch_id for la in camp.todo()] == ["0000-aaaaaaaa"]
    again = open_campaign(source, find_mpi(), request, plan=plan, say=lambda _: None)
    assert not again.created
    with pytest.raises(UserError, match="holds another campaign"):
        other = Plan("opener", 1, "fake", (launch("0001-bbbbbbbb", nprocs=2),))
        open_campaign(source, find_mpi(), request, plan=other)
    other_mpi(tmp_path / "res")
    with pytest.raises(UserError, match=r"was run with openmpi 4\.1\.6"):
        open_campaign(source, find_mpi(), request, plan=plan)


def test_slurm_script_refuses_another_mpi(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, out = spec(tmp_path), tmp_path / "res"
    assert main(["run", str(path), "-o", str(out)]) == 0
    other_mpi(out)
    assert main(["slurm", "script", str(path), "-o", str(out)]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


def test_adaptive_resume_refuses_another_mpi(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, rules = spec(tmp_path), tmp_path / "tuned.rules"
    folder = tmp_path / "measured"
    args = ["tune", str(path), "--adaptive", "-o", str(rules), "--adaptive-results",
            str(folder), "--no-significance"]
    assert main(args) == 0
    other_mpi(folder)
    assert main([*args, "--resume"]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


def test_study_resume_refuses_another_mpi(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, out = spec(tmp_path, study=STUDY), tmp_path / "study"
    assert main(["study", str(path), "-o", str(out)]) == 0
    stage = next((out / "stages").iterdir())
    (stage / "decision.json").unlink()  # the stage is opened again on resume
    other_mpi(stage)
    assert main(["study", str(path), "-o", str(out), "--resume"]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid SMPI is not installed")
def test_study_and_adaptive_run_on_simgrid_with_the_spec_platform(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    platform = tmp_path / "small.toml"
    platform.write_text(SMALL)
    extra = f'\n[run.simgrid]\nplatform = "{platform}"\n'
    path = spec(tmp_path, "simgrid", extra, STUDY)
    out = tmp_path / "study"
    assert main(["study", str(path), "--check"]) == 0
    assert main(["study", str(path), "-o", str(out)]) == 0
    rows = [json.loads(line) for f in out.glob("stages/*/launches/*.jsonl")
            for line in f.read_text().splitlines()]
    # the mpi column is the MPI's key (records format 2): smpi-<SimGrid version>
    assert rows and {(r["backend"], r["mpi"].split("-")[0], r["status"]) for r in rows} == {
        ("simgrid", "smpi", "ok")}
    rules, folder = tmp_path / "tuned.rules", tmp_path / "adaptive"
    plain = spec(tmp_path, "simgrid", extra)
    # It measures collbench's Open MPI ports on the simulated platform and writes the rules
    # for the simulated series, marked as predicted (issue 25: rules from a simulation).
    assert main(["tune", str(plain), "--adaptive", "-o", str(rules), "--adaptive-results",
                 str(folder), "--no-significance"]) == 0
    assert "PREDICTED" in rules.read_text()
    stored = [json.loads(line) for f in folder.glob("launches/*.jsonl")
              for line in f.read_text().splitlines()]
    assert stored and {(r["backend"], r["status"]) for r in stored} == {("simgrid", "ok")}


def test_study_plans_with_the_slurm_allocation_not_this_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check on a login node plans for the 1 × 8 allocation: 4 ranks there are not
    oversubscribed, whatever this machine's core count."""
    slurm = "\n[run.slurm]\nnodes = 1\ntasks_per_node = 8\nsrun_mpi = \"pmix\"\n"
    path = spec(tmp_path, "slurm", slurm, STUDY).rename(tmp_path / "study.toml")
    assert main(["study", str(path), "--check"]) == 0
    assert "launches" in capsys.readouterr().out
    plain = spec(tmp_path, "slurm", slurm)
    plain.write_text(plain.read_text().replace("nprocs = 2", "nprocs = 4"))
    assert main(["plan", str(plain), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["backend"] == "slurm"
    assert {la["oversubscribe"] for la in plan["launches"]} == {False}


# --- placement trials: a dry look starts no job larger than the machine ------------------

def _shim_mpi(tmp_path: Path, slow: bool = False) -> Path:
    """An MPI prefix whose mpirun logs its pid and argv, then execs the wheel's mpirun (the
    local backend runs `<prefix>/bin/mpirun` by its path, not through PATH). `slow`: the
    trial's ranks record their pids and sleep instead of running `true`."""
    real = mpi_tool("mpirun")
    if real is None:
        pytest.skip("no mpirun")
    prefix = tmp_path / "mpi"
    (prefix / "bin").mkdir(parents=True)
    for tool in ("mpicc", "ompi_info"):
        (prefix / "bin" / tool).symlink_to(real.parent / tool)
    rank = f"echo $$ >> {shlex.quote(str(tmp_path / 'ranks'))}; exec sleep 600"
    (prefix / "bin" / "mpirun").write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"with open({str(tmp_path / 'mpirun.log')!r}, 'a') as f:\n"
        "    f.write(repr([os.getpid(), *sys.argv[1:]]) + '\\n')\n"
        "args = sys.argv[1:]\n"
        + (f"args = [*args[:-1], 'sh', '-c', {rank!r}]\n" if slow else "")
        + f"os.execv({str(real)!r}, [{str(real)!r}, *args])\n")
    (prefix / "bin" / "mpirun").chmod(0o755)
    (tmp_path / "tmp").mkdir()
    return prefix


def _started(tmp_path: Path) -> list[list[str]]:
    """Each mpirun the shim saw: [pid, *argv]."""
    log = tmp_path / "mpirun.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [[str(x) for x in ast.literal_eval(line)] for line in lines]


def _ranks(argv: list[str]) -> int:
    flag = next(i for i, a in enumerate(argv) if a in ("-np", "-n"))
    return int(argv[flag + 1])


def _plan(tmp_path: Path, prefix: Path, measure: str,
          command: tuple[str, ...] = ("plan",)) -> subprocess.Popen[str]:
    path = tmp_path / "spec.toml"
    path.write_text(f'[campaign]\nname = "big"\n[measure]\ncollectives = "bcast"\n'
                    f'sizes = [8]\n{measure}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TMPDIR"] = str(tmp_path / "tmp")  # this machine, not an allocation; our own TMPDIR
    env["COLLBENCH_CACHE"] = str(tmp_path / "cache")  # a dry run builds the kernel
    return subprocess.Popen([sys.executable, "-m", "collbench.cli", *command, str(path),
                             "--mpi", str(prefix)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


@pytest.mark.mpi
def test_plan_of_more_ranks_than_cores_tries_the_placement_at_the_cores(
        tmp_path: Path) -> None:
    prefix, cores = _shim_mpi(tmp_path), os.cpu_count() or 1
    start = time.monotonic()
    proc = _plan(tmp_path, prefix, "nprocs = [2, 512]")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - start < 30
    sizes = [_ranks(argv) for argv in _started(tmp_path)]
    assert sizes and max(sizes) <= cores, sizes
    skipped = [line for line in out.splitlines() if line.startswith("skipped:")]
    assert len(skipped) == 1 and "-np 512" in skipped[0] and f"-np {cores}" in skipped[0], out


# A dry run of the same spec (no job larger than the machine started, `-np 512` printed):
# tests/test_run_dry_run.py, which checks what this did and what it says.


@pytest.mark.mpi
def test_a_placement_refused_at_the_cores_is_refused_for_more_ranks(tmp_path: Path) -> None:
    prefix, cores = _shim_mpi(tmp_path), os.cpu_count() or 1
    proc = _plan(tmp_path, prefix, 'nprocs = 512\nmap_by = "core"\nbind_to = "socket"')
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 2 and out == "", (out, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "refuses -np 512 --map-by core --bind-to socket" in err, err
    assert [_ranks(argv) for argv in _started(tmp_path)] == [cores]


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except OSError:
        return True


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_no_placement_trial_outlives_plan(tmp_path: Path, sig: signal.Signals) -> None:
    """The trial's ranks hang (a slow machine); plan is stopped or killed at a random moment
    of the trial: mpirun and its ranks go, and a stop is an interruption (exit 130), not a
    refusal of the placement."""
    prefix = _shim_mpi(tmp_path, slow=True)
    proc = _plan(tmp_path, prefix, "nprocs = 2")
    ranks = tmp_path / "ranks"
    deadline = time.monotonic() + 30
    while len(ranks.read_text().split() if ranks.exists() else []) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
        time.sleep(0.05)
    time.sleep(random.uniform(0, 0.5))
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, sig)  # collbench and its own children, no chance to clean up
    else:
        os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=30)
    started = [int(argv[0]) for argv in _started(tmp_path)]
    pids = started + [int(p) for p in ranks.read_text().split()]
    private = (tmp_path / "tmp").glob  # mpirun's TMPDIR: the watchdog's to remove
    deadline = time.monotonic() + 15
    while (not all(map(_gone, pids)) or list(private("collbench-launch-*"))) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert [p for p in pids if not _gone(p)] == []
    assert list(private("collbench-launch-*")) == []
    if sig != signal.SIGKILL:
        assert proc.returncode == 130 and "interrupted" in err and "refuses" not in err, err
        assert list((tmp_path / "tmp").iterdir()) == []


# --- a stop of a command that measures through campaigns of its own ---------------------

@needs_smpi
@pytest.mark.usefixtures("sim_env")  # COLLBENCH_CACHE: the kernel built once
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_calibration_leaves_no_temporary_folder(
        tmp_path: Path, sig: signal.Signals) -> None:
    """`platform calibrate` keeps its simulations in a temporary folder: SIGTERM or SIGHUP
    at a random moment stops it as Ctrl-C does (one line, exit 130) and removes it, with
    no smpirun left (it finished first: exit 0, nothing left either)."""
    probe, temp, out = tmp_path / "probe", tmp_path / "tmp", tmp_path / "c.toml"
    assert main(["ingest", str(SAMPLES / "osu_latency_np2.txt"), "-o", str(probe),
                 "--nprocs", "2", "--mapping", "core", "--collective", "latency"]) == 0
    temp.mkdir()
    rnd = random.Random(sig)
    env = dict(os.environ, TMPDIR=str(temp))
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "platform",
                                 "calibrate", str(probe), "--from", "orfeo-thin", "-o",
                                 str(out), "--force"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
        time.sleep(rnd.uniform(0.3, 2.0))
        os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 130) and "Traceback" not in err, err
        if proc.returncode == 130:  # and it does not name the folder it removes as kept
            assert err.count("\n") == 1 and "interrupted" in err and str(temp) not in err, err
        deadline = time.monotonic() + 15  # a simulation's watchdog removes its TMPDIR
        while list(temp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(temp.iterdir()) == []
