"""Files that appear whole or not at all (collbench/storefiles.py): dead writers' temporaries
swept, no folder made for a mistyped path, and a write that fails on a full or read-only file
system is one line naming the file, with nothing left behind."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from collbench import storefiles
from collbench.cli import main
from collbench.errors import UserError
from tests.test_faults import _fill, tmpfs  # noqa: F401  (the fixture: a small tmpfs)
from tests.test_runner import write_spec


def _write(text: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        tmp.write_text(text)
    return write


def _temporary_name(target: str, pid: int, host: str) -> str:
    """A temporary file's name as storefiles.temporary() makes it."""
    return f".{target}.{pid}-{host}.0123abcd.tmp.csv"


def test_a_write_sweeps_dead_writers_temporaries_and_keeps_live_ones(tmp_path: Path) -> None:
    dead = int(Path("/proc/sys/kernel/pid_max").read_text())  # no process ever has it
    live = subprocess.Popen(["sleep", "60"])
    host = storefiles._HOST
    other_host = "0" * 8 if host != "0" * 8 else "1" * 8
    try:
        kept = {_temporary_name("x.csv", live.pid, host),  # a live writer's
                _temporary_name("x.csv", dead, other_host),  # a PID of another machine
                ".x.csv.k3j4l5m6.tmp.csv"}  # not of this naming: not ours to judge
        swept = {_temporary_name("x.csv", dead, host), _temporary_name("y.parquet", dead, host)}
        for name in kept | swept:
            (tmp_path / name).write_text("partial")
        storefiles.publish(tmp_path / "x.csv", _write("a\n1\n"))
        assert set(os.listdir(tmp_path)) == kept | {"x.csv"}
        assert (tmp_path / "x.csv").read_text() == "a\n1\n"
    finally:
        live.kill()
        live.wait()


def test_publish_makes_no_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"x.csv: the folder .*/no does not exist; valid: an "
                                        r"existing folder$"):
        storefiles.publish(tmp_path / "no" / "x.csv", _write("a\n"))
    assert not (tmp_path / "no").exists()


def test_a_full_disk_is_one_line_naming_the_file(tmpfs: Path) -> None:  # noqa: F811
    (tmpfs / "d").mkdir()
    old = tmpfs / "d" / "x.toml"
    old.write_text("before\n")
    filler = _fill(tmpfs)
    with pytest.raises(UserError) as got:
        storefiles.atomic_write(old, b"y" * (1 << 20))
    assert str(got.value) == f"{old}: cannot write: No space left on device"
    assert isinstance(got.value, OSError)  # callers that word it themselves still can
    assert old.read_text() == "before\n" and os.listdir(tmpfs / "d") == ["x.toml"]
    filler.unlink()
    storefiles.atomic_write(old, b"after\n")
    assert old.read_text() == "after\n"


def test_a_read_only_file_system_is_one_line_naming_the_file(tmpfs: Path) -> None:  # noqa: F811
    rw, ro = tmpfs / "rw", tmpfs / "ro"
    rw.mkdir()
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(rw), str(ro)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
    for path in (ro / "x.json", ro / "new" / "x.json"):  # the folder too is made by the write
        with pytest.raises(UserError, match=f"^{path}: cannot write: Read-only file system$"):
            storefiles.atomic_write(path, b"{}\n")
    assert os.listdir(rw) == []


def test_run_on_a_full_disk_names_the_file_it_could_not_write(
        tmpfs: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    """The campaign's files are written at creation: the line names which (before: the
    operating system's words alone, or the temporary file's name)."""
    spec, out = write_spec(tmpfs, nprocs="[2]"), tmpfs / "res"
    out.mkdir()
    filler = _fill(tmpfs)
    assert main(["run", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"collbench: error: {out}/spec.toml: cannot write: No space left"), err
    filler.unlink()
    assert main(["run", str(spec), "-o", str(out)]) == 0


def test_a_killed_commands_private_folder_is_swept_at_the_next_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`platform calibrate` and `model loggp` measure under a private temporary folder; a
    SIGKILL leaves it behind, and the next such command on this host removes it (a live
    process's folder stays)."""
    import signal
    import subprocess
    import sys
    import tempfile

    from collbench.storefiles import private_dir

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    code = ("import os, signal\nfrom collbench.storefiles import private_dir\n"
            "d = private_dir('collbench-calibrate-')\n(d / 'pingpong-0').mkdir()\n"
            "print(d, flush=True)\nos.kill(os.getpid(), signal.SIGKILL)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "TMPDIR": str(tmp_path)}, check=False)
    assert done.returncode == -signal.SIGKILL
    left = Path(done.stdout.strip())
    assert left.parent == tmp_path and (left / "pingpong-0").is_dir()
    live = subprocess.Popen([sys.executable, "-c", code.replace(
        "os.kill(os.getpid(), signal.SIGKILL)", "import time; time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    try:
        assert live.stdout is not None
        busy = Path(live.stdout.readline().strip())
        mine = private_dir("collbench-calibrate-")
        assert not left.exists() and busy.is_dir() and mine.is_dir()
    finally:
        live.kill()
        live.wait()
