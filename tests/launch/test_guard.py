"""The rank guard (launch/rankguard.c), run directly as mpirun runs it for each rank: what
the program prints passes through, its exit status and signal are the guard's, what it
leaves behind is killed when it ends (whatever its session or environment), a rank that
prints past its share is stopped with one line, and a signal that ends the rank ends
everything under it. Under real mpirun: tests/apps/test_hostile_programs.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from collbench.launch import guard
from collbench.launch.process import OUTPUT_MARK

# Leaves a daemon (own session, empty environment) holding stdout and stderr, notes its pid.
DAEMON = "setsid env -i sh -c 'echo $$ > \"$0\"; exec sleep 1000' \"$1\" & " \
         "while [ ! -s \"$1\" ]; do sleep 0.02; done; echo result"


@pytest.fixture(scope="module")
def rankguard(mpicc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    mp = pytest.MonkeyPatch()
    mp.setenv("COLLBENCH_CACHE", str(tmp_path_factory.mktemp("guard-cache")))
    try:
        return guard.build(mpicc)
    finally:
        mp.undo()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _kill_if_ours(pid: int) -> None:
    if _alive(pid) and Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x001000\x00":
        os.kill(pid, signal.SIGKILL)


def test_output_and_exit_status_pass_through(rankguard: Path) -> None:
    done = subprocess.run([str(rankguard), "1000", "sh", "-c", "echo out; echo err >&2; exit 3"],
                          capture_output=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, b"out\n", b"err\n")
    died = subprocess.run([str(rankguard), "1000", "sh", "-c", "kill -SEGV $$"],
                          capture_output=True, timeout=30)
    assert died.returncode == -signal.SIGSEGV  # mpirun sees the rank die of its signal
    missing = subprocess.run([str(rankguard), "1000", "/nonexistent"], capture_output=True,
                             timeout=30)
    assert missing.returncode == 127 and b"cannot start /nonexistent" in missing.stderr


def test_a_daemon_left_behind_ends_with_the_program(rankguard: Path, tmp_path: Path) -> None:
    """The daemon holds the guard's pipes, not the reader's: the reader sees the end as soon
    as the program ends, and the daemon is gone."""
    pidfile = tmp_path / "daemon.pid"
    start = time.monotonic()
    done = subprocess.run([str(rankguard), "1000", "sh", "-c", DAEMON, "sh", str(pidfile)],
                          capture_output=True, timeout=60)
    daemon = int(pidfile.read_text())
    try:
        assert done.returncode == 0 and done.stdout == b"result\n"
        assert time.monotonic() - start < 10
        assert not _alive(daemon)
    finally:
        _kill_if_ours(daemon)


def test_a_rank_printing_past_its_share_is_stopped(rankguard: Path) -> None:
    done = subprocess.run([str(rankguard), "100", "sh", "-c",
                           "head -c 100000 /dev/zero | tr '\\0' x; sleep 60"],
                          capture_output=True, timeout=30)
    assert done.returncode == 1 and done.stdout == b"x" * 100
    assert done.stderr.decode().strip() == (
        f"{OUTPUT_MARK} a rank printed more than 100 bytes (its share of the launch's limit); "
        "it was stopped")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_that_ends_the_rank_ends_everything_under_it(rankguard: Path, tmp_path: Path,
                                                              sig: signal.Signals) -> None:
    """The program ignores the signal and has left a daemon: both end at once, and the
    guard dies of the signal, as the rank would have."""
    pidfile = tmp_path / "daemon.pid"
    script = f"trap '' {sig.name[3:]}; {DAEMON.replace('echo result', 'exec sleep 1000')}"
    proc = subprocess.Popen([str(rankguard), "1000", "sh", "-c", script, "sh", str(pidfile)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (pidfile.exists() and pidfile.read_text().strip()) and \
            time.monotonic() < deadline:
        time.sleep(0.02)
    daemon = int(pidfile.read_text())
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == -sig
        assert not _alive(daemon)
    finally:
        proc.kill()
        _kill_if_ours(daemon)
