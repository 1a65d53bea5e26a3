"""`--stat completion` wherever a statistic is chosen: compare, show, tune and report read
`completion_us` from the rows' metrics (measure.timing = "completion"); the models section,
which compares OSU's figures only, refuses it in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main

SPEC = """
[campaign]
name = "completion"
[measure]
collectives = ["bcast"]
algorithms = ["default", "binomial", "pipeline"]
sizes = [8, 1024, 65536]
nprocs = [4]
timing = "completion"
[run]
backend = "fake"
repetitions = 6
seed = 3
"""


@pytest.fixture
def results(tmp_path: Path) -> Path:
    spec, out = tmp_path / "c.toml", tmp_path / "c"
    spec.write_text(SPEC)
    assert main(["run", str(spec), "-o", str(out)]) == 0
    return out


def test_every_command_compares_completion(results: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", str(results), "--stat", "completion"]) == 0
    assert "median_completion_us" in capsys.readouterr().out
    rules = tmp_path / "c.rules"
    assert main(["tune", str(results), "--stat", "completion", "-o", str(rules)]) == 0
    assert rules.is_file()
    assert main(["report", str(results), "-o", str(tmp_path / "rep"), "--stat",
                 "completion"]) == 0
    assert "median_completion_us" in (tmp_path / "rep" / "index.html").read_text()
    capsys.readouterr()
    assert main(["report", str(results), "-o", str(tmp_path / "rep2"), "--stat", "completion",
                 "--against", str(results)]) == 2
    err = capsys.readouterr().err
    assert "--stat completion with --model/--against" in err and err.count("\n") == 1
