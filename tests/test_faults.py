"""Faults made real: signals at random moments, concurrent writers on one folder, a full file
system (a small tmpfs), a read-only mount, damaged stored files, hostile folder names.
After each: no process collbench started survives it, nothing finished is lost or doubled,
and every error is one line with exit status 2."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store
from tests.test_runner import points, write_spec


def _collbench(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "collbench.cli", *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def _processes_naming(marker: str) -> list[str]:
    """Command lines of live processes that mention `marker` (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().split(") ")[-1].startswith("Z"):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(f"{entry.name}: {cmd[:200]}")
    return found


def _wait_for(predicate: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _no_survivors(marker: str, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while (left := _processes_naming(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], left


HANG = ["--kernel-debug", "--debug hang --debug-at 1"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM])
def test_no_launched_process_outlives_collbench(tmp_path: Path, sig: signal.Signals) -> None:
    """The fake kernel hangs; collbench dies (SIGKILL: no chance to clean up) or is told to
    stop (SIGHUP behaves as SIGTERM): the launch's whole process group goes too."""
    spec, out = write_spec(tmp_path, nprocs="[2]", timeout=600), tmp_path / "res"
    proc = _collbench("run", str(spec), "-o", str(out), *HANG)
    kernel_argv = str(out / "work")
    _wait_for(lambda: _processes_naming(kernel_argv), 30, "the hanging kernel")
    time.sleep(random.uniform(0, 0.5))  # a random moment inside the launch
    if sig == signal.SIGKILL:
        os.killpg(proc.pid, signal.SIGKILL)  # collbench and all its own children at once
    else:
        os.kill(proc.pid, sig)
    code = proc.wait(timeout=30)
    assert code == (-9 if sig == signal.SIGKILL else 130)
    _no_survivors(kernel_argv)
    # the interrupted launch is not stored; --resume (no debug switch) completes the campaign
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    rows = points(out)
    assert len(rows) == len(set(rows)) and {r[4] for r in rows} == {"ok"}


@pytest.mark.mpi
def test_no_rank_outlives_a_killed_collbench(tmp_path: Path) -> None:
    """Real Open MPI: mpirun (prterun) and every rank of a hung launch are gone within
    seconds of a SIGKILL of collbench alone."""
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "k"\n[measure]\ncollectives = "bcast"\n'
                    'sizes = [8, 64]\nnprocs = 2\niterations = 5\nwarmup = 1\n'
                    "[run]\ntimeout = 600\n")
    out, temp = tmp_path / "res", tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, OMPI_MCA_mpi_yield_when_idle="1", TMPDIR=str(temp))
    proc = _collbench("run", str(spec), "-o", str(out), *HANG, env=env)
    marker = str(out / "work")
    _wait_for(lambda: len(_processes_naming(marker)) >= 3, 120, "mpirun and its ranks")
    time.sleep(1.0)  # the ranks are inside the hung point
    assert list(temp.glob("collbench-launch-*/ompi.*")), "mpirun's session directory"
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -9
    _no_survivors(marker, 15)
    # and mpirun's session directory goes with it: a later mpirun given the same pid
    # would fail to start on it (tests/launch/test_session_dir.py)
    _wait_for(lambda: not list(temp.glob("collbench-launch-*")), 15, "the session directory")


def test_a_second_writer_is_refused_and_readers_keep_working(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2, 3]", reps=2), tmp_path / "res"
    env = dict(os.environ, COLLBENCH_FAKE_POINT_S="0.05")
    first = _collbench("run", str(spec), "-o", str(out), env=env)
    _wait_for(lambda: len(list((out / "launches").glob("*.jsonl"))) >= 1, 60, "a launch")
    for args in (["run", str(spec), "-o", str(out), "--resume"],
                 ["ingest", str(Path(__file__).parent / "data" / "samples" / "osu-7.4" /
                                "osu_bcast_np2.txt"), "--nprocs", "2", "-o", str(out)]):
        second = _collbench(*args)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        line = err.decode().strip()
        assert line.count("\n") == 0 and f"in use by another collbench (PID {first.pid})" in line
    assert main(["show", str(out), "--format", "csv"]) == 0  # a reader while it writes
    assert first.wait(timeout=120) == 0
    rows = points(out)
    assert len(rows) == len(set(rows)) == 4 * 5 * 7  # nothing doubled, nothing lost


def test_two_resumes_at_once_store_each_launch_once(tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2, 3]", reps=2), tmp_path / "res"
    env = dict(os.environ, COLLBENCH_FAKE_POINT_S="0.02")
    runs = [_collbench("run", str(spec), "-o", str(out), "--resume", env=env)
            for _ in range(3)]
    codes = sorted(p.wait(timeout=120) for p in runs)
    assert codes[0] == 0 and set(codes[1:]) <= {0, 2}
    for p in [p for p in runs if p.returncode == 2]:
        assert b"in use by another collbench" in p.communicate()[1]
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    rows = points(out)
    assert len(rows) == len(set(rows)) == 4 * 5 * 7


def test_an_interrupted_creation_is_completed_by_the_same_command(tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    out.mkdir()
    (out / "spec.toml").write_text("half")  # a kill between two files of the creation
    (out / "plan.json").write_text("{")
    assert main(["run", str(spec), "-o", str(out)]) == 0
    assert {r[4] for r in points(out)} == {"ok"}


def test_an_early_failure_leaves_no_folder(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    spec.write_text(spec.read_text().replace('"pipeline"', '"pipelined"'))
    assert main(["run", str(spec), "-o", str(out)]) == 2
    assert "pipelined" in capsys.readouterr().err
    assert not out.exists()


def test_damaged_launch_files_are_named_and_measured_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2, 3, 4]"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    files = sorted((out / "launches").glob("*.jsonl"))
    good = {f.name: f.read_bytes() for f in files}
    damage = {files[0]: good[files[0].name][:-7],  # cut short
              files[1]: b""}  # emptied
    for f, body in damage.items():
        f.write_bytes(body)
    capsys.readouterr()
    for cmd in (["show", str(out)], ["compare", str(out)], ["query", str(out), "SELECT 1"]):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "damaged (" in err and ".jsonl" in err
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    assert "stored rows are damaged" in capsys.readouterr().err
    assert {f.name: f.read_bytes() for f in sorted((out / "launches").glob("*.jsonl"))
            if f not in damage} == {n: b for n, b in good.items()
                                    if n not in {f.name for f in damage}}
    rows = points(out)
    assert len(rows) == len(set(rows)) and {r[4] for r in rows} == {"ok"}


def test_a_launch_with_failed_points_is_retried(tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, nprocs="[2]", validate="true"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out), "--kernel-debug",
                 "--debug corrupt --debug-at 1"]) == 1
    assert Store(out).finished() and "partial" in Store(out).finished().values()
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0  # not rerun by default
    assert "invalid" in {r[4] for r in points(out)}
    assert main(["run", str(spec), "-o", str(out), "--resume", "--retry-failed"]) == 0
    assert {r[4] for r in points(out)} == {"ok"}


