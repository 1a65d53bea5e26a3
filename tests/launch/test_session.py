"""A launch's processes are found by session, not only by process group: mpirun puts each
rank in a group of its own, so a killed or crashed mpirun would leave its ranks running."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from collbench.launch import session
from collbench.launch.process import TMP_PREFIX, Finished, run_group, start_watchdog
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


def _pid_in(pidfile: Path, seconds: float = 60.0) -> int:
    """The pid another process writes to pidfile (not atomically: wait for all of it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            text = pidfile.read_text()
            if text.isdigit():
                return int(text)
        time.sleep(0.05)
    raise AssertionError(f"no pid in {pidfile}")


@pytest.mark.parametrize("how", ["timeout", "crash"])
def test_a_child_in_its_own_group_does_not_outlive_the_launch(tmp_path: Path,
                                                              how: str) -> None:
    pidfile = tmp_path / "child.pid"
    done = run_group([sys.executable, "-c", LAUNCHER, str(pidfile), how], os.environ,
                     1.5 if how == "timeout" else 60, tmp_path)
    assert done.timed_out == (how == "timeout") and done.returncode != 0
    child = _pid_in(pidfile, 5)
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


# collbench stand-in: runs LAUNCHER through run_group with a TMPDIR of its own (under the
# TMPDIR it was given), where the launcher leaves a file, until killed.
PARENT = (
    "import os, sys, pathlib\n"
    "from collbench.launch.process import run_group\n"
    "run_group([sys.executable, '-c', 'import os, pathlib; pathlib.Path(os.environ[\"TMPDIR\"],"
    " \"ompi.1\").mkdir(); exec(os.environ[\"LAUNCHER\"])', sys.argv[1], 'sleep'],\n"
    "          os.environ, 600, pathlib.Path(sys.argv[2]), private_tmp=True)\n"
)


def test_when_collbench_dies_the_watchdog_ends_the_session_and_removes_its_tmpdir(
        tmp_path: Path) -> None:
    pidfile, temp = tmp_path / "child.pid", tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp), LAUNCHER=LAUNCHER)
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(pidfile), str(tmp_path / "logs")],
                              start_new_session=True, env=env)
    child = _pid_in(pidfile)
    assert list(temp.glob(f"{TMP_PREFIX}*/ompi.1"))
    os.killpg(parent.pid, signal.SIGKILL)  # collbench and its own group, no cleanup
    parent.wait()
    assert _gone(child, 15), "the rank-like child outlived collbench"
    deadline = time.monotonic() + 15
    while list(temp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(temp.iterdir()) == []


def test_collbench_dying_before_it_tells_the_pid_still_ends_the_launch(tmp_path: Path) -> None:
    """The watchdog learns the launch's token and TMPDIR before the command starts; if
    collbench dies after starting it but before writing its pid, the command and its child
    (in a group of its own) are found by the token in their environment."""
    pidfile, temp = tmp_path / "child.pid", tmp_path / "launch-tmp"
    temp.mkdir()
    guard = start_watchdog()
    guard.stdin.write(f"token cafe\ntmp {os.fsencode(temp).hex()}\n".encode())  # type: ignore[union-attr]
    guard.stdin.flush()  # type: ignore[union-attr]
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(pidfile), "sleep"],
                                env=dict(os.environ, **{session.LAUNCH_TOKEN: "cafe"}),
                                start_new_session=True)
    child = _pid_in(pidfile)
    assert sorted(session.carrying("cafe")) == sorted([launcher.pid, child])
    guard.stdin.close()  # type: ignore[union-attr]  # what collbench's death does to the pipe
    assert guard.wait(timeout=30) == 0
    launcher.wait(timeout=10)
    assert _gone(child) and not temp.exists()


def test_a_launch_that_ends_removes_its_tmpdir(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = "import os, pathlib; pathlib.Path(os.environ['TMPDIR'], 'ompi.1').mkdir()"
    done = run_group([sys.executable, "-c", code], os.environ, 60, tmp_path / "logs",
                     private_tmp=True)
    assert done.returncode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["logs"]
