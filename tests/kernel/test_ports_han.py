"""Proof, message for message, that cbp_han.c runs what Open MPI 5.0's coll/han runs by
default for bcast, reduce and allreduce on a communicator spanning two hosts (issue 24).

Open MPI 5.0.11 runs on two emulated hosts (scripts/hosts-up.sh, the `hosts` fixture) with
no algorithm forced: coll/han (priority 35) takes the collective and hands its node-level
and node-leader sub-communicators to coll/tuned and libnbc. The driver runs each native case
once before its monitoring phase (CBP_WARMUP), since han builds its sub-communicators at its
first call. Its pml/monitoring matrices must equal the port's (`impl=han`), whose
sub-communicators come from MPI_Comm_split_type(SHARED) as han's do. Sizes straddle han's
64 KiB segments (one segment, one plus one byte, several) and libnbc's 64 KiB ireduce switch
(binomial below, a chain of 8 KiB fragments from it). Layouts: 2 x 2 ranks in blocks, 2 x 3
round robin (ranks of a node not consecutive), and 3 + 2 round robin (unequal ranks per
node: han still runs allreduce's hierarchy, and falls back to tuned on the whole
communicator for bcast and reduce after a topology probe it repeats at every call, all
ported). One
launch per layout; the same port under SimGrid SMPI on a 2-host platform computes right and
counts the same matrices.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kernel.ports_support import (
    Build,
    DriverRun,
    Matrix,
    build_driver,
    driver_args,
    join_groups,
    run_hosts_driver,
    run_smpi_driver,
    tiny_platform,
)
from tests.launch.test_hosts import hosts, the_mpi  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

BCAST_SIZES = (1, 100, 65536, 65537, 200000)
ALLREDUCE_SIZES = (4, 400, 65532, 65536, 65540, 300000)  # bytes: MPI_INT counts size / 4
REDUCE_SIZES = (4, 65536, 65540, 300000)
ITERATIONS = 2


@dataclass(frozen=True)
class Layout:
    hosts: str  # mpirun --host
    map_by: str
    node_of: tuple[int, ...]  # rank -> node index

    @property
    def np(self) -> int:
        return len(self.node_of)

    def local(self, rank: int) -> int:
        """The rank's node-local rank (han's low communicator keeps the world order)."""
        return sum(1 for r in range(rank) if self.node_of[r] == self.node_of[rank])

    def leaders(self, root: int = 0) -> set[int]:
        """han's up communicator for a root: the ranks of the root's node-local rank."""
        return {r for r in range(self.np) if self.local(r) == self.local(root)}

    def balanced(self) -> bool:
        return len({self.node_of.count(n) for n in set(self.node_of)}) == 1


LAYOUTS = {
    "2x2-block": Layout("n1:2,n2:2", "ppr:2:node", (0, 0, 1, 1)),
    "2x3-round-robin": Layout("n1:3,n2:3", "node", (0, 1, 0, 1, 0, 1)),
    "3+2-round-robin": Layout("n1:3,n2:2", "node", (0, 1, 0, 1, 0)),
}


def groups(np: int, impls: tuple[str, ...] = ("native", "han")) -> list[list[str]]:
    out = []
    for root in (0, np - 1):
        out += [driver_args("bcast", impl, (0,), (0,), (0,), BCAST_SIZES, ITERATIONS, root)
                for impl in impls]
        out += [driver_args("reduce", impl, (0,), (0,), (0,), REDUCE_SIZES, ITERATIONS, root)
                for impl in impls]
    out += [driver_args("allreduce", impl, (0,), (0,), (0,), ALLREDUCE_SIZES, ITERATIONS)
            for impl in impls]
    return out


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return build_driver(the_mpi("openmpi").mpicc, tmp_path_factory.mktemp("han-build"))


@pytest.fixture(scope="module")
def native_runs(hosts: Path, driver: Build,  # noqa: F811
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, DriverRun]:
    mpirun = the_mpi("openmpi").mpirun
    work = tmp_path_factory.mktemp("han-runs")
    return {name: run_hosts_driver(mpirun, driver.path, lay.hosts, lay.map_by,
                                   hosts / "ssh_config", join_groups(groups(lay.np)),
                                   work / name, tag=name)
            for name, lay in LAYOUTS.items()}


def pairs(run: DriverRun) -> list[tuple[int, int]]:
    """(native case, port case) with the same collective, size and root."""
    native = {(c.coll, c.config()): c.index for c in run.cases if c.impl == "native"}
    return [(native[(c.coll, c.config())], c.index) for c in run.cases if c.impl == "han"]


def crossing(m: Matrix, node_of: tuple[int, ...]) -> set[tuple[int, int]]:
    return {pair for pair in m.keyed() if node_of[pair[0]] != node_of[pair[1]]}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_han_ports_send_what_open_mpi_5_han_sends_across_two_hosts(
        name: str, native_runs: dict[str, DriverRun]) -> None:
    run, lay = native_runs[name], LAYOUTS[name]
    assert run.returncode == 0, run.failure()
    assert len(run.cases) == 2 * (2 * len(BCAST_SIZES) + 2 * len(REDUCE_SIZES)
                                  + len(ALLREDUCE_SIZES))
    assert all(c.status == "ok" for c in run.cases), run.failure()
    for native, port in pairs(run):
        case = run.cases[native]
        assert not run.problems(native) and not run.problems(port), run.failure()
        n, p = run.matrices[native], run.matrices[port]
        # the library's messages carry coll tags, the port's user tags only
        assert n.internal_msgs > 0 and n.external_msgs == 0, case.label()
        assert p.external_msgs > 0 and p.internal_msgs == 0, case.label()
        assert n.keyed() == p.keyed(), (f"{name} {case.label()}\nnative: {n.describe()}\n"
                                        f"port:   {p.describe()}")
        across = crossing(n, lay.node_of)
        assert across, case.label()  # the collective did span both hosts
        hierarchical = case.coll == "allreduce" or lay.balanced()
        if hierarchical:  # han's signature: only node leaders talk across hosts
            leaders = lay.leaders(0 if case.coll == "allreduce" else case.root)
            assert all(s in leaders and d in leaders for s, d in across), \
                f"{name} {case.label()}: {sorted(across)}"


def test_han_ports_count_the_same_matrices_under_smpi(
        native_runs: dict[str, DriverRun], tmp_path: Path) -> None:
    """The 3 + 2 layout (both fallbacks and the hierarchy) on a 2-host SimGrid platform."""
    smpicc, smpirun = shutil.which("smpicc"), shutil.which("smpirun")
    if smpicc is None or smpirun is None:
        pytest.fail("SimGrid SMPI is not installed (apt-get install -y libsimgrid-dev)")
    name = "3+2-round-robin"
    lay, native = LAYOUTS[name], native_runs[name]
    build = build_driver(smpicc, tmp_path / "build", name="port_driver_smpi",
                         defines=("CBP_COUNT_MESSAGES", "CBP_NO_MPIT"))
    platform, hostfile = tiny_platform(tmp_path, 2)
    hostfile.write_text("".join(f"h{n}\n" for n in lay.node_of))  # one line per rank
    run = run_smpi_driver(smpirun, build.path, lay.np,
                          join_groups(groups(lay.np, ("han",))), tmp_path / "smpi",
                          platform, hostfile, tag="han")
    assert run.returncode == 0, run.failure()
    assert [c.status for c in run.cases] == ["ok"] * len(run.cases), run.failure()
    by_config = {(c.coll, c.config()): c.index for c in native.cases if c.impl == "han"}
    assert len(run.cases) == len(by_config)
    for c in run.cases:
        assert not run.problems(c.index), run.failure()
        want = native.matrices[by_config[(c.coll, c.config())]]
        assert run.matrices[c.index].keyed() == want.keyed(), c.label()
