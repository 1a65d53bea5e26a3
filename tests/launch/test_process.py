import os
import sys
import time
from pathlib import Path

from collbench.launch.process import run_group

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
