"""The one way into a campaign: every command that opens a folder refuses another MPI on
resume, and studies and adaptive tuning run on every backend because the opener, not the
command, configures it (SimGrid's platform from [run.simgrid], Slurm's allocation)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.errors import UserError
from collbench.plan import Plan
from tests.launch.slurm.util import launch
from tests.simgrid_support import SMALL

SPEC = """\
[campaign]
name = "opener"

[measure]
collectives = ["bcast"]
algorithms = ["default", "binomial", "pipeline"]
sizes = [8, 64, 512]
nprocs = 2
iterations = 5
warmup = 1

[run]
backend = "{backend}"
repetitions = 2
timeout = 60
seed = 3
{extra}
"""

STUDY = """
[[study.parameters]]
name = "map_by"
values = ["socket"]
"""


def spec(tmp_path: Path, backend: str = "fake", extra: str = "", study: str = "") -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(backend=backend, extra=extra) + study)
    return path


def other_mpi(folder: Path) -> None:
    """Make the folder say it was run with another MPI version."""
    prov = folder / "provenance.json"
    data = json.loads(prov.read_text())
    data["mpi"]["version"] = "4.1.6"
    prov.write_text(json.dumps(data))


def test_opener_refuses_another_mpi_for_code_built_plans(tmp_path: Path) -> None:
    """tune validate and rules verify open their folders like this."""
    source = SpecSource.from_file(spec(tmp_path))
    plan = Plan("opener", 1, "fake", (launch("0000-aaaaaaaa", nprocs=2),))
    request = Request(tmp_path / "res", resume=True, backend="fake")
    camp = open_campaign(source, find_mpi(), request, plan=plan, say=lambda _: None)
    assert camp.created and [la.launch_id for la in camp.todo()] == ["0000-aaaaaaaa"]
    again = open_campaign(source, find_mpi(), request, plan=plan, say=lambda _: None)
    assert not again.created
    with pytest.raises(UserError, match="holds another campaign"):
        other = Plan("opener", 1, "fake", (launch("0001-bbbbbbbb", nprocs=2),))
        open_campaign(source, find_mpi(), request, plan=other)
    other_mpi(tmp_path / "res")
    with pytest.raises(UserError, match=r"was run with openmpi 4\.1\.6"):
        open_campaign(source, find_mpi(), request, plan=plan)


def test_slurm_script_refuses_another_mpi(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, out = spec(tmp_path), tmp_path / "res"
    assert main(["run", str(path), "-o", str(out)]) == 0
    other_mpi(out)
    assert main(["slurm", "script", str(path), "-o", str(out)]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


def test_adaptive_resume_refuses_another_mpi(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, rules = spec(tmp_path), tmp_path / "tuned.rules"
    folder = tmp_path / "measured"
    args = ["tune", str(path), "--adaptive", "-o", str(rules), "--adaptive-results",
            str(folder), "--no-significance"]
    assert main(args) == 0
    other_mpi(folder)
    assert main([*args, "--resume"]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


def test_study_resume_refuses_another_mpi(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, out = spec(tmp_path, study=STUDY), tmp_path / "study"
    assert main(["study", str(path), "-o", str(out)]) == 0
    stage = next((out / "stages").iterdir())
    (stage / "decision.json").unlink()  # the stage is opened again on resume
    other_mpi(stage)
    assert main(["study", str(path), "-o", str(out), "--resume"]) == 2
    assert "was run with openmpi 4.1.6" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid SMPI is not installed")
def test_study_and_adaptive_run_on_simgrid_with_the_spec_platform(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    platform = tmp_path / "small.toml"
    platform.write_text(SMALL)
    extra = f'\n[run.simgrid]\nplatform = "{platform}"\n'
    path = spec(tmp_path, "simgrid", extra, STUDY)
    out = tmp_path / "study"
    assert main(["study", str(path), "--check"]) == 0
    assert main(["study", str(path), "-o", str(out)]) == 0
    rows = [json.loads(line) for f in out.glob("stages/*/launches/*.jsonl")
            for line in f.read_text().splitlines()]
    # the mpi column is the MPI's key (records format 2): smpi-<SimGrid version>
    assert rows and {(r["backend"], r["mpi"].split("-")[0], r["status"]) for r in rows} == {
        ("simgrid", "smpi", "ok")}
    rules, folder = tmp_path / "tuned.rules", tmp_path / "adaptive"
    plain = spec(tmp_path, "simgrid", extra)
    # It measures on the simulated platform, then says honestly that an Open MPI rules file
    # cannot come from SMPI's numbers.
    assert main(["tune", str(plain), "--adaptive", "-o", str(rules), "--adaptive-results",
                 str(folder), "--no-significance"]) == 2
    assert "an Open MPI rules file needs Open MPI measurements" in capsys.readouterr().err
    stored = [json.loads(line) for f in folder.glob("launches/*.jsonl")
              for line in f.read_text().splitlines()]
    assert stored and {(r["backend"], r["status"]) for r in stored} == {("simgrid", "ok")}


def test_study_plans_with_the_slurm_allocation_not_this_machine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check on a login node plans for the 1 × 8 allocation: 4 ranks there are not
    oversubscribed, whatever this machine's core count."""
    slurm = "\n[run.slurm]\nnodes = 1\ntasks_per_node = 8\nsrun_mpi = \"pmix\"\n"
    path = spec(tmp_path, "slurm", slurm, STUDY).rename(tmp_path / "study.toml")
    assert main(["study", str(path), "--check"]) == 0
    assert "launches" in capsys.readouterr().out
    plain = spec(tmp_path, "slurm", slurm)
    plain.write_text(plain.read_text().replace("nprocs = 2", "nprocs = 4"))
    assert main(["plan", str(plain), "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["backend"] == "slurm"
    assert {la["oversubscribe"] for la in plan["launches"]} == {False}
