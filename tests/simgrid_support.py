"""Shared pieces of the SimGrid tests: real smpirun, small platforms, one kernel build."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from collbench.launch.simgrid import SmpiTools, build_smpi_kernel, find_smpi

needs_smpi = pytest.mark.skipif(shutil.which("smpirun") is None or shutil.which("smpicc") is None,
                                reason="SimGrid SMPI not installed (apt-get install "
                                       "libsimgrid-dev)")

# Two nodes × two sockets × two cores: every placement level with 8 cores.
# One node, two sockets of 4 cores, `{extra}` appended (a barrier at 8 ranks, a root's
# sends to every core: both cross the sockets).
TWO_SOCKETS = """\
name = "two"
nodes = 1
sockets_per_node = 2
cores_per_socket = 4
[levels.intra_socket]
latency_us = 0.5
bandwidth_mbs = 10000.0
[levels.inter_socket]
latency_us = 1.0
bandwidth_mbs = 5000.0
{extra}
"""

SMALL = """\
name = "small"
nodes = 2
sockets_per_node = 2
cores_per_socket = 2

[levels.intra_socket]
latency_us = 0.2
bandwidth_mbs = 6000

[levels.inter_socket]
latency_us = 0.5
bandwidth_mbs = 5000

[levels.inter_node]
latency_us = 1.5
bandwidth_mbs = 12000
"""


@pytest.fixture(scope="session")
def smpi_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("collbench-cache")


@pytest.fixture(scope="session")
def smpi_tools() -> SmpiTools:
    return find_smpi()


@pytest.fixture(scope="session")
def smpi_kernel(smpi_tools: SmpiTools, smpi_cache: Path) -> Path:
    return build_smpi_kernel(smpi_tools, smpi_cache).path


@pytest.fixture
def sim_env(smpi_cache: Path, smpi_kernel: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The CLI builds into (and finds the kernel in) the session's cache."""
    monkeypatch.setenv("COLLBENCH_CACHE", str(smpi_cache))
    yield smpi_cache


def small_platform(tmp_path: Path, text: str = SMALL) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(text)
    return path


def linear_bcast_max_us(platform: Path, tmp: Path, tag: str, size: int,
                        ompi_version: str | None = None) -> float:
    """max_us of a simulated basic_linear bcast of `size` bytes at 8 ranks on `platform`."""
    return simulated_us(platform, tmp, tag, size, ompi_version=ompi_version)


def simulated_us(platform: Path, tmp: Path, tag: str, size: int,
                 collective: str = "bcast", stat: str = "max_us",
                 ompi_version: str | None = None) -> float:
    """`stat` of a simulated basic_linear `collective` of `size` bytes at 8 ranks."""
    from collbench.cli import main
    from collbench.store import Store

    version = f'ompi_version = "{ompi_version}"\n' if ompi_version else ""
    spec = tmp / f"{tag}-spec.toml"
    spec.write_text(f"""
[campaign]
name = "{tag}"
[measure]
collectives = ["{collective}"]
algorithms = ["basic_linear"]
sizes = [{size}]
nprocs = [8]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
[run.simgrid]
platform = "{platform}"
{version}""")
    assert main(["run", str(spec), "-o", str(tmp / tag)]) == 0
    con = Store(tmp / tag).connect()
    row = con.execute(f"SELECT {stat} FROM measurements WHERE status = 'ok'").fetchone()
    assert row is not None
    return float(row[0])
