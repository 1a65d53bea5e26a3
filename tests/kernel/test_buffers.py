"""The kernel's launch-wide buffers (reserved at the largest point, as OSU's) under a memory
limit: a point that cannot have its buffers fails alone, the points around it still run
and validate in the buffers that remain."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from collbench.kernel.build import KernelBinary
from tests.conftest import mpirun_command, run_mpi

pytestmark = pytest.mark.mpi

LIMIT = 1_000_000_000  # address space per rank: Open MPI needs a few hundred MB of it
HUGE = 805_306_368  # allgather at 2 ranks: 768 MiB sent, 1.5 GiB received per rank


@pytest.mark.parametrize("limit", [LIMIT // 2, LIMIT])  # neither / only the send buffer fits
def test_point_too_big_for_memory_fails_alone(kernel: KernelBinary, tmp_path: Path,
                                              limit: int) -> None:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        pytest.skip("no prlimit")
    jobs, out = tmp_path / "jobs.txt", tmp_path / "out.jsonl"
    jobs.write_text(f"bcast 0 0 0 4096 3 1\nallgather 0 0 0 {HUGE} 1 0\n"
                    "bcast 0 0 0 4096 3 1\nallgather 0 0 0 65536 3 1\n")
    cmd = [*mpirun_command(2), prlimit, f"--as={limit}", "--", str(kernel.path),
           "--jobs", str(jobs), "--output", str(out), "--validate"]
    res = run_mpi(cmd, timeout=120, before_retry=lambda: out.unlink(missing_ok=True))
    assert res.returncode == 0, res.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in records] == ["ok", "failed", "ok", "ok"]
    assert records[1]["error"] == f"out of memory for {HUGE}-byte buffers"
    assert records[1]["avg_us"] is None
    assert all(r["validated"] is True for r in records if r["status"] == "ok")
