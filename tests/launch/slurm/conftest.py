"""Fixtures: a fake Slurm CLI on PATH (fast tests) and a real two-node Slurm (slow tests)."""

from __future__ import annotations

import os
import random
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launch.slurm.util import Cluster, FakeSlurm

REPO = Path(__file__).resolve().parents[3]
FAKE = Path(__file__).with_name("fake_slurm.py")
TOOLS = ("sbatch", "squeue", "scontrol", "scancel", "srun")


@pytest.fixture
def fake_slurm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        shim = bin_dir / tool
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" {tool} "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    state = tmp_path / "fake-slurm.json"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(state))
    monkeypatch.setenv("COLLBENCH_SLURM_POLL_S", "0.05")
    return FakeSlurm(state, bin_dir)


# --- a real Slurm ------------------------------------------------------------------------

def _free_port_block(count: int = 6) -> int:
    """A base port with `count` free ports after it (each test session runs its own cluster)."""
    for _ in range(200):
        base = random.randrange(20000, 40000)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free port block")


ORPHAN_PREFIX = "collbench-slurm-"


def _stop_orphans() -> None:
    """Stop clusters left by test sessions that died (SIGKILL) before their teardown."""
    for owner in Path(tempfile.gettempdir()).glob(f"{ORPHAN_PREFIX}*/owner.pid"):
        try:
            os.kill(int(owner.read_text()), 0)
            continue  # that session still runs (another engineer's, perhaps): leave it
        except (ProcessLookupError, ValueError):
            pass
        except PermissionError:
            continue
        env = {**os.environ, "SLURM_ROOT": str(owner.parent)}
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-down.sh")], env=env,
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(owner.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    """Two emulated nodes (n1, n2) × 2 CPUs, started by scripts/slurm-up.sh, stopped after."""
    if os.geteuid() != 0:
        pytest.skip("the Slurm tests start daemons and need root")
    if not shutil.which("unshare"):
        pytest.skip("the Slurm tests need unshare (util-linux) to emulate two nodes")
    _stop_orphans()
    root = Path(tempfile.mkdtemp(prefix=ORPHAN_PREFIX))
    (root / "owner.pid").write_text(str(os.getpid()))
    env = {**os.environ, "SLURM_ROOT": str(root), "SLURM_NODES": "2", "SLURM_CPUS": "2",
           "SLURM_PORT": str(_free_port_block())}
    up = subprocess.run(["bash", str(REPO / "scripts" / "slurm-up.sh")], env=env,
                        capture_output=True, text=True, timeout=900, check=False)
    if up.returncode != 0:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-down.sh")], env=env,
                       capture_output=True, timeout=120, check=False)
        if "apt-get install" in up.stderr:
            pytest.skip(f"Slurm cannot be installed here: {up.stderr.strip()[-300:]}")
        pytest.fail(f"scripts/slurm-up.sh failed:\n{up.stderr[-3000:]}")
    conf = root / "slurm.conf"
    env["SLURM_CONF"] = str(conf)
    try:
        yield Cluster(root, conf, env)
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "slurm-down.sh")], env=env,
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm(slurm_cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Cluster:
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    # Functional tests: 4 ranks on 2 cores would crawl while busy-polling (DESIGN.md).
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_SLURM_POLL_S", "0.2")
    for var in [v for v in os.environ if v.startswith("SLURM_") and v != "SLURM_CONF"]:
        monkeypatch.delenv(var)  # a test run inside an allocation must not leak into jobs
    return slurm_cluster
