"""A forced coll/tuned algorithm runs at the top level of the measured communicator on two
hosts, where Open MPI 5.0's coll/han would otherwise take the collective (issue 24): real
campaigns over two emulated hosts, checked with the algtrace LD_PRELOAD library, which
records each tuned decision with the size of the communicator it ran on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog.mpi import MpiInstall
from collbench.tune.shim import build_shim, read_traces
from tests.launch.test_hosts import hosts, rows, spec_text, the_mpi  # noqa: F401 (a fixture)

SIZES = (8, 65536)


def campaign(state: Path, tmp_path: Path, algorithms: str, mpi: MpiInstall,
             selection: str = "") -> tuple[list[dict[str, object]], Path]:
    """bcast at SIZES, 4 ranks, 2 per host, under the algtrace library."""
    spec = tmp_path / "spec.toml"
    text = spec_text(f'hostfile = "{state / "hosts.txt"}"\nssh_config = '
                     f'"{state / "ssh_config"}"', f"nprocs = [4]\nppn = [2]\n{selection}")
    spec.write_text(text.replace('algorithms = "default"', f"algorithms = {algorithms}")
                    .replace("sizes = [8, 1024]", f"sizes = {list(SIZES)}"))
    lib = build_shim(mpi.mpicc, tmp_path / "cache")
    prefix = tmp_path / "trace"
    camp = open_campaign(SpecSource.from_file(spec), mpi, Request(tmp_path / "out"),
                         say=lambda _: None)
    camp.run(wrapper=("env", f"LD_PRELOAD={lib}", f"COLLBENCH_ALGTRACE={prefix}"))
    return rows(tmp_path / "out"), prefix


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("version", ["openmpi-5.0", "openmpi-4.1"])
def test_forced_tuned_algorithms_run_on_the_whole_communicator_across_hosts(
        version: str, hosts: Path, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    got, prefix = campaign(hosts, tmp_path, '["default", "basic_linear", "binomial"]',
                           the_mpi(version))
    assert {r["status"] for r in got} == {"ok"}, got
    # every forced point's tuned decision ran on the 4-rank communicator, not on han's
    # 2-rank sub-communicators: basic_linear is id 1, binomial id 6 in 5.0
    (trace,) = [t for t in read_traces(prefix, range(4)) if t.rank == 0]
    measured = [c for c in trace.calls if not c.world and c.collective == "bcast"]
    for alg in (1, 6):
        levels = {c.comm_size for c in measured if c.algorithm == alg}
        assert levels == {4}, (alg, measured)
    # the default is version-true: under 5.0 han's hierarchy, tuned only on its 2-rank
    # sub-communicators; 4.1 ships han at priority 0, so tuned decides on the whole one
    default = {c.comm_size for c in measured if c.epoch in _epochs(got, "default")}
    assert default == ({2} if version == "openmpi-5.0" else {4}), measured
    forced = [r for r in got if r["algorithm"] != "default"]
    assert forced and all(json.loads(str(r["metrics"]))["coll_preference"] == "^han"
                          for r in forced)
    assert all(r["metrics"] is None or "coll_preference" not in str(r["metrics"])
               for r in got if r["algorithm"] == "default")


def _epochs(got: list[dict[str, object]], algorithm: str) -> set[int]:
    """The dups `algorithm`'s points ran on: under --mpit the kernel makes one each time
    the configuration changes, in the launch's point order (epoch 0 is MPI_COMM_WORLD)."""
    epoch, previous, out = 0, None, set()
    for r in got:
        if r["algorithm"] != previous:
            epoch, previous = epoch + 1, r["algorithm"]
        if r["algorithm"] == algorithm:
            out.add(epoch)
    return out
