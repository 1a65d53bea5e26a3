"""`collbench study` end to end: checks before running, resume after an interruption, the
report; with the fake backend (fast) and with real Open MPI (a setting that really wins)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.cli import main

SPEC = """\
[campaign]
name = "st"

[measure]
collectives = ["bcast"]
sizes = [8, 64]
nprocs = 2
iterations = 5
warmup = 1

[run]
backend = "fake"
repetitions = 3
timeout = 60
seed = 9

[[study.parameters]]
name = "bind_to"
values = ["socket"]

[[study.parameters]]
name = "mpi_leave_pinned"
values = ["true", "false"]
"""


def write(tmp_path: Path, text: str = SPEC) -> Path:
    p = tmp_path / "study.toml"
    p.write_text(text)
    return p


def launches(out: Path) -> dict[str, bytes]:
    return {f"{p.parent.parent.name}/{p.name}": p.read_bytes()
            for p in out.glob("stages/*/launches/*.jsonl")}


def test_problems_are_reported_before_anything_runs(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path, SPEC.replace("mpi_leave_pinned", "mpi_leave_pined", 1))
    out = tmp_path / "out"
    assert main(["study", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "study.parameters[1].name: 'mpi_leave_pined'" in err
    assert "did you mean mpi_leave_pinned" in err
    assert not out.exists()
    spec = write(tmp_path, SPEC.replace('values = ["true", "false"]', 'values = ["true", "x"]'))
    assert main(["study", str(spec), "--check"]) == 2
    assert "values[1]: 'x' is not a value of mpi_leave_pinned; valid: false (0)" in \
        capsys.readouterr().err


def test_check_lists_stages_and_launches(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["study", str(write(tmp_path)), "--check"]) == 0
    out = capsys.readouterr().out
    assert "1. bind_to: baseline core vs socket: 6 launches" in out
    assert "2. mpi_leave_pinned: baseline auto (Open MPI default auto) vs true, false: " \
           "9 launches" in out


def test_interrupted_study_resumes_and_reports(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write(tmp_path), tmp_path / "out"
    env = {**os.environ, "COLLBENCH_FAKE_POINT_S": "0.15"}
    proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "study", str(spec), "-o",
                             str(out)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("stages/02-*/launches/*.jsonl")):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "--resume" in err
    before = launches(out)
    assert 7 <= len(before) < 15
    assert (out / "stages/01-bind_to/decision.json").exists()
    assert not (out / "stages/02-mpi_leave_pinned/decision.json").exists()
    assert main(["study", str(spec), "-o", str(out)]) == 2  # needs --resume
    assert main(["study", str(spec), "-o", str(out), "--resume"]) == 0
    after = launches(out)
    assert len(after) == 6 + 9 and all(after[k] == v for k, v in before.items())
    decision = json.loads((out / "stages/02-mpi_leave_pinned/decision.json").read_text())
    assert decision["kept"] == "auto"  # the fake kernel ignores MCA settings: no gain
    assert [len(s["scores"]) for s in decision["settings"]] == [3, 3, 3]
    capsys.readouterr()
    assert main(["study", str(out), "--report"]) == 0
    md = capsys.readouterr().out
    assert "## 2. mpi_leave_pinned (baseline auto; Open MPI default auto)" in md
    assert "| true | 3/3 |" in md
    assert "mpirun -np 2 --map-by core --bind-to core ./your_program" in md
    figures = sorted(p.name for p in (out / "report").glob("*.png"))
    assert figures == ["01-bind_to-bcast-np-2.png", "01-bind_to.png",
                       "02-mpi_leave_pinned-bcast-np-2.png", "02-mpi_leave_pinned.png"]
    assert (out / "report" / "report.md").read_text().strip() == md.strip()


def test_a_changed_study_is_not_resumed_into_the_old_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write(tmp_path), tmp_path / "out"
    assert main(["study", str(spec), "-o", str(out)]) == 0
    write(tmp_path, SPEC.replace("repetitions = 3", "repetitions = 4"))
    assert main(["study", str(spec), "-o", str(out), "--resume"]) == 2
    assert "differs from the study stored" in capsys.readouterr().err


@pytest.mark.mpi
def test_a_placement_mpirun_refuses_is_reported_before_running(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Open MPI 5 binds only at or below the mapping object: core mapping, socket binding.
    spec = write(tmp_path, SPEC.replace('backend = "fake"', 'backend = "local"'))
    out = tmp_path / "out"
    assert main(["study", str(spec), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "study.parameters[0] (bind_to): mpirun refuses -np 2 --map-by core --bind-to " \
           "socket; exit status" in err
    assert err.count("\n") == 1 and not out.exists()


REAL = """\
# Pipelined bcast cut into 1 KiB segments is ~10x slower at 1 MiB than unsegmented.
[campaign]
name = "real"

[measure]
collectives = "bcast"
sizes = ["256K", "1M"]
nprocs = 2
iterations = 10
warmup = 2

[mca]
fixed = { coll_tuned_use_dynamic_rules = 1, coll_tuned_bcast_algorithm = "pipeline" }

[run]
repetitions = 6
timeout = 120
seed = 4

[[study.parameters]]
name = "coll_tuned_bcast_algorithm_segmentsize"
baseline = "1K"
values = [0]

[[study.parameters]]
name = "btl_sm_eager_limit"
values = ["16K"]
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_real_open_mpi_study_keeps_a_significantly_better_setting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional test only
    spec, out = write(tmp_path, REAL), tmp_path / "out"
    assert main(["study", str(spec), "-o", str(out), "--report"]) == 0
    md = capsys.readouterr().out
    stage1 = out / "stages/01-coll_tuned_bcast_algorithm_segmentsize"
    first = json.loads((stage1 / "decision.json").read_text())
    assert first["baseline"] == "1024" and first["kept"] == "0", first["settings"]
    assert first["settings"][1]["ratio"] < 0.5
    second = out / "stages/02-btl_sm_eager_limit"
    # The second stage ran with the first one's kept setting fixed.
    assert "coll_tuned_bcast_algorithm_segmentsize = \"0\"" in (second / "spec.toml").read_text()
    rows = [json.loads(line) for p in (second / "launches").glob("*.jsonl")
            for line in p.read_text().splitlines()]
    assert len(rows) == 2 * 6 * 2 and {r["status"] for r in rows} == {"ok"}
    commands = [json.loads(p.read_text())["command"]
                for p in (second / "launches").glob("*.meta.json")]
    assert len(commands) == 12
    key = "coll_tuned_bcast_algorithm_segmentsize"
    assert all(key in c and c[c.index(key) + 1] == "0" for c in commands)
    # The kept segment size (0) is Open MPI's default, so the final line need not set it.
    assert ("mpirun -np 2 --map-by core --bind-to core --mca coll_tuned_use_dynamic_rules 1 "
            "--mca coll_tuned_bcast_algorithm pipeline ./your_program") in md
