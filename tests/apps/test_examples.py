"""Every workload example in examples/ runs as shipped (real Open MPI, 1-4 ranks) and
stores an ok row per launch: ring.toml, matrix.toml, jacobi.toml and program.toml (a user's
C program beside it)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKLOADS = ("ring", "matrix", "jacobi", "program")


@pytest.mark.parametrize("name", WORKLOADS)
def test_examples_are_valid_workload_specs(name: str) -> None:
    spec = load_spec(EXAMPLES / f"{name}.toml")
    assert spec.workload is not None and max(spec.measure.nprocs) <= 4


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("name", WORKLOADS)
def test_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional runs only
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder)
    text = (folder / f"{name}.toml").read_text()
    # one repetition, fewer iterations: the example's shape, at test speed
    text = text.replace("repetitions = 2", "repetitions = 1")
    for many in ("iterations = 200", "iterations = 20", "reps = 200"):
        text = text.replace(many, many.split("=")[0] + "= 3")
    (folder / f"{name}.toml").write_text(text)
    out = tmp_path / "res"
    assert main(["run", str(folder / f"{name}.toml"), "-o", str(out)]) == 0
    rows = [json.loads(line) for f in (out / "launches").glob("*.jsonl")
            for line in f.read_text().splitlines()]
    assert rows and all(r["status"] == "ok" and r["source"] == "program" and r["validated"]
                        for r in rows)
