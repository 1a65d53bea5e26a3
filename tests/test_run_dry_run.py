"""`collbench run SPEC --dry-run` says what `plan` says it leaves out: the placement tried
at the machine's cores instead of the spec's larger process count (no job that size is
started), as comment lines that keep the printed commands a script."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.test_campaign import _plan, _ranks, _shim_mpi, _started


@pytest.mark.mpi
@pytest.mark.slow
def test_a_dry_run_says_what_plan_says_it_skipped(tmp_path: Path) -> None:
    prefix, cores = _shim_mpi(tmp_path), os.cpu_count() or 1
    plan = _plan(tmp_path, prefix, "nprocs = [2, 512]")
    planned, err = plan.communicate(timeout=60)
    assert plan.returncode == 0, err
    said = [ln for ln in planned.splitlines() if ln.startswith("skipped:")]
    assert len(said) == 1 and "-np 512" in said[0] and f"-np {cores}" in said[0], planned
    tried = len(_started(tmp_path))
    dry = _plan(tmp_path, prefix, "nprocs = [2, 512]", ("run", "--dry-run"))
    out, err = dry.communicate(timeout=180)  # with a kernel build
    assert dry.returncode == 0, err
    assert [ln for ln in out.splitlines() if "skipped:" in ln] == [f"# {ln}" for ln in said]
    assert len(_started(tmp_path)) > tried  # the dry run tried the placement itself
    assert max(_ranks(argv) for argv in _started(tmp_path)) <= cores
    commands = "\n".join(ln for ln in out.splitlines() if not ln.startswith("#"))
    assert "-np 512" in commands  # what a run would start
    assert subprocess.run(["sh", "-n"], input=out, text=True).returncode == 0
    # it says, last, that nothing was written (the jobs files its commands name)
    assert out.splitlines()[-1].startswith("# dry run: 2 launch(es), nothing written")
