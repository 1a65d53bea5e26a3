"""A `[workload]` program through a real Slurm: the built-in ring over two emulated nodes.

Same cluster as test_real_slurm.py (scripts/slurm-up.sh, two nodes × 2 CPUs). The program is
built once with the MPI's mpicc, submitted in a batch job, and its JSON line becomes rows with
`source = "program"`, the nodes the ranks ran on, and the ring's own validation.
"""

from __future__ import annotations

import os
import signal
import time
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


# A rank that leaves a daemon behind (own session, no environment) holding its stdout and
# stderr, as tests/apps/test_hostile_programs.py has it under mpirun; then prints its result.
DAEMON_SH = """\
#!/bin/sh
setsid env -i /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$1.$$" &
while [ ! -s "$1.$$" ]; do sleep 0.02; done
echo '{"time_us": 5}'
"""

DAEMON_SPEC = """\
[campaign]
name = "slurm-daemon"
[measure]
nprocs = 2
[workload]
params = {{ pids = "{pids}" }}
[workload.program]
run = ["{script}", "{{pids}}/pid"]
[run]
backend = "slurm"
timeout = 30
[run.slurm]
nodes = 2
tasks_per_node = 2
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.slow
def test_a_program_runs_under_the_rank_guard_in_a_slurm_job(slurm: Cluster,
                                                            tmp_path: Path) -> None:
    """Each rank under the rank guard, as with mpirun on this machine and on hosts: the
    daemon a rank leaves behind neither holds its result until the timeout nor outlives
    the launch (Slurm's linuxproc tracking loses a process that left its parent)."""
    pids, script = tmp_path / "pids", tmp_path / "daemon.sh"
    pids.mkdir()
    script.write_text(DAEMON_SH)
    script.chmod(0o755)
    spec, out = tmp_path / "daemon.toml", tmp_path / "res"
    spec.write_text(DAEMON_SPEC.format(pids=pids, script=script))
    found: list[int] = []
    try:
        assert main(["run", str(spec), "-o", str(out)]) == 0
        (row,) = rows(out)
        assert (row["status"], row["avg_us"]) == ("ok", 5.0), row
        (meta,) = metas(out)
        assert "rankguard" in " ".join(meta["command"])
        assert meta["wall_s"] < 20, meta  # stored when the ranks ended, not at the timeout
        found = [int(p.read_text()) for p in pids.glob("pid.*")]
        assert len(found) == 2
        deadline = time.monotonic() + 5
        while any(map(_alive, found)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(_alive, found)), "a daemon the program left outlived its launch"
    finally:
        for pid in found:
            if _alive(pid) and Path(f"/proc/{pid}/cmdline").read_bytes() == \
                    b"sleep\x001000\x00":
                os.kill(pid, signal.SIGKILL)
