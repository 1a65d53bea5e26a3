"""Proof, message for message, that cbp_han.c runs what Open MPI 5.0's coll/han runs by
default for bcast, reduce, allreduce, gather, scatter, allgather and barrier on a
communicator spanning two or five hosts (issue 24).

Open MPI 5.0.11 runs on five emulated hosts (scripts/hosts-up.sh, HOSTS_COUNT=5) with
no algorithm forced: coll/han (priority 35) takes the collective and hands its node-level
and node-leader sub-communicators to coll/tuned and libnbc. The driver runs each native case
once before its monitoring phase (CBP_WARMUP), since han builds its sub-communicators at its
first call. Its pml/monitoring matrices must equal the port's (`impl=han`), whose
sub-communicators come from MPI_Comm_split_type(SHARED) as han's do. Sizes straddle han's
64 KiB segments (one segment, one plus one byte, several) and libnbc's 64 KiB ireduce switch
(binomial below, a chain of 8 KiB fragments from it); gather, scatter and allgather sizes
straddle coll/tuned's fixed-decision switches on the node and leader levels. Layouts: 2 x 2
ranks in blocks, 2 x 3 round robin (ranks of a node not consecutive: han reorders the
blocks of gather, scatter and allgather), and 3 + 2 round robin (unequal ranks per node:
han still runs allreduce's and barrier's hierarchies, and falls back to tuned on the whole
communicator for the others after a topology probe it repeats at every call, all ported),
and 5 x 2 ranks in blocks: five node leaders, where libnbc's ibcast is "binomial" and its
ireduce "redscat_gather" (count >= 4) or "binomial" (count < 4), both with the root's node
first and last. One launch per layout; the same port under SimGrid SMPI on 2- and 5-host
platforms computes right and counts the same matrices.

The gather, scatter and allgather groups run after allreduce's: with pml/monitoring on,
Open MPI 5.0.11 crashes in MPI_Finalize (SIGSEGV in mca_coll_base_comm_unselect) on the
3 + 2 layout when a native gather of 20000 B precedes a native allreduce, not the other
way round (no port involved; without monitoring it ends cleanly).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
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
from tests.launch.test_hosts import REPO, the_mpi

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

BCAST_SIZES = (1, 100, 65536, 65537, 200000)
ALLREDUCE_SIZES = (4, 400, 65532, 65536, 65540, 300000)  # bytes: MPI_INT counts size / 4
REDUCE_SIZES = (4, 65536, 65540, 300000)
GATHER_SIZES = (1, 100, 20000, 70000)
SCATTER_SIZES = (1, 100, 70000)
ALLGATHER_SIZES = (1, 100, 20000)
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
    "5x2-block": Layout("n1:2,n2:2,n3:2,n4:2,n5:2", "ppr:2:node",
                        tuple(r // 2 for r in range(10))),
}
HOSTS = 5  # the most any layout uses


def groups(np: int, impls: tuple[str, ...] = ("native", "han")) -> list[list[str]]:
    out = []
    for root in (0, np - 1):
        out += [driver_args("bcast", impl, (0,), (0,), (0,), BCAST_SIZES, ITERATIONS, root)
                for impl in impls]
        out += [driver_args("reduce", impl, (0,), (0,), (0,), REDUCE_SIZES, ITERATIONS, root)
                for impl in impls]
    out += [driver_args("allreduce", impl, (0,), (0,), (0,), ALLREDUCE_SIZES, ITERATIONS)
            for impl in impls]
    for root in (0, np - 1):  # after allreduce: see the module's docstring
        out += [driver_args("gather", impl, (0,), (0,), (0,), GATHER_SIZES, ITERATIONS, root)
                for impl in impls]
        out += [driver_args("scatter", impl, (0,), (0,), (0,), SCATTER_SIZES, ITERATIONS, root)
                for impl in impls]
    out += [driver_args("allgather", impl, (0,), (0,), (0,), ALLGATHER_SIZES, ITERATIONS)
            for impl in impls]
    out += [driver_args("barrier", impl, (0,), (0,), (0,), (0,), ITERATIONS) for impl in impls]
    return out


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOSTS emulated hosts n1..n5 (tests/launch/test_hosts.py's fixture brings up two)."""
    if os.geteuid() != 0:
        pytest.skip("emulated hosts need root (network namespaces, sshd)")
    if shutil.which("ip") is None or subprocess.run(["ip", "netns", "list"],
                                                    capture_output=True).returncode != 0:
        pytest.skip("no `ip netns` on this machine: cannot emulate hosts")
    state = tmp_path_factory.mktemp("hosts")
    try:  # torn down even when bringing them up fails half-way
        up = subprocess.run(["bash", str(REPO / "scripts" / "hosts-up.sh"), str(state)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "HOSTS_COUNT": str(HOSTS)})
        assert up.returncode == 0, up.stderr
        yield state
    finally:
        subprocess.run(["bash", str(REPO / "scripts" / "hosts-down.sh"), str(state)],
                       capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return build_driver(the_mpi("openmpi").mpicc, tmp_path_factory.mktemp("han-build"))


@pytest.fixture(scope="module")
def smpi_driver(tmp_path_factory: pytest.TempPathFactory) -> Build:
    smpicc = shutil.which("smpicc")
    if smpicc is None or shutil.which("smpirun") is None:
        pytest.fail("SimGrid SMPI is not installed (apt-get install -y libsimgrid-dev)")
    return build_driver(smpicc, tmp_path_factory.mktemp("han-smpi-build"),
                        name="port_driver_smpi", defines=("CBP_COUNT_MESSAGES", "CBP_NO_MPIT"))


@pytest.fixture(scope="module")
def native_runs(hosts: Path, driver: Build,
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
def test_han_ports_send_what_open_mpi_5_han_sends_across_hosts(
        name: str, native_runs: dict[str, DriverRun]) -> None:
    run, lay = native_runs[name], LAYOUTS[name]
    assert run.returncode == 0, run.failure()
    assert len(run.cases) == 2 * (2 * len(BCAST_SIZES) + 2 * len(REDUCE_SIZES)
                                  + len(ALLREDUCE_SIZES) + 2 * len(GATHER_SIZES)
                                  + 2 * len(SCATTER_SIZES) + len(ALLGATHER_SIZES) + 1)
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
        # the collective did span every host
        touched = {lay.node_of[r] for pair in across for r in pair}
        assert touched == set(lay.node_of), case.label()
        hierarchical = case.coll in ("allreduce", "barrier") or lay.balanced()
        if hierarchical:  # han's signature: only node leaders talk across hosts
            rooted = case.coll in ("bcast", "reduce", "gather", "scatter")
            leaders = lay.leaders(case.root if rooted else 0)
            assert all(s in leaders and d in leaders for s, d in across), \
                f"{name} {case.label()}: {sorted(across)}"


@pytest.mark.parametrize("name", ["3+2-round-robin", "5x2-block"])
def test_han_ports_count_the_same_matrices_under_smpi(
        name: str, native_runs: dict[str, DriverRun], smpi_driver: Build,
        tmp_path: Path) -> None:
    """The 3 + 2 layout (both fallbacks and the hierarchy) on a 2-host SimGrid platform, and
    libnbc's binomial and redscat_gather schedules on a 5-host one."""
    lay, native = LAYOUTS[name], native_runs[name]
    platform, hostfile = tiny_platform(tmp_path, len(set(lay.node_of)))
    hostfile.write_text("".join(f"h{n}\n" for n in lay.node_of))  # one line per rank
    run = run_smpi_driver("smpirun", smpi_driver.path, lay.np,
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
