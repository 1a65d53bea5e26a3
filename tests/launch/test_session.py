"""A launch's processes are found by session, not only by process group: mpirun puts each
rank in a group of its own, so a killed or crashed mpirun would leave its ranks running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collbench.launch import session
from collbench.launch.process import Finished, run_group
from tests.conftest import mpi_tool

# A launcher that starts a child in a process group of its own (as prterun does with its
# ranks), writes the child's pid, then sleeps (or exits 1 at once: a crashed launcher).
LAUNCHER = (
    "import os, subprocess, sys, time, pathlib\n"
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],"
    " process_group=0)\n"
    "pathlib.Path(sys.argv[1]).write_text(str(c.pid))\n"
    "sys.exit(1) if sys.argv[2] == 'crash' else time.sleep(300)\n"
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _gone(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


@pytest.mark.parametrize("how", ["timeout", "crash"])
def test_a_child_in_its_own_group_does_not_outlive_the_launch(tmp_path: Path,
                                                              how: str) -> None:
    pidfile = tmp_path / "child.pid"
    done = run_group([sys.executable, "-c", LAUNCHER, str(pidfile), how], os.environ,
                     1.5 if how == "timeout" else 60, tmp_path)
    assert done.timed_out == (how == "timeout") and done.returncode != 0
    child = int(pidfile.read_text())
    assert os.getpgid(child) == child if _alive(child) else True
    assert _gone(child), "the child in its own process group survived the launch"


def test_members_lists_the_session_and_not_its_zombies(tmp_path: Path) -> None:
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              start_new_session=True)
    try:
        assert session.members(leader.pid) == [leader.pid]
        assert os.getpid() not in session.members(leader.pid)
        os.kill(leader.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while session.members(leader.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert session.members(leader.pid) == []  # a zombie until reaped: not a member
    finally:
        leader.kill()
        leader.wait()


@pytest.mark.mpi
def test_ranks_of_a_crashed_mpirun_are_killed(tmp_path: Path) -> None:
    """Real Open MPI: mpirun dies of SIGKILL (the OOM killer, a crash) while its ranks run;
    the launch's end kills the ranks, which killpg of mpirun's group does not reach."""
    mpirun = mpi_tool("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    marker = tmp_path / "rank-marker"
    argv = [str(mpirun), "--allow-run-as-root", "--oversubscribe", "--mca", "btl", "^ofi",
            "-np", "2", "sh", "-c", f'echo "$$" >>{marker}; exec sleep 300']
    result: list[Finished] = []
    env = dict(os.environ, TMPDIR=str(tmp_path))  # the killed mpirun's session directory
    runner = threading.Thread(
        target=lambda: result.append(run_group(argv, env, 120, tmp_path)))
    runner.start()
    deadline = time.monotonic() + 60
    while (not marker.exists() or len(marker.read_text().split()) < 2) and \
            time.monotonic() < deadline:
        time.sleep(0.05)
    ranks = [int(p) for p in marker.read_text().split()]
    assert len(ranks) == 2
    launcher = os.getsid(ranks[0])
    assert all(os.getpgid(r) != launcher for r in ranks)  # why killpg is not enough
    os.kill(launcher, signal.SIGKILL)
    runner.join(60)
    assert result and result[0].returncode == -signal.SIGKILL
    assert all(_gone(r) for r in ranks), "a rank outlived its SIGKILLed mpirun"


# collbench stand-in: runs LAUNCHER through run_group with a scratch directory, until killed.
PARENT = (
    "import os, sys, pathlib\n"
    "from collbench.launch.process import run_group\n"
    "scratch = pathlib.Path(sys.argv[2]); scratch.mkdir()\n"
    "(scratch / 'ompi.1').mkdir()\n"
    "run_group([sys.executable, '-c', sys.argv[3], sys.argv[1], 'sleep'], os.environ, 600,\n"
    "          scratch.parent / 'logs', scratch=scratch)\n"
)


def test_when_collbench_dies_the_watchdog_ends_the_session_and_removes_the_scratch(
        tmp_path: Path) -> None:
    pidfile, scratch = tmp_path / "child.pid", tmp_path / "scratch"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pidfile), str(scratch),
                               LAUNCHER], start_new_session=True)
    deadline = time.monotonic() + 60
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    os.killpg(parent.pid, signal.SIGKILL)  # collbench and its own group, no cleanup
    parent.wait()
    assert _gone(child, 15), "the rank-like child outlived collbench"
    deadline = time.monotonic() + 15
    while scratch.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not scratch.exists()


def test_a_launch_that_ends_removes_its_scratch(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    (scratch / "ompi.1").mkdir(parents=True)
    done = run_group([sys.executable, "-c", "pass"], os.environ, 60, tmp_path / "logs",
                     scratch=scratch)
    assert done.returncode == 0 and not scratch.exists()
