import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collbench.launch.process import OUTPUT_LOST, OUTPUT_MARK, run_group

# A parent that starts a child and both sleep: the timeout must kill the whole group.
SPAWNER = (
    "import subprocess, sys, time, pathlib\n"
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
    "pathlib.Path(sys.argv[1]).write_text(str(c.pid))\n"
    "time.sleep(300)\n"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    start = time.monotonic()
    done = run_group([sys.executable, "-c", SPAWNER, str(pidfile)], os.environ, 1.5, tmp_path)
    assert done.timed_out and not done.interrupted
    assert time.monotonic() - start < 15
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child)


def test_exit_status_and_stderr_tail(tmp_path: Path) -> None:
    code = "import sys; sys.stderr.write('x' * 5000 + 'THE END'); sys.exit(3)"
    done = run_group([sys.executable, "-c", code], os.environ, 30, tmp_path)
    assert done.returncode == 3 and not done.timed_out
    assert done.stderr_tail.endswith("THE END") and len(done.stderr_tail) <= 4000


def test_interruption_flag_stops_the_command(tmp_path: Path) -> None:
    start = time.monotonic()
    done = run_group([sys.executable, "-c", "import time; time.sleep(60)"], os.environ, 60,
                     tmp_path, interrupted=lambda: time.monotonic() - start > 0.5)
    assert done.interrupted and time.monotonic() - start < 10


def test_wait_exit_sees_the_exit_and_the_timeout() -> None:
    import subprocess

    from collbench.launch.process import wait_exit

    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert not wait_exit(slow, 0.2) and slow.returncode is None  # still running
    finally:
        slow.kill()
    assert wait_exit(slow, 10) and slow.returncode is not None  # reaped
    quick = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
    assert wait_exit(quick, 30) and quick.returncode == 7
    assert wait_exit(quick, 0)  # already reaped: no pidfd needed


def test_a_launch_printing_past_its_limit_is_stopped_and_its_file_capped(
        tmp_path: Path) -> None:
    """10 MB printed as fast as Python can, against a limit of 1 MiB: the file holds the
    limit and no more, the launch is stopped (not left to finish or time out), and the
    reason is the last line of its stderr tail."""
    code = ("import sys, time\n"
            "for _ in range(160): sys.stdout.write('x' * 65536); sys.stdout.flush()\n"
            "time.sleep(60)\n")
    start = time.monotonic()
    done = run_group([sys.executable, "-c", code], os.environ, 60, tmp_path,
                     output_limit=1 << 20)
    assert not done.timed_out and time.monotonic() - start < 20
    assert done.output_problem == (f"{OUTPUT_MARK} the launch printed more than {1 << 20} "
                                   "bytes; it was stopped")
    assert (tmp_path / "stdout.txt").stat().st_size == 1 << 20
    assert done.stderr_tail.splitlines()[-1] == done.output_problem


@pytest.fixture
def full_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of the test's own, every block taken."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        (mnt / "logs").mkdir()
        with (mnt / "filler").open("wb", buffering=0) as f, contextlib.suppress(OSError):
            while True:
                f.write(b"\0" * 4096)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_output_a_full_disk_cannot_take_stops_the_launch_without_an_error(
        full_tmpfs: Path) -> None:
    """collbench writes the launch's files: a full disk there stops the launch, with the
    reason, instead of raising while the launch runs on."""
    code = "import time; print('x' * 100_000, flush=True); time.sleep(60)"
    start = time.monotonic()
    done = run_group([sys.executable, "-c", code], os.environ, 60, full_tmpfs / "logs")
    assert time.monotonic() - start < 20 and not done.timed_out
    assert done.output_problem.startswith(f"{OUTPUT_LOST} {full_tmpfs / 'logs'}/stdout.txt "
                                          "cannot be written (No space left on device)")


def test_a_daemon_holding_the_pipes_neither_holds_the_launch_nor_survives(
        tmp_path: Path) -> None:
    """A command that leaves a daemon (own session) holding its stdout: the launch ends
    when the command does, and the daemon, found by the launch's token, is killed."""
    pidfile = tmp_path / "daemon.pid"
    code = ("import subprocess, sys, pathlib\n"
            "d = subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
            "pathlib.Path(sys.argv[1]).write_text(str(d.pid))\n"
            "print('result', flush=True)\n")
    start = time.monotonic()
    done = run_group([sys.executable, "-c", code, str(pidfile)], os.environ, 30, tmp_path)
    daemon = int(pidfile.read_text())
    try:
        assert done.returncode == 0 and time.monotonic() - start < 10
        assert (tmp_path / "stdout.txt").read_text() == "result\n"
        assert not _alive(daemon), "the daemon outlived its launch"
    finally:
        if _alive(daemon) and Path(f"/proc/{daemon}/cmdline").read_bytes() == \
                b"sleep\x001000\x00":
            os.kill(daemon, 9)
