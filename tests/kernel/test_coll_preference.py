"""A forced coll/tuned algorithm runs at the top level of the measured communicator on two
hosts, where Open MPI 5.0's coll/han would otherwise take the collective, and every row
names the component that served it (issue 24): real campaigns over two emulated hosts,
checked with the algtrace LD_PRELOAD library, which records each tuned decision with the
size of the communicator it ran on, independently of the kernel's own probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog.mpi import MpiInstall
from collbench.tune.shim import build_shim, read_traces
from tests.launch.test_hosts import rows, spec_text, the_mpi

SIZES = (8, 65536)


def campaign(state: Path, tmp_path: Path, algorithms: str, mpi: MpiInstall,
             selection: str = "", extra: str = "", hosts_line: str = "nprocs = [4]\nppn = [2]"
             ) -> tuple[list[dict[str, object]], Path]:
    """bcast at SIZES, 4 ranks, 2 per host, under the algtrace library."""
    spec = tmp_path / "spec.toml"
    text = spec_text(f'hostfile = "{state / "hosts.txt"}"\nssh_config = '
                     f'"{state / "ssh_config"}"', f"{hosts_line}\n{selection}")
    spec.write_text(text.replace('algorithms = "default"',
                                 f"algorithms = {algorithms}{extra}")
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
        version: str, hosts: Path, tmp_path: Path,
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
    # every row names what served it, as the trace shows: tuned for the forced points;
    # the default is han's hierarchy under 5.0 (tuned below it), tuned's under 4.1
    assert {r["component"] for r in forced} == {"tuned"}
    defaults = [r for r in got if r["algorithm"] == "default"]
    assert {r["component"] for r in defaults} == (
        {"han"} if version == "openmpi-5.0" else {"tuned"})
    if version == "openmpi-5.0":
        assert all("tuned" in json.loads(str(r["metrics"]))["sub_components"].split(",")
                   for r in defaults)
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


@pytest.mark.slow
@pytest.mark.mpi
def test_components_are_a_dimension_and_a_request_that_fails_is_a_failed_point(
        hosts: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """[measure] components under 5.0 on 2 hosts: "han" with a forced tuned algorithm runs
    that algorithm on han's 2-rank sub-communicators only (as the trace shows), labelled
    binomial@han; "tuned" takes the whole communicator from han; on one host han steps
    aside, so a han request fails every point, saying so."""
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    mpi = the_mpi("openmpi-5.0")

    def run(name: str, algorithms: str, components: str, placement: str = "nprocs = [4]\n"
            "ppn = [2]") -> tuple[list[dict[str, object]], Path]:
        where = tmp_path / name
        where.mkdir()
        return campaign(hosts, where, algorithms, mpi, extra=f"\ncomponents = {components}",
                        hosts_line=placement)

    han, prefix = run("han", '["binomial"]', '["han"]')  # one launch: one trace
    assert han and {(r["status"], r["component"]) for r in han} == {("ok", "han")}, han
    (trace,) = [t for t in read_traces(prefix, range(4)) if t.rank == 0]
    assert {c.comm_size for c in trace.calls if not c.world and c.algorithm == 6} == {2}
    for r in han:
        metrics = json.loads(str(r["metrics"]))
        assert "tuned" in metrics["sub_components"].split(","), metrics
        assert "coll_preference" not in metrics  # han kept on the measured communicator
        params = json.loads(str(r["params"]))  # the request is no setting of the point
        assert not any(k.endswith("_priority") for k in params["mca"]), params
        assert "COLLBENCH_COMPONENT" not in params["env"], params

    tuned, _ = run("tuned", '["default"]', '["tuned"]')
    assert tuned and {(r["status"], r["component"]) for r in tuned} == {("ok", "tuned")}

    single, _ = run("one", '["default"]', '["han"]', "nprocs = [2]\nppn = [2]")
    assert single and all(r["status"] == "failed" and r["component"] == "han"
                          and "coll/tuned served bcast, not coll/han" in str(r["error"])
                          for r in single), single