@pytest.mark.parametrize("name", ["r[1]", "r*", "r?x", "it's \"q\"", "a b"])
def test_a_results_path_with_glob_characters_reads_that_folder_only(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, nprocs="[2]")
    decoy = tmp_path / "r1"  # what "r[1]" would match as a glob
    assert main(["run", str(spec), "-o", str(decoy)]) == 0
    out = tmp_path / name
    spec.write_text(spec.read_text().replace("[2]", "[3]"))
    assert main(["run", str(spec), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["show", str(out), "--format", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown and {r["nprocs"] for r in shown} == {3}


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mnt)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        if (mnt / "ro").exists():
            subprocess.run(["umount", "-l", str(mnt / "ro")], check=False)
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path) -> Path:
    """Take every free byte of the file system holding `folder`."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        chunk = 1 << 20
        while chunk:
            try:
                os.write(fd, b"\0" * chunk)
            except OSError:
                chunk //= 2
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_one_line_and_resume_completes(tmpfs: Path) -> None:
    spec, out = write_spec(tmpfs, nprocs="[2, 3]", reps=2), tmpfs / "res"
    # 35 points x 0.03 s: the disk is full (a few ms) long before the last launch stores
    env = dict(os.environ, COLLBENCH_FAKE_POINT_S="0.03")
    proc = _collbench("run", str(spec), "-o", str(out), env=env)
    _wait_for(lambda: len(list((out / "launches").glob("*.jsonl"))) >= 2, 60, "2 launches")
    filler = _fill(tmpfs)
    _, err = proc.communicate(timeout=120)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 2, err
    assert lines[-1].startswith("collbench: error: ") and "No space left" in lines[-1]
    assert "Traceback" not in err.decode()
    stored = {f.name: f.read_bytes() for f in (out / "launches").glob("*.jsonl")}
    assert len(stored) >= 2
    filler.unlink()
    assert main(["run", str(spec), "-o", str(out), "--resume", "--retry-failed"]) == 0
    after = {f.name: f.read_bytes() for f in (out / "launches").glob("*.jsonl")}
    assert all(after[n] == b for n, b in stored.items() if b"\"ok\"" in b)
    rows = points(out)
    assert len(rows) == len(set(rows)) == 4 * 5 * 7 and {r[4] for r in rows} == {"ok"}


def test_a_full_disk_at_creation_then_the_same_command_works(
        tmpfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmpfs, nprocs="[2]")
    (tmpfs / "res").mkdir()
    filler = _fill(tmpfs)
    assert main(["run", str(spec), "-o", str(tmpfs / "res")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "No space left" in err
    filler.unlink()
    assert main(["run", str(spec), "-o", str(tmpfs / "res")]) == 0


def test_a_read_only_folder_is_one_line(tmpfs: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec, rw = write_spec(tmpfs, nprocs="[2]"), tmpfs / "rw"
    assert main(["run", str(spec), "-o", str(rw / "res")]) == 0
    ro = tmpfs / "ro"  # the same folder, seen through a read-only bind mount
    ro.mkdir()
    subprocess.run(["mount", "--bind", str(rw), str(ro)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
    out = ro / "res"
    capsys.readouterr()
    for cmd in (["run", str(spec), "-o", str(out), "--resume"],
                ["run", str(spec), "-o", str(ro / "new")],
                ["export", str(out), "-o", str(ro / "x.csv")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "Read-only file system" in err, err
    assert main(["show", str(out)]) == 0  # reading needs no write access


def test_output_to_an_existing_file_or_missing_parent(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, nprocs="[2]")
    a_file = tmp_path / "afile"
    a_file.write_text("mine")
    assert main(["run", str(spec), "-o", str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().err and a_file.read_text() == "mine"
    assert main(["run", str(spec), "-o", str(tmp_path / "new" / "deeper" / "res")]) == 0


def _results(tmp_path: Path) -> Path:
    spec, out = write_spec(tmp_path, nprocs="[2]"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    return out


def test_export_to_a_full_disk_is_one_line_and_leaves_nothing(
        tmpfs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = _results(tmp_path)
    filler = _fill(tmpfs)
    capsys.readouterr()
    for name in ("x.csv", "x.parquet"):
        assert main(["export", str(res), "-o", str(tmpfs / name)]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"collbench: error: {tmpfs / name}: cannot write: No space left on device"
    assert os.listdir(tmpfs) == [filler.name]  # no partial file, no temporary
    filler.unlink()
    assert main(["export", str(res), "-o", str(tmpfs / "x.csv")]) == 0
    assert sorted(os.listdir(tmpfs)) == ["x.csv"]


def test_export_makes_no_missing_folder(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    res = _results(tmp_path)
    capsys.readouterr()
    out = tmp_path / "typo" / "deeper" / "x.csv"
    assert main(["export", str(res), "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"collbench: error: export -o {out}: the folder {out.parent} does not exist; valid: "
        "an existing folder")
    assert not (tmp_path / "typo").exists()


def _many_rows(out: Path, launches: int = 4, rows: int = 5000) -> Path:
    """A results folder whose export takes a while (a kill lands inside it)."""
    from collbench.records import make_row

    store = Store(out)
    store.create({"name": "t", "seed": 1}, "", {"launches": []}, {})
    for n in range(launches):
        lid = f"{n:04d}-aa"
        store.write_launch(lid, [make_row(
            campaign="t", launch_id=lid, collective="bcast", algorithm="default",
            size_bytes=i, avg_us=float(i), min_us=0.5, max_us=2.0 * i + 1, status="ok",
            nprocs=2) for i in range(rows)], {"status": "ok"})
    return out


def test_a_killed_exports_temporary_is_swept_by_the_next_export(tmp_path: Path) -> None:
    from collbench import storefiles

    res, folder = _many_rows(tmp_path / "res"), tmp_path / "out"
    folder.mkdir()
    target = folder / "m.csv"
    live = subprocess.Popen(["sleep", "120"])  # a writer still at work: its file stays
    others = {f".m.csv.{live.pid}-{storefiles._HOST}.0123abcd.tmp.csv"}
    try:
        for name in others:
            (folder / name).write_text("partial")
        left: list[str] = []
        for _ in range(5):  # until a kill lands while the file is being written
            proc = _collbench("export", str(res), "-o", str(target))
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline and not (
                    left := [n for n in os.listdir(folder) if n not in others]):
                time.sleep(0.001)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            left = [n for n in os.listdir(folder) if n not in others and n != "m.csv"]
            if left:
                break
            target.unlink(missing_ok=True)
        assert left, "no kill landed inside an export"
        assert main(["export", str(res), "-o", str(target)]) == 0
        assert set(os.listdir(folder)) == others | {"m.csv"}
        assert len(target.read_text().splitlines()) == 1 + 4 * 5000
    finally:
        live.kill()
        live.wait()


@pytest.mark.mpi
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_launch_is_not_summed_up_as_stored(tmp_path: Path,
                                                     sig: signal.Signals) -> None:
    """Real Open MPI, 2 ranks: the launch under way when SIGTERM (or SIGHUP) comes is
    discarded, and the final lines say so, not that it is stored."""
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "k"\n[measure]\ncollectives = "bcast"\n'
                    'sizes = [8, 64]\nnprocs = 2\niterations = 5\nwarmup = 1\n'
                    "[run]\ntimeout = 600\n")
    out, temp = tmp_path / "res", tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, OMPI_MCA_mpi_yield_when_idle="1", TMPDIR=str(temp))
    proc = _collbench("run", str(spec), "-o", str(out), *HANG, env=env)
    marker = str(out / "work")
    _wait_for(lambda: len(_processes_naming(marker)) >= 3, 120, "mpirun and its ranks")
    time.sleep(random.uniform(0.2, 1.0))  # the ranks are inside the hung point
    os.kill(proc.pid, sig)
    stdout, stderr = (b.decode() for b in proc.communicate(timeout=60))
    assert proc.returncode == 130, stderr
    _no_survivors(marker, 15)
    assert not list(out.glob("launches/*.jsonl"))  # the discarded launch
    for line in (stdout.strip(), stderr.strip().splitlines()[-1]):
        assert "nothing stored" in line and "already stored" not in line, (stdout, stderr)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


@pytest.mark.mpi
@pytest.mark.parametrize(("sig", "keep", "seed"), [(signal.SIGTERM, False, 1),
                                                   (signal.SIGHUP, True, 2),
                                                   (signal.SIGTERM, True, 3)])
def test_model_loggp_stopped_says_so_and_leaves_nothing_running(
        tmp_path: Path, sig: signal.Signals, keep: bool, seed: int) -> None:
    """A stop at a random moment (the build, ompi_info, the placement trial, the launch,
    the fit): one line saying what is kept, exit 130, no process or temporary folder left."""
    temp, kept, model = tmp_path / "tmp", tmp_path / "kept", tmp_path / "m.p2p.toml"
    temp.mkdir()
    rnd = random.Random(seed)
    for attempt in range(3):  # again, sooner, if it finished before the stop came
        env = dict(os.environ, OMPI_MCA_mpi_yield_when_idle="1", TMPDIR=str(temp),
                   COLLBENCH_CACHE=str(tmp_path / f"cache{attempt}"))  # a compiler runs
        proc = _collbench("model", "loggp", "--map-by", "core", "-o", str(model), "--sizes",
                          "0:1M", "--reps", "3", "--burst", "8",
                          *(["--results", str(kept), "--resume"] if keep else []), env=env)
        _wait_for(lambda pid=proc.pid: _children(pid), 60,
                  "collbench to start something")
        time.sleep(rnd.uniform(0, 1.5) / 2**attempt)
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
        if proc.returncode == 130:
            break
        # it ended on its own before the stop took effect (done, or a fit refused as too
        # noisy on a loaded machine): again, sooner
        assert "Traceback" not in err.decode(), err
        model.unlink(missing_ok=True)
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 130, err
    assert "Traceback" not in err.decode()
    what = f"the placements measured are kept in {kept}" if keep else "nothing is kept"
    assert lines[-1].startswith("collbench: error: model loggp: stopped; ") \
        and what in lines[-1], lines[-1]
    _no_survivors(str(tmp_path), 15)
    assert not model.exists() and os.listdir(temp) == []  # no temporary folder left
