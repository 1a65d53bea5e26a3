"""Hostile programs as workloads, under the Open MPI wheel's real mpirun at 2 ranks: a program
that leaves a daemon behind, one that reports times that cannot be times, one whose output
crashed `run`, and one that prints without end. Each ends as stored rows with a reason, and
nothing it started outlives the launch (or a SIGKILL of collbench)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collbench.cli import main
from tests.conftest import mpi_tool

pytestmark = pytest.mark.mpi

COLLBENCH = Path(sys.executable).parent / "collbench"

# A rank that leaves a daemon behind: its own session and no environment (so neither the
# launch's session nor its token in the environment leads to it), holding the rank's stdout
# and stderr. The rank waits until the daemon has noted its pid, prints its result and ends
# (or, with "stay", sleeps on as a rank that is still running).
DAEMON_SH = """\
#!/bin/sh
setsid env -i /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$1.$$" &
while [ ! -s "$1.$$" ]; do sleep 0.02; done
echo '{"time_us": 5}'
[ "$2" = stay ] && exec sleep 1000
exit 0
"""

# The same in C: fork, setsid in the child, clear its environment, sleep.
DAEMON_C = r"""
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", argv[1], (int)getpid());
    pid_t pid = fork();  /* before MPI_Init: forking after it is not every transport's friend */
    if (pid == 0) {
        setsid();
        clearenv();
        FILE *f = fopen(path, "w");
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
        for (;;) pause();
    }
    struct stat st;
    while (stat(path, &st) != 0 || st.st_size == 0)  /* the daemon has noted its pid */
        usleep(20000);
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("{\"time_us\": 5}\n");
    MPI_Finalize();
    return 0;
}
"""

CAT_SH = '#!/bin/sh\ncat "$1"\n'  # prints what the test wrote


@pytest.fixture(autouse=True)
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A TMPDIR of the test's own (mpirun's session directories, collbench's launch
    folders), and functional runs that yield when idle (2 cores, shared)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    if mpi_tool("mpirun") is None:
        pytest.skip("no mpirun")
    return tmp


def spec(tmp_path: Path, run: str, params: str, timeout: float = 60, build: str = "") -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(f"""\
[campaign]
name = "hostile"
[measure]
nprocs = [2]
[workload]
params = {{ {params} }}
[workload.program]
{build}run = {run}
[run]
timeout = {timeout}
""")
    return path


def script(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)


def rows(out: Path) -> list[dict[str, Any]]:
    got = [json.loads(line) for f in sorted((out / "launches").glob("*.jsonl"))
           for line in f.read_text().splitlines()]
    return sorted(got, key=lambda r: json.loads(r["params"])["program"].get("case", ""))


def metas(out: Path) -> list[dict[str, Any]]:
    return [json.loads(f.read_text()) for f in (out / "launches").glob("*.meta.json")]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def gone(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def noted(folder: Path) -> list[int]:
    """The daemons' pids, as they noted them (pid.<rank's pid> files)."""
    out = []
    for f in folder.glob("pid.*"):
        with contextlib.suppress(OSError, ValueError):
            out.append(int(f.read_text()))
    return out


@contextlib.contextmanager
def daemons(folder: Path) -> Iterator[Path]:
    """A folder for the daemons' pid files; whichever daemon a failed test left is killed."""
    folder.mkdir()
    try:
        yield folder
    finally:
        for pid in noted(folder):
            if alive(pid) and ours(pid, folder):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def ours(pid: int, folder: Path) -> bool:
    """A daemon of this test (`sleep 1000`, or the C program given the folder), not a
    process that got its pid since."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return cmdline == b"sleep\x001000\x00" or os.fsencode(folder) in cmdline


# --- 1. a program that leaves a daemon behind ------------------------------------------

@pytest.mark.parametrize("kind", ["shell", "C"])
def test_a_daemon_left_behind_neither_holds_the_result_nor_survives(
        tmp_path: Path, kind: str) -> None:
    """The daemon holds the rank's stdout, which kept mpirun waiting until the timeout (the
    result lost as a timeout), and it outlived the launch in a session of its own."""
    with daemons(tmp_path / "pids") as pids:
        if kind == "shell":
            script(tmp_path, "daemon.sh", DAEMON_SH)
            path = spec(tmp_path, '["./daemon.sh", "{pids}/pid", "end"]', f'pids = "{pids}"',
                        timeout=20)
        else:
            (tmp_path / "daemon.c").write_text(DAEMON_C)
            path = spec(tmp_path, '["./daemon", "{pids}/pid"]', f'pids = "{pids}"', timeout=20,
                        build='build = ["mpicc", "daemon.c", "-o", "daemon"]\n')
        out = tmp_path / "res"
        assert main(["run", str(path), "-o", str(out)]) == 0
        (row,) = rows(out)
        assert (row["status"], row["avg_us"]) == ("ok", 5.0), row
        (meta,) = metas(out)
        assert meta["wall_s"] < 10, meta  # stored when the ranks ended, not at the timeout
        found = noted(pids)
        assert len(found) == 2
        assert gone(found, 1.0), "a daemon the program left outlived the launch"


def test_a_daemon_does_not_outlive_a_sigkill_of_collbench(tmp_path: Path) -> None:
    """collbench is SIGKILLed while the ranks run: the watchdog ends the launch, and the
    daemons (own session, no environment) go with it."""
    script(tmp_path, "daemon.sh", DAEMON_SH)
    with daemons(tmp_path / "pids") as pids:
        path = spec(tmp_path, '["./daemon.sh", "{pids}/pid", "stay"]', f'pids = "{pids}"',
                    timeout=600)
        proc = subprocess.Popen([str(COLLBENCH), "run", str(path), "-o", str(tmp_path / "res")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while len(noted(pids)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            found = noted(pids)
            assert len(found) == 2 and all(alive(p) for p in found)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # collbench and its own group, no cleanup
            proc.wait()
        assert gone(found, 20), "a daemon outlived the SIGKILL of collbench"


# --- 2. times that cannot be times ---------------------------------------------------------

@pytest.mark.parametrize(("line", "why"), [
    ('{"time_us": -5}', "metric time_us: -5 is not a time"),
    ('{"time_us": 2e12}', "metric time_us: 2e+12 is not a time"),
    ('{"time_us": NaN}', "metric time_us: nan is not a time"),
    ('{"time_us": 5, "min_us": -1}', "metric min_us: -1 is not a time"),
    ('{"time_us": 5, "size_bytes": -4}', "metric size_bytes: -4 is out of range"),
    ('{"time_us": 5}', None),
])
def test_numbers_out_of_range_fail_the_point_naming_the_metric_and_value(
        tmp_path: Path, line: str, why: str | None) -> None:
    script(tmp_path, "cat.sh", CAT_SH)
    (tmp_path / "case.txt").write_text(f"chatter\n{line}\n")
    path = spec(tmp_path, '["./cat.sh", "{case}"]', f'case = "{tmp_path / "case.txt"}"')
    out = tmp_path / "res"
    assert main(["run", str(path), "-o", str(out)]) == (0 if why is None else 1)
    (row,) = rows(out)
    if why is None:
        assert (row["status"], row["avg_us"]) == ("ok", 5.0)
        return
    assert (row["status"], row["avg_us"], row["min_us"], row["metrics"]) == (
        "failed", None, None, None), row
    assert row["error"].startswith(why), row["error"]
    assert "\n" not in row["error"]


# --- 3. output that crashed run ------------------------------------------------------------

CRASHERS = {
    "deep": '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",  # RecursionError in json
    "bigint": '{"time_us": 1' + "0" * 400 + "}",  # OverflowError making it a float
    "bigsize": '{"time_us": 5, "size_bytes": 1e300}',  # a BIGINT no reader can read
}


def test_output_that_crashed_run_is_a_stored_failed_point(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script(tmp_path, "cat.sh", CAT_SH)
    cases = []
    for name, text in CRASHERS.items():
        (tmp_path / f"{name}.txt").write_text(text + "\n")
        cases.append(str(tmp_path / f"{name}.txt"))
    path = spec(tmp_path, '["./cat.sh", "{case}"]', f"case = {json.dumps(cases)}")
    out = tmp_path / "res"
    assert main(["run", str(path), "-o", str(out)]) == 1
    got = {Path(json.loads(r["params"])["program"]["case"]).stem: r for r in rows(out)}
    assert set(got) == set(CRASHERS)
    for row in got.values():
        assert (row["status"], row["avg_us"], row["metrics"]) == ("failed", None, None), row
        assert "\n" not in row["error"]
    assert got["deep"]["error"].startswith("no JSON object line on stdout")
    assert got["bigint"]["error"].startswith("metric time_us: 1000000000000")
    assert got["bigsize"]["error"].startswith("metric size_bytes: 1e+300 is out of range")
    capsys.readouterr()
    assert main(["run", str(path), "-o", str(out), "--resume"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main(["show", str(out), "--format", "csv"]) == 0


# --- 4. a program that prints without end ---------------------------------------------------

CHATTY_SH = """\
#!/bin/sh
head -c 4194304 /dev/zero | tr '\\0' x
echo
echo '{"time_us": 5}'
"""


def test_a_chatty_program_is_stopped_at_the_output_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rank prints 4 MiB against a launch limit of 256 KiB: the launch is stopped, its
    point failed with the reason, and its stdout file holds no more than the limit."""
    monkeypatch.setattr("collbench.launch.process.OUTPUT_LIMIT", 256 * 1024, raising=False)
    script(tmp_path, "chatty.sh", CHATTY_SH)
    path = spec(tmp_path, '["./chatty.sh", "{n}"]', "n = 1")
    out = tmp_path / "res"
    assert main(["run", str(path), "-o", str(out)]) == 1
    (row,) = rows(out)
    assert (row["status"], row["avg_us"]) == ("failed", None), row
    assert row["error"].startswith("collbench: output limit: a rank printed more than "
                                   "131072 bytes"), row["error"]
    (stdout,) = (out / "work").glob("*/stdout.txt")
    assert stdout.stat().st_size <= 256 * 1024
