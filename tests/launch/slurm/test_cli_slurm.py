"""`[run.slurm]` errors, `run --dry-run` and `slurm script` (fake Slurm CLI; real MPI plans)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store
from tests.launch.slurm.util import SPEC, FakeSlurm


def write(tmp_path: Path, slurm: str = "") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC.format(slurm=slurm).replace('collectives = "bcast"',
                                                  'collectives = "bcast"\nsizes = [1, 64]\n'
                                                  'algorithms = ["default", "binomial"]\n'
                                                  'map_by = ["core", "node"]'))
    return p


@pytest.mark.parametrize(("slurm", "expected"), [
    ('launcher = "sron"', "run.slurm.launcher: 'sron' is not valid; valid: srun, mpirun "
                          "(did you mean srun?)"),
    ('partiton = "x"', "run.slurm.partiton: unknown key 'partiton'; valid: partition,"),
    ('time_limit = "1h"', "run.slurm.time_limit: '1h' is not a Slurm time; valid: MINUTES"),
    ('extra_sbatch = ["--nodes=3"]', "run.slurm.extra_sbatch[0]: --nodes is set by collbench; "
                                     "use run.slurm.nodes"),
    ('partition = "a b"', "run.slurm.partition: 'a b': expected one word"),
    ("tasks_per_node = 0", "run.slurm.tasks_per_node: must be at least 1"),
])
def test_bad_slurm_settings_are_one_line_errors(tmp_path: Path, slurm: str, expected: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(write(tmp_path, slurm))]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


def test_dry_run_prints_the_scripts_and_writes_nothing(
        tmp_path: Path, fake_slurm: FakeSlurm, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(write(tmp_path, 'time_limit = "0:02:00"')), "--dry-run"]) == 0
    out = capsys.readouterr().out
    scripts = out.split("# ===== job ")
    assert len(scripts) == 3  # 60 s + 2 × (30 + 15) s do not fit 120 s: one job each
    assert out.count("\ncollbench_launch /") == 2 and "srun --mpi=pmix" in out
    assert str(tmp_path / "results" / "slurm-unit" / "work") in out  # the default -o
    job = "#!/bin/bash" + scripts[1].split("#!/bin/bash", 1)[1]
    assert subprocess.run(["bash", "-n"], input=job, text=True).returncode == 0
    assert not (tmp_path / "results").exists() and fake_slurm.calls("sbatch") == []


def test_dry_run_of_a_local_backend_prints_command_lines(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path)
    assert main(["run", str(spec), "--backend", "local", "--dry-run", "-o", "x"]) == 0
    lines = capsys.readouterr().out.splitlines()
    commands = [ln for ln in lines if not ln.startswith("#")]
    assert len(commands) == 2 and all("mpirun" in c and "--map-by" in c for c in commands)
    assert main(["run", str(spec)]) == 2
    assert "-o/--output is required" in capsys.readouterr().err


def test_slurm_script_prepares_the_folder_it_writes_into(
        tmp_path: Path, fake_slurm: FakeSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write(tmp_path, "tasks_per_node = 2"), tmp_path / "res"
    assert main(["slurm", "script", str(spec), "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.out.startswith("#!/bin/bash\n") and printed.out.count("collbench_launch /") == 2
    assert "--resume" in printed.err and fake_slurm.calls("sbatch") == []
    plan = Store(out).plan()
    assert plan["backend"] == "slurm"  # so `run --resume` goes on with Slurm
    works = sorted((out / "work").iterdir())
    assert [w.name for w in works] == [la["launch_id"] for la in
                                      sorted(plan["launches"], key=lambda x: x["launch_id"])]
    assert all((w / "jobs.txt").exists() for w in works)
    assert (out / "slurm").is_dir()  # the job's --output directory: sbatch fails without it
    # a launch the job finished is not in the next script
    (works[0] / "done").write_text("rc=0\n")
    assert main(["slurm", "script", str(spec), "-o", str(out)]) == 0
    again = capsys.readouterr().out
    assert again.count("collbench_launch /") == 1 and works[0].name not in again
    assert json.loads((out / "campaign.json").read_text())["backend"] == "slurm"
