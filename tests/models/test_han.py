"""models.han: Open MPI 5.0's "default" on 2 or more nodes as coll/han's hierarchy, composed
from the per-level algorithm models; rows say component han."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.catalog import han_plan as od
from collbench.cli import main
from collbench.models import han
from collbench.models.algorithms import detail
from collbench.models.networks import network
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.p2pfile import write_p2p
from collbench.models.predict import predict_point, prediction_rows, topology
from collbench.models.topology import Topology
from collbench.store import Store

A = {"core": 0.2, "socket": 0.5, "node": 3.0}  # µs
BW = {"core": 4e9, "socket": 2e9, "node": 1e9}  # B/s
MODEL = P2PModel({lv: LevelModel(lv, (Regime(0, A[lv], BW[lv]),)) for lv in A})


def test_compose_is_a_pipeline_over_segments() -> None:
    """sum of the stages + (segments - 1) x the slowest; bcast's first segment goes up
    with the blocking call instead of stage 0."""
    times = {"a": (1.0, 1.0, 2.0), "b": (3.0, 2.0, 5.0), "f": (7.0, 7.0, 7.0)}

    def cost(call: od.SubCall, topo: Topology) -> tuple[float, float, float]:
        return times[call.algorithm]

    a = od.SubCall(od.INTER, "bcast", 2, "libnbc", "a", 8)
    b = od.SubCall(od.INTRA, "bcast", 4, "tuned", "b", 8)
    f = od.SubCall(od.INTER, "bcast", 2, "tuned", "f", 8)
    topo = Topology(8, 2, 4)
    assert han.compose(od.HanPlan("intra", 0, 1, (a, b)), topo, cost) == (5.0, 4.0, 7.0)
    assert han.compose(od.HanPlan("intra", 8, 3, (a, b)), topo, cost) == (15.0, 14.0, 17.0)
    assert han.compose(od.HanPlan("intra", 0, 1, (a, b), f), topo, cost) == (10.0, 9.0, 12.0)
    assert han.compose(od.HanPlan("intra", 8, 3, (a, b), f), topo, cost) == (20.0, 19.0, 22.0)


def test_sub_communicators_follow_the_placement() -> None:
    low, up = han.sub_topologies(Topology(12, 3, 4, sockets=2, mapping="node"))
    assert (low.nprocs, low.nodes, low.mapping) == (4, 1, "core")
    assert (up.nprocs, up.nodes, up.ppn) == (3, 3, 1)
    assert low.levels_used() == {"core", "socket"} and up.levels_used() == {"node"}


@pytest.mark.parametrize("collective", od.HAN_SERVES)
def test_default_on_two_nodes_is_hans_plan_costed_per_level(collective: str) -> None:
    topo = topology(16, 2, 8, "core")
    size = 1 << 20
    plan = od.han_plan("5.0", collective, 2, 8, size)
    low, up = han.sub_topologies(topo)
    # the slowest rank's time rebuilt from each call's own prediction on its level
    calls = [detail(MODEL, up if c.level == od.INTER else low, c.collective,
                    c.algorithm, c.size_bytes,
                    segsize=c.segsize).max_us for c in plan.stages]
    head = [] if plan.first is None else [detail(
        MODEL, up, "bcast", plan.first.algorithm, plan.first.size_bytes).max_us]
    want = (head[0] + sum(calls[1:]) if head else sum(calls)) + \
        (plan.segments - 1) * max(calls)
    got = predict_point(MODEL, topo, collective, "default", size, net=network("serial"))
    assert got[2] == pytest.approx(want, rel=1e-9)
    assert got[1] <= got[0] <= got[2]
    # 4.1 runs tuned's decision on the whole communicator: another figure
    assert predict_point(MODEL, topo, collective, "default", size, version="4.1") != got


def test_rows_say_which_component_default_is() -> None:
    two = prediction_rows(MODEL, "allreduce", ["default", "ring"], topology(8, 2, 4, "core"),
                          [8, 1 << 20], campaign="c", launch_id="l", model_name="m")
    by = {(r["algorithm"], r["size_bytes"]): r for r in two.rows}
    assert by[("default", 8)]["component"] == "han"
    assert by[("ring", 8)]["component"] == "tuned"
    runs = json.loads(by[("default", 1 << 20)]["metrics"])["runs"]
    assert runs.startswith("han intra, 16 x 64 KiB segments: intra_node reduce tuned")
    one = prediction_rows(MODEL, "allreduce", ["default"], topology(8, 1, 8, "core"), [8],
                          campaign="c", launch_id="l", model_name="m")
    assert one.rows[0]["component"] == "tuned"
    old = prediction_rows(MODEL, "allreduce", ["default"], topology(8, 2, 4, "core"), [8],
                          campaign="c", launch_id="l", model_name="m", version="4.1")
    assert (old.rows[0]["component"], old.rows[0]["mpi_version"]) == ("tuned", "4.1")


def test_model_predict_openmpi_series(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                      ) -> None:
    p2p = tmp_path / "m.p2p.toml"
    write_p2p(MODEL, p2p)
    out = tmp_path / "pred"
    assert main(["model", "predict", str(p2p), "--collective", "bcast", "--algorithms",
                 "default", "--nprocs", "8", "--nodes", "2", "--sizes", "1K",
                 "-o", str(out)]) == 0
    got = Store(out).reading(lambda con: con.execute(
        "SELECT DISTINCT component, mpi_version FROM measurements").fetchall())
    assert got == [("han", "5.0")]
    capsys.readouterr()
    assert main(["model", "predict", str(p2p), "--collective", "bcast", "--nprocs", "8",
                 "--openmpi", "3.1", "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "3.1" in err[0] and "4.1, 5.0" in err[0]
