"""A study's placement trials start no job larger than the machine: a placement planned at
more ranks is tried at the cores, and a refusal names the study parameter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.study.test_study_cli import SPEC
from tests.test_campaign import _ranks, _shim_mpi, _started


@pytest.mark.mpi
def test_a_study_tries_a_large_placement_at_the_cores(tmp_path: Path) -> None:
    prefix, cores = _shim_mpi(tmp_path), os.cpu_count() or 1
    spec = tmp_path / "study.toml"
    spec.write_text(SPEC.replace('backend = "fake"', 'backend = "local"')
                    .replace("nprocs = 2", "nprocs = 512"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TMPDIR"] = str(tmp_path / "tmp")
    res = subprocess.run([sys.executable, "-m", "collbench.cli", "study", str(spec), "--check",
                          "--mpi", str(prefix)], env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert (f"study.parameters[0] (bind_to): mpirun refuses -np 512 --map-by core --bind-to "
            f"socket (tried at -np {cores}); exit status") in res.stderr, res.stderr
    sizes = [_ranks(argv) for argv in _started(tmp_path)]
    assert sizes and max(sizes) <= cores, sizes
