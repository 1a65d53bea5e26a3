"""Launches, specs and marker files for the Slurm tests."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from collbench.catalog.mpi import MpiInstall
from collbench.launch.base import BackendSetup, KernelCall, create
from collbench.launch.slurm.backend import SlurmBackend
from collbench.plan import Launch, Point
from collbench.spec import Spec, parse_spec
from collbench.store import Store

POINTS = (Point("bcast", "binomial", 6, 0, 0, 1, 10, 1),
          Point("bcast", "binomial", 6, 0, 0, 1024, 10, 1))

SPEC = """\
[campaign]
name = "slurm-unit"

[measure]
collectives = "bcast"
nprocs = 4

[run]
backend = "slurm"
timeout = 30

[run.slurm]
nodes = 2
{slurm}
"""


def spec(slurm: str = "") -> Spec:
    return parse_spec(SPEC.format(slurm=slurm), "spec.toml")


def slurm_backend(sp: Spec | None = None, root: Path = Path("/r")) -> SlurmBackend:
    """The Slurm backend for `sp` writing into results folder `root`, as collbench makes it."""
    backend = create("slurm", BackendSetup(sp or spec(), fake_mpi(), "spec.toml", Store(root)))
    assert isinstance(backend, SlurmBackend)
    return backend


def launch(launch_id: str = "0000-aaaaaaaa", **kw: object) -> Launch:
    base: dict[str, object] = dict(
        launch_id=launch_id, repetition=0, nprocs=4, mapping="core", binding="core",
        oversubscribe=False, mca=(("coll_tuned_use_dynamic_rules", "1"),), env=(), swept=(),
        selection="mpit", points=POINTS, timeout_s=30.0, validate=False, samples=False)
    base.update(kw)
    return Launch(**base)  # type: ignore[arg-type]


def call(work: Path, kernel: Path = Path("/k/collbench_kernel")) -> KernelCall:
    return KernelCall(kernel, work / "jobs.txt", work / "kernel.jsonl")


def kernel_line(p: Point, nprocs: int = 4) -> str:
    return json.dumps({"collective": p.collective, "algorithm_id": p.algorithm_id,
                       "segsize": 0, "fanout": 0, "nprocs": nprocs, "size_bytes": p.size_bytes,
                       "iterations": p.iterations, "warmup": p.warmup, "avg_us": 2.0,
                       "min_us": 1.0, "max_us": 3.0, "median_us": 2.0, "bandwidth_mbs": None,
                       "validated": False, "status": "ok", "error": None})


def finish(work: Path, job: str = "100", rc: int = 0, hosts: tuple[str, ...] = ("n1", "n1",
           "n2", "n2"), points: tuple[Point, ...] = POINTS, nprocs: int = 4) -> None:
    """Leave the markers a job leaves when it ran this launch."""
    (work / "hosts").mkdir(parents=True, exist_ok=True)
    for rank, host in enumerate(hosts):
        (work / "hosts" / f"{rank}.{1000 + rank}").write_text(host + "\n")
    (work / "started").write_text(f"job={job}\nnodelist=n[1-2]\nstart=100.0\n")
    (work / "kernel.jsonl").write_text("".join(kernel_line(p, nprocs) + "\n" for p in points))
    (work / "done").write_text(f"rc={rc}\nstart=100.0\nend=101.5\njob={job}\n")


def fake_mpi() -> MpiInstall:
    b = Path("/opt/mpi/bin")
    return MpiInstall("openmpi", "5.0.11", b, b / "mpicc", b / "mpirun", None, "prefix")


@dataclass
class FakeSlurm:
    state_file: Path
    bin: Path

    def state(self) -> dict[str, Any]:
        if not self.state_file.exists():
            return {"next": 100, "jobs": {}, "calls": []}
        data: dict[str, Any] = json.loads(self.state_file.read_text())
        return data

    def jobs(self) -> dict[str, dict[str, Any]]:
        jobs: dict[str, dict[str, Any]] = self.state()["jobs"]
        return jobs

    def set_state(self, job: str, value: str) -> None:
        data = self.state()
        data["jobs"][job]["state"] = value
        self.state_file.write_text(json.dumps(data))

    def add_foreign_job(self, state: str = "RUNNING") -> str:
        data = self.state()
        job = str(data["next"])
        data["next"] += 1
        data["jobs"][job] = {"state": state, "script": "someone-elses.sh", "args": []}
        self.state_file.write_text(json.dumps(data))
        return job

    def calls(self, tool: str) -> list[list[str]]:
        return [c[1:] for c in self.state()["calls"] if c[0] == tool]


@dataclass(frozen=True)
class Cluster:
    root: Path
    conf: Path
    env: dict[str, str]

    def run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, env=self.env,
                              timeout=timeout, check=False)

    def state(self, job: str) -> str:
        out = self.run("squeue", "-h", "-t", "all", "-j", job, "-o", "%T").stdout.strip()
        return out or "UNKNOWN"
