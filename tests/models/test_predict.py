"""models.predict: one point, the rows of a request, the placement they record; pure."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from collbench.errors import UserError
from collbench.models.networks import network
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.predict import (
    Request,
    Shape,
    inner_algorithms,
    launches,
    placement,
    prediction_rows,
    resolve_algorithms,
    topology,
)

A = {"core": 0.2, "socket": 0.5, "node": 1.0}  # µs
BW = {"core": 1e9, "socket": 1e9, "node": 2e9}  # B/s
MODEL = P2PModel({lv: LevelModel(lv, (Regime(0, A[lv], BW[lv]),)) for lv in A})


def test_composites_run_the_fixed_decisions() -> None:
    assert inner_algorithms("allreduce", "nonoverlapping", 8, 1) == {
        "reduce": "binary", "bcast": "knomial"}
    assert inner_algorithms("allreduce", "recursive_doubling", 8, 1) is None
    # a chain chosen by the rules runs with fanout 1: Open MPI's pipeline
    for p in (2, 4, 8, 16):
        for size in (1, 4096, 1 << 20):
            got = inner_algorithms("allreduce", "nonoverlapping", p, size) or {}
            assert "chain" not in got.values()


def test_placement_works_out_what_is_not_given() -> None:
    assert placement(6, None, None) == (1, 6)
    assert placement(6, None, 4) == (2, 4)
    assert placement(6, 4, None) == (4, 2)
    assert placement(4, 4, 8) == (4, 8)  # the allocation, however few ranks fill it
    with pytest.raises(UserError, match=r"--nprocs 9 does not fit on 2 nodes × 4 ranks; "
                                        r"valid: at most 8, or more --nodes"):
        placement(9, 2, 4)


def test_rows_record_where_the_ranks_sit() -> None:
    """nodes and ppn of a row are the ones its ranks occupy, not the allocation."""
    def at(nprocs: int, nodes: int, ppn: int, mapping: str) -> tuple[int, int]:
        topo = topology(nprocs, nodes, ppn, mapping)
        row = prediction_rows(MODEL, "bcast", ["binomial"], topo, [1], campaign="c",
                              launch_id="l", model_name="m").rows[0]
        return row["nodes"], row["ppn"]

    assert at(4, 1, 8, "core") == (1, 4)
    assert at(4, 4, 8, "core") == (1, 4)
    assert at(7, 2, 4, "core") == (2, 4)
    assert at(4, 4, 8, "node") == (4, 1)
    assert at(7, 4, 8, "node") == (4, 2)


def test_a_request_gives_one_launch_per_collective_and_process_count() -> None:
    req = Request(("bcast", "scatter"), (4, 6), 8, None, "core", (1000, 1), "all")
    runs, notes = launches(MODEL, req, "x", "m.p2p.toml")
    assert [lid for lid, _ in runs] == ["model-bcast-np4-core", "model-bcast-np6-core",
                                        "model-scatter-np4-core", "model-scatter-np6-core"]
    assert notes == []
    rows = dict(runs)["model-bcast-np4-core"]
    assert len(rows) == 2 * len(resolve_algorithms("bcast", "all"))
    first = rows[0]
    assert (first["algorithm"], first["size_bytes"], first["nodes"], first["ppn"]) == \
        ("default", 1, 1, 4)
    assert first["source"] == first["backend"] == "model"
    assert json.loads(first["metrics"]) == {"model": "m.p2p.toml", "network": "mpi",
                                            "runs": "binary_tree", "stat": "avg over ranks"}


def test_algorithms_that_cannot_run_are_left_out_unless_named() -> None:
    req = Request(("barrier",), (4,), None, None, "core", (0,), "all")
    runs, notes = launches(MODEL, req, "x", "m")
    assert "two_proc" not in {r["algorithm"] for r in runs[0][1]}
    assert any(n.startswith("barrier two_proc at np=4 left out:") for n in notes)
    with pytest.raises(UserError, match="two_proc"):
        launches(MODEL, Request(("barrier",), (4,), None, None, "core", (0,), "two_proc"),
                 "x", "m")


def test_resolve_algorithms_checks_names() -> None:
    assert resolve_algorithms("bcast", "binomial, default,binomial") == ["binomial", "default"]
    with pytest.raises(UserError, match="--algorithms"):
        resolve_algorithms("bcast", "nope")
    with pytest.raises(UserError, match="valid: all, or a comma list"):
        resolve_algorithms("bcast", " , ")
    with pytest.raises(UserError, match="collective"):
        resolve_algorithms("nope", "all")


def test_an_allocation_that_does_not_fit_is_one_line() -> None:
    with pytest.raises(UserError, match="--nprocs 9 does not fit on 2 nodes × 4 ranks"):
        launches(MODEL, Request(("bcast",), (9,), 4, 2, "core", (1,)), "x", "m")


def test_predicting_is_pure() -> None:
    """The same point twice gives the same row, and nothing that reads or writes a results
    folder (analyse, store) is imported to predict it."""
    code = ("import sys\n"
            "import collbench.models.predict\n"
            "print(sorted(m for m in sys.modules if m.startswith(('collbench.analyse', "
            "'collbench.store', 'collbench.tune', 'collbench.commands'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
    topo = topology(6, 2, None, "socket", Shape(2, 2))
    again = [prediction_rows(MODEL, "allreduce", ["default", "nonoverlapping"], topo,
                             [1, 65536], campaign="c", launch_id="l", model_name="m",
                             net=network("smpi")).rows for _ in range(2)]
    assert again[0] == again[1]
    assert len(again[0]) == 4
