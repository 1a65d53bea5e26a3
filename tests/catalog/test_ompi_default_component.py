"""han_plan.default_choice: which component "default" is, per Open MPI series and
placement, and coll/han's plan on 2 or more nodes (coll_han_*.c, v5.0.x)."""

from __future__ import annotations

import pytest

from collbench.catalog import han_plan as hp
from collbench.catalog import ompi_decisions as od
from collbench.errors import UserError


@pytest.mark.parametrize("collective", hp.HAN_SERVES)
def test_41_is_tuned_on_the_whole_communicator_everywhere(collective: str) -> None:
    got = hp.default_choice("4.1.8", collective, 16, 4096, nodes=2, ppn=8)
    want = od.decide_osu("4.1", collective, 16, 4096)
    assert (got.component, got.decision, got.han) == ("tuned", want, None)
    assert "priority 0" in got.why


def test_50_on_one_node_or_not_served_is_tuned() -> None:
    assert hp.default_choice("5.0.10", "bcast", 8, 64, nodes=1).component == "tuned"
    other = hp.default_choice("5.0", "alltoall", 16, 64, nodes=2, ppn=8)
    assert other.component == "tuned" and "leaves alltoall" in other.why
    assert hp.default_choice("5.0", "allreduce", 16, 64, nodes=2, ppn=8,
                             commutative=False).component == "tuned"


@pytest.mark.parametrize(("size", "segments"), [(1, 1), (64 * 1024, 1), (64 * 1024 + 1, 2),
                                                (1 << 20, 16)])
def test_50_bcast_on_two_nodes_is_hans_pipeline(size: int, segments: int) -> None:
    got = hp.default_choice("5.0.10", "bcast", 12, size, nodes=3, ppn=4)
    assert got.component == "han" and got.han is not None
    plan = got.han
    assert (plan.algorithm, plan.segments) == ("intra", segments)
    piece = min(size, 64 * 1024)
    assert plan.first == hp.SubCall(hp.INTER, "bcast", 3, "tuned", od.algorithm_name(
        "5.0", "bcast", od.decide_osu("5.0", "bcast", 3, piece).algorithm_id), piece)
    up, low = plan.stages
    assert (up.level, up.component, up.algorithm, up.nprocs) == (hp.INTER, "libnbc",
                                                                 "basic_linear", 3)
    assert (low.level, low.component, low.nprocs, low.size_bytes) == (hp.INTRA, "tuned", 4,
                                                                      piece)
    # one segment: the blocking bcast carries it, libnbc's ibcast never runs
    assert [c.component for c in plan.runs()] == \
        (["tuned", "tuned"] if segments == 1 else ["tuned", "libnbc", "tuned"])


def test_50_rooted_and_gathering_levels_carry_the_right_blocks() -> None:
    def plan(coll: str) -> hp.HanPlan:
        got = hp.default_choice("5.0", coll, 16, 1000, nodes=4, ppn=4).han
        assert got is not None
        return got

    assert [(s.level, s.collective, s.nprocs, s.size_bytes) for s in plan("gather").stages] \
        == [(hp.INTRA, "gather", 4, 1000), (hp.INTER, "gather", 4, 4000)]
    assert plan("gather").algorithm == "simple"
    assert [(s.level, s.collective, s.size_bytes) for s in plan("scatter").stages] == \
        [(hp.INTER, "scatter", 4000), (hp.INTRA, "scatter", 1000)]
    assert [(s.level, s.collective, s.size_bytes) for s in plan("allgather").stages] == \
        [(hp.INTRA, "gather", 1000), (hp.INTER, "allgather", 4000),
         (hp.INTRA, "bcast", 16000)]
    assert [s.component for s in plan("allreduce").stages] == \
        ["tuned", "libnbc", "libnbc", "tuned"]
    # libnbc's ireduce on 4 leaders with count >= 4: reduce-scatter + gather
    assert plan("reduce").stages[1].algorithm == "rabenseifner"


@pytest.mark.parametrize("collective", hp.HAN_SERVES)
def test_50_one_rank_per_node_is_tuned_on_the_whole_communicator(collective: str) -> None:
    """coll_han_subcomms.c (v5.0.10): when the most ranks any node holds is 1, han restores
    the fallback (tuned) functions and disables its module."""
    got = hp.default_choice("5.0.10", collective, 4, 8, nodes=4, ppn=1)
    assert (got.component, got.han) == ("tuned", None), got
    assert got.decision == od.decide_osu("5.0", collective, 4, 8)
    assert "one rank per node" in got.why
    assert hp.default_choice("5.0.10", collective, 4, 8, nodes=4).component == "tuned"
    # two ranks on one of the nodes is enough for han to stay
    assert hp.default_choice("5.0.10", collective, 5, 8, nodes=4, ppn=2).component == (
        "tuned" if collective in hp.HAN_IMBALANCED_FALLBACK else "han")


def test_one_rank_per_node_has_no_low_level() -> None:
    got = hp.han_plan("5.0", "gather", 4, 1, 8)
    assert [s.level for s in got.stages] == [hp.INTER]


def test_han_plan_names_its_collectives() -> None:
    with pytest.raises(UserError, match="alltoall"):
        hp.han_plan("5.0", "alltoall", 2, 2, 8)


@pytest.mark.parametrize("collective", hp.HAN_SERVES)
def test_50_unequal_ranks_per_node_give_back_what_han_checks(collective: str) -> None:
    """3 + 2 ranks on 2 nodes: han gives bcast and reduce back (seen on 5.0.11, 2 emulated
    hosts), as every collective whose coll_han_<coll>.c checks are_ppn_imbalanced; allreduce
    and barrier do not check, so han runs them, on the fullest node's low communicator."""
    got = hp.default_choice("5.0.11", collective, 5, 1024, nodes=2, ppn=3)
    gives_back = collective not in ("allreduce", "barrier")
    assert (got.component == "tuned") == gives_back, got
    if gives_back:
        assert "unequal ranks per node" in got.why
        assert got.decision == od.decide_osu("5.0", collective, 5, 1024)
    else:
        assert got.han is not None and {s.nprocs for s in got.han.stages
                                         if s.level == hp.INTRA} == {3}
