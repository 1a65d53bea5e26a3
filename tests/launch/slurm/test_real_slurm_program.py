"""A `[workload]` program through a real Slurm: the built-in ring over two emulated nodes.

Same cluster as test_real_slurm.py (scripts/slurm-up.sh, two nodes × 2 CPUs). The program is
built once with the MPI's mpicc, submitted in a batch job, and its JSON line becomes rows with
`source = "program"`, the nodes the ranks ran on, and the ring's own validation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from tests.launch.slurm.test_real_slurm import jobs, metas, rows, wait_for
from tests.launch.slurm.util import Cluster

pytestmark = [pytest.mark.slurm, pytest.mark.mpi]

SPEC = """\
[campaign]
name = "slurm-ring"

[measure]
nprocs = 4
map_by = ["core", "node"]
bind_to = "none"

[workload]
app = "ring"
params = { size = [8, "4K"], iterations = 20, warmup = 2 }

[run]
backend = "slurm"
timeout = 60
seed = 3

[run.slurm]
nodes = 2
tasks_per_node = 2
"""


def test_ring_program_runs_as_a_slurm_campaign_and_resumes(slurm: Cluster,
                                                            tmp_path: Path) -> None:
    spec, out = tmp_path / "ring.toml", tmp_path / "ring"
    spec.write_text(SPEC)
    assert main(["run", str(spec), "-o", str(out)]) == 0
    got = rows(out)
    # 2 mappings × 2 sizes, each one launch of the program, all parsed from its JSON line.
    assert len(got) == 4 and {r["status"] for r in got} == {"ok"}
    assert {(r["source"], r["collective"], r["backend"]) for r in got} == {
        ("program", "ring", "slurm")}
    assert {(r["nodes"], r["ppn"]) for r in got} == {(2, 2)}
    assert all(r["avg_us"] is not None and r["avg_us"] > 0 for r in got)
    assert {r["mapping"] for r in got} == {"core", "node"}
    for meta in metas(out):
        assert meta["hosts"] == ["n1", "n2"]
        assert meta["command"][0] == "srun"
        assert not any(a.endswith("collbench_kernel") for a in meta["command"])
    (job,) = jobs(out)
    wait_for(lambda: slurm.state(job) not in ("PENDING", "RUNNING", "CONFIGURING"), 60,
             f"job {job} to end")
    # Resume of a finished campaign submits nothing and stores nothing twice.
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    assert len(rows(out)) == 4 and len(jobs(out)) == 1
