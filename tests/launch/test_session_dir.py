"""mpirun's PMIx start-up failure (exit 213), reproduced for real and shown gone.

A killed mpirun leaves its pid-named session directory (/tmp/ompi.<pid> for Open MPI 5); a
later mpirun given the same pid cannot bind its rendezvous socket there. The kernel's
ns_last_pid (root only) chooses the next pid, so the collision is made on purpose: plain
mpirun at that pid fails, a launch started by collbench (a TMPDIR of its own) does not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from collbench.launch import local
from collbench.launch.base import KernelCall
from collbench.launch.process import TMP_PREFIX, Finished
from tests.conftest import mpi_tool

NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
ATTEMPTS = 60  # other processes on the machine may take the chosen pid first

pytestmark = pytest.mark.mpi


def _mpirun() -> list[str]:
    mpirun = mpi_tool("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    if not os.access(NS_LAST_PID, os.W_OK):
        pytest.skip("choosing the next pid needs root (ns_last_pid)")
    return [str(mpirun), "--allow-run-as-root", "--mca", "btl", "^ofi", "-np", "1"]


def _in_session(sid: int) -> list[int]:
    """Processes of session `sid`: while one lives (or is an unreaped zombie), the kernel
    gives nobody the pid `sid`."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own TMPDIR, for mpirun and for collbench's launch directories alike:
    nothing here looks at the machine's /tmp, which other collbench runs share."""
    own = tmp_path / "tmp"
    own.mkdir()
    monkeypatch.setenv("TMPDIR", str(own))
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    return own


@pytest.fixture
def stale_pid(temp: Path) -> Iterator[int]:
    """The pid of a SIGKILLed mpirun whose session directory is left in this test's TMPDIR."""
    mpirun = _mpirun()
    proc = subprocess.Popen([*mpirun, "sleep", "60"], env=dict(os.environ),
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    session = temp / f"ompi.{proc.pid}"
    try:
        deadline = time.monotonic() + 30
        while not any(session.glob("pmix.*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while (left := _in_session(proc.pid)) and time.monotonic() < deadline:
            for pid in left:  # the ranks, in process groups of their own: killpg missed them
                with contextlib.suppress(ProcessLookupError):  # it may be ending already
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        if not any(session.glob("pmix.*")):
            pytest.skip(f"this MPI keeps no session directory at {session}")
        yield proc.pid
    finally:
        subprocess.run(["rm", "-rf", str(session)], check=False)


# Sets the next pid, then starts mpirun in the background (a fork with nothing between),
# writes the pid it got and passes on its exit status. $0 is the pid file.
AT_PID = 'printf %s "$1" >/proc/sys/kernel/ns_last_pid; shift; "$@" & echo "$!" >"$0"; wait "$!"'


def _at_pid(pid: int, start: Callable[[list[str]], None], pidfile: Path) -> bool:
    """start(argv) runs mpirun at `pid` (argv: the AT_PID wrapper around it). True when it
    got that pid; another process on the machine may take it first: tried again."""
    mpirun = [*_mpirun(), "true"]
    for _ in range(ATTEMPTS):
        start(["sh", "-c", AT_PID, str(pidfile), str(pid - 1), *mpirun])
        if int(pidfile.read_text()) == pid:
            return True
    return False


def test_a_stale_session_directory_fails_plain_mpirun_but_not_a_launch(
        stale_pid: int, temp: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pidfile = tmp_path / "mpirun.pid"
    monkeypatch.setattr(local, "STARTUP_RETRIES", 0)  # no second start to hide a failure
    call = KernelCall(Path("true"), tmp_path / "jobs", tmp_path / "out")
    env = dict(os.environ)  # TMPDIR: this test's, where the stale directory is
    done: list[Finished] = []

    def launch(argv: list[str]) -> None:
        done.append(local.run_started(argv, env, 60, call))

    assert _at_pid(stale_pid, launch, pidfile), "never started mpirun at the stale pid"
    assert done[-1].returncode == 0, done[-1].stderr_tail
    assert (temp / f"ompi.{stale_pid}").exists()  # untouched: the launch used its own TMPDIR
    assert not list(temp.glob(f"{TMP_PREFIX}*"))  # and removed it

    # The control: the same pid without a TMPDIR of its own trips on the stale directory
    # (and PMIx removes it while failing, so this comes second).
    plain: list[subprocess.CompletedProcess[str]] = []

    def bare(argv: list[str]) -> None:
        plain.append(subprocess.run(argv, env=env, capture_output=True, text=True,
                                    timeout=60, check=False))

    assert _at_pid(stale_pid, bare, pidfile), "never started mpirun at the stale pid"
    assert plain[-1].returncode == 213 and "listener thread failed" in plain[-1].stderr
