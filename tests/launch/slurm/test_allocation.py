"""Inside an allocation: host lists, slots, and what the local backend records there."""

from __future__ import annotations

import pytest

from collbench.catalog.algorithms import Catalog
from collbench.launch import allocation
from collbench.launch.allocation import expand_counts, expand_hostlist
from collbench.spec import Spec
from tests.backend_support import make_backend
from tests.launch.slurm.util import fake_mpi, launch, spec


def test_hostlists_expand_like_scontrol_show_hostnames() -> None:
    assert expand_hostlist("n[1-3,07],gpu01,x[01-02]y[1-2]") == [
        "n1", "n2", "n3", "n07", "gpu01", "x01y1", "x01y2", "x02y1", "x02y2"]
    assert expand_hostlist("vm") == ["vm"] and expand_hostlist("") == []
    assert expand_counts("24(x2),12") == [24, 24, 12]


def test_nodes_used_follow_open_mpi_mapping() -> None:
    alloc = allocation.Allocation("5", ("n1", "n2", "n3"), (2, 2, 2))
    assert [alloc.nodes_used(p, "core") for p in (1, 2, 3, 6, 9)] == [1, 1, 2, 3, 3]
    assert [alloc.nodes_used(p, "node") for p in (1, 2, 5)] == [1, 2, 3]
    assert alloc.nodes_used(3, "node:OVERSUBSCRIBE") == 3

CATALOG = Catalog("openmpi", "5.0.11", "test", {})


@pytest.fixture
def in_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "n[1-2]",
                 "SLURM_TASKS_PER_NODE": "2(x2)"}.items():
        monkeypatch.setenv(k, v)


def test_local_backend_records_the_allocation_nodes(in_allocation: None) -> None:
    backend = make_backend("local", fake_mpi())
    assert backend.nodes(launch(nprocs=4)) == 2
    assert backend.nodes(launch(nprocs=2)) == 1
    assert backend.nodes(launch(nprocs=2, mapping="node")) == 2
    assert backend._hosts(launch(nprocs=4)) == ["n1", "n2"]
    assert backend._hosts(launch(nprocs=2)) == ["n1"]


def test_planning_counts_the_allocation_slots_not_this_machine(
        in_allocation: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def cores(backend: str, sp: Spec) -> int | None:
        return make_backend(backend, fake_mpi(), sp).planning(CATALOG).cores

    assert cores("local", spec()) == 4
    pmix = 'srun_mpi = "pmix"\n'  # "auto" would ask srun, which is not running here
    assert cores("slurm", spec(pmix + "tasks_per_node = 24")) == 48
    assert cores("slurm", spec(pmix)) == 4  # 4 ranks over 2 nodes: 2 per node
    monkeypatch.delenv("SLURM_JOB_ID")
    assert cores("local", spec()) is None
    assert make_backend("local", fake_mpi()).nodes(launch()) == 1
