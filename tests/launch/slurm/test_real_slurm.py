"""Campaigns through a real Slurm: two emulated nodes (n1, n2) × 2 CPUs on this host.

The cluster comes from scripts/slurm-up.sh (session fixture `slurm_cluster`); the kernel
is the real one, built with the Open MPI wheel.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collbench.cli import main
from collbench.launch.slurm.ledger import Ledger
from collbench.launch.slurm.scheduler import ACTIVE
from collbench.store import Store
from tests.launch.slurm.util import Cluster

pytestmark = [pytest.mark.slurm, pytest.mark.mpi]

SPEC = """\
{top}
[campaign]
name = "slurm-e2e"

[measure]
collectives = "bcast"
algorithms = ["default", "binomial"]
sizes = [1, 1024]
nprocs = 4
map_by = {map_by}
iterations = 20
warmup = 2

[run]
backend = "{backend}"
timeout = {timeout}
order = "{order}"
seed = 5

[run.slurm]
nodes = 2
tasks_per_node = 2
launcher = "{launcher}"
"""
# Where each of 4 ranks runs on 2 nodes × 2 tasks.
PLACED = {"core": ["n1", "n1", "n2", "n2"], "node": ["n1", "n2", "n1", "n2"]}
POINT_KEYS = ("collective", "algorithm", "algorithm_id", "size_bytes", "nprocs", "mapping",
              "binding", "selection", "params", "repetition", "campaign", "iterations")


def write_spec(tmp_path: Path, backend: str = "slurm", launcher: str = "srun",
               timeout: float = 60, map_by: str = '["core", "node"]', order: str = "random",
               top: str = "") -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC.format(backend=backend, launcher=launcher, timeout=timeout,
                             map_by=map_by, order=order, top=top))
    return p


def rows(out: Path) -> list[dict[str, Any]]:
    cur = Store(out).connect().execute("SELECT * FROM measurements")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def metas(out: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((out / "launches").glob("*.meta.json"))]


def wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def collbench(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "collbench.cli", *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)


def jobs(out: Path) -> dict[str, Any]:
    return Ledger(out / "slurm").jobs


def test_srun_campaign_over_two_nodes_has_the_shape_of_a_local_run(
        slurm: Cluster, tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path), tmp_path / "slurm"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    got = rows(out)
    assert len(got) == 2 * 4 and {r["status"] for r in got} == {"ok"}
    assert {(r["backend"], r["nodes"], r["ppn"]) for r in got} == {("slurm", 2, 2)}
    # Open MPI 5.0 on two nodes: coll/han serves the default, as the kernel's probe saw,
    # and a forced tuned algorithm runs in coll/tuned on the whole communicator
    assert {(r["algorithm"], r["component"]) for r in got} == \
        {("default", "han"), ("binomial", "tuned")}
    for meta in metas(out):
        mapping = next(r["mapping"] for r in got if r["launch_id"] == meta["launch_id"])
        assert meta["slurm"]["rank_hosts"] == PLACED[mapping]  # where the ranks really ran
        assert meta["hosts"] == ["n1", "n2"] and meta["slurm"]["allocation_nodes"] == ["n1", "n2"]
        assert meta["command"][:2] == ["srun", "--mpi=pmix"]
    (job,) = jobs(out)
    wait_for(lambda: slurm.state(job) not in ACTIVE, 60, f"job {job} to end")
    assert slurm.state(job) == "COMPLETED"

    local = tmp_path / "local"
    assert main(["run", str(spec), "-o", str(local), "--backend", "local"]) == 0
    here = rows(local)
    assert [list(r) for r in here[:1]] == [list(r) for r in got[:1]]  # same columns, in order
    assert {tuple(r[k] for k in POINT_KEYS) for r in here} == \
        {tuple(r[k] for k in POINT_KEYS) for r in got}
    assert {r["backend"] for r in here} == {"local"}


def test_mpirun_launcher_inside_the_allocation(slurm: Cluster, tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, launcher="mpirun"), tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    got = rows(out)
    assert len(got) == 8 and {r["status"] for r in got} == {"ok"}
    for meta in metas(out):
        assert Path(meta["command"][0]).name == "mpirun"
        assert "--host" not in meta["command"] and "--hostfile" not in meta["command"]
        mapping = meta["command"][meta["command"].index("--map-by") + 1]
        assert meta["slurm"]["rank_hosts"] == PLACED[mapping]


def test_hung_launch_is_killed_by_its_timeout_inside_the_job(slurm: Cluster,
                                                             tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, timeout=6, map_by='"core"'), tmp_path / "res"
    start = time.monotonic()
    code = main(["run", str(spec), "-o", str(out), "--kernel-debug",
                 "--debug hang --debug-at 1"])
    assert code == 1 and time.monotonic() - start < 90
    assert sorted(r["status"] for r in rows(out)) == ["ok", "timeout", "timeout", "timeout"]
    (meta,) = metas(out)
    assert meta["status"] == "timeout" and meta["returncode"] in (124, 137)
    (job,) = jobs(out)
    # the job went on after the hung launch and ended by itself, long before its time limit
    wait_for(lambda: slurm.state(job) not in ACTIVE, 60, f"job {job} to end")
    assert slurm.state(job) == "COMPLETED"
    wait_for(lambda: subprocess.run(["pgrep", "-f", str(out)], capture_output=True)
             .returncode == 1, 30, "the hung ranks to end")


def test_job_cancelled_from_outside_is_resubmitted_by_resume(slurm: Cluster,
                                                             tmp_path: Path) -> None:
    # Launch "node" (2 points) runs first and finishes; launch "core" (4 points) hangs at
    # its 4th point until the job is cancelled.
    top = '[[exclude]]\nmap_by = "node"\nalgorithm = "binomial"\n'
    spec = write_spec(tmp_path, timeout=120, map_by='["node", "core"]', order="sequential",
                      top=top)
    out, temp = tmp_path / "res", tmp_path / "tmp"  # TMPDIR reaches the job (--export=ALL)
    temp.mkdir()
    proc = collbench("run", str(spec), "-o", str(out), "--kernel-debug",
                     "--debug hang --debug-at 3", env=dict(os.environ, TMPDIR=str(temp)))
    try:
        wait_for(lambda: len(list((out / "launches").glob("*.jsonl"))) == 1
                 and len(list((out / "work").glob("*/started"))) == 1, 90,
                 "the first launch to be stored and the second to start")
        (job,) = jobs(out)
        assert list(temp.glob("collbench-launch-*")), "the step's own TMPDIR"
        assert slurm.run("scancel", job).returncode == 0
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, output
    # the cancelled step's TMPDIR (mpirun's session directory in it) is removed
    wait_for(lambda: not list(temp.glob("collbench-launch-*")), 30, "the step's TMPDIR to go")
    assert "lost — Slurm job" in output and "CANCELLED" in output and "--resume" in output
    rec = jobs(out)[job]
    assert rec.state == "CANCELLED" and len(rec.lost) == 1 and not rec.cancelled_by_collbench
    first = {p.name: p.read_bytes() for p in (out / "launches").glob("*.jsonl")}

    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    second = max(jobs(out), key=int)
    assert second != job and jobs(out)[second].launches == rec.lost  # only the lost launch
    after = {p.name: p.read_bytes() for p in (out / "launches").glob("*.jsonl")}
    assert len(after) == 2 and all(after[k] == v for k, v in first.items())
    assert sorted(r["status"] for r in rows(out)) == ["ok"] * 6


def test_ctrl_c_cancels_what_collbench_submitted_and_nothing_else(slurm: Cluster,
                                                                  tmp_path: Path) -> None:
    other = slurm.run("sbatch", "--parsable", "-n", "1", f"--output={tmp_path}/other.out",
                      "--wrap", "sleep 300").stdout.strip()
    assert other.isdigit()
    try:
        wait_for(lambda: slurm.state(other) == "RUNNING", 60, "the other job to start")
        out = tmp_path / "res"
        proc = collbench("run", str(write_spec(tmp_path)), "-o", str(out))
        try:
            wait_for(lambda: (out / "slurm" / "jobs.json").exists(), 90, "the submission")
            time.sleep(0.5)
            os.killpg(proc.pid, signal.SIGINT)
            output, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 130, output
        (job,) = jobs(out)
        assert f"cancelled job(s) {job}" in output and jobs(out)[job].cancelled_by_collbench
        wait_for(lambda: slurm.state(job) == "CANCELLED", 30, f"job {job} to be cancelled")
        assert slurm.state(other) == "RUNNING"
    finally:
        slurm.run("scancel", other)


def test_local_backend_inside_salloc_uses_the_allocation(slurm: Cluster,
                                                         tmp_path: Path) -> None:
    spec, out = write_spec(tmp_path, backend="local"), tmp_path / "res"
    res = subprocess.run(["salloc", "-N", "2", "--ntasks-per-node=2", sys.executable, "-m",
                          "collbench.cli", "run", str(spec), "-o", str(out)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    got = rows(out)
    assert {r["status"] for r in got} == {"ok"} and len(got) == 8
    assert {(r["backend"], r["nodes"], r["ppn"]) for r in got} == {("local", 2, 2)}
    for meta in metas(out):
        assert meta["hosts"] == ["n1", "n2"]
        assert not any(a in meta["command"] for a in ("--host", "--hostfile", "-H"))
        assert not any("OVERSUBSCRIBE" in a for a in meta["command"])  # 4 slots, 4 ranks
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["environment"]["SLURM_JOB_NODELIST"] == "n[1-2]"


def test_script_submitted_by_the_user_is_collected_by_resume(
        slurm: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = write_spec(tmp_path, launcher="mpirun"), tmp_path / "res"
    assert main(["slurm", "script", str(spec), "-o", str(out)]) == 0
    script = tmp_path / "job.sh"
    script.write_text(capsys.readouterr().out)
    job = slurm.run("sbatch", "--parsable", str(script)).stdout.strip()
    assert job.isdigit()
    wait_for(lambda: slurm.state(job) not in ACTIVE, 120, f"job {job} to end")
    assert slurm.state(job) == "COMPLETED"
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 0
    assert not jobs(out)  # collected, nothing submitted
    assert {r["status"] for r in rows(out)} == {"ok"} and len(rows(out)) == 8
    assert {m["slurm"]["job_id"] for m in metas(out)} == {job}
