"""Which component a row names, how a launch asks for one, and when what ran is not what
the row would say (catalog/components.py; the real runs: tests/kernel/test_coll_preference)."""

from __future__ import annotations

import pytest

from collbench.catalog import components as c
from collbench.catalog.simgrid import simgrid_catalog
from tests.test_plan import MPICH, OMPI, fails, make


def test_a_row_names_what_the_probe_saw_else_what_was_simulated_or_the_mpi() -> None:
    assert c.row_component("openmpi-5.0.11", False, {"component": "han"}, None) == "han"
    assert c.row_component("smpi-3.32", False, {"implementation": "port"}, None) == "tuned"
    assert c.row_component("smpi-3.32", False, {"implementation": "smpi"}, None) == "smpi"
    assert c.row_component("smpi-3.32", False, {}, None) == "smpi"  # non-blocking: SMPI's
    assert c.row_component("mpich-5.0.2", False, {}, None) == "mpich"
    assert c.row_component("openmpi-5.0.11", True, {"component": "han"}, None) == "p2p"
    # Open MPI that reported nothing (hidden symbols): what was asked for, else unknown
    assert c.row_component("openmpi-5.0.11", False, {}, "tuned") == "tuned"
    assert c.row_component("openmpi-5.0.11", False, {}, None) == "unknown"
    # a probe value that is no component name is not stored
    assert c.row_component("openmpi-5.0.11", False, {"component": "x;y"}, None) == "unknown"


@pytest.mark.parametrize(("requested", "tuned", "nb", "got", "problem"), [
    (None, False, False, {"component": "han"}, None),  # default: whatever Open MPI picks
    (None, True, False, {"component": "tuned"}, None),
    (None, True, False, {"component": "han"}, "coll/han served bcast, not coll/tuned"),
    (None, False, True, {"component": "adapt"}, "coll/adapt served bcast, not coll/libnbc"),
    ("han", False, False, {"component": "tuned"}, "coll/tuned served bcast, not coll/han"),
    ("han", True, False, {"component": "han", "sub_components": "libnbc,tuned"}, None),
    ("han", True, False, {"component": "han", "sub_components": "libnbc,sm"},
     "did not run on coll/han's sub-communicators: they used libnbc,sm"),
    ("tuned", False, False, {}, None),  # the probe saw nothing: nothing to judge
])
def test_a_forced_setting_that_did_not_take_effect_is_named(
        requested: str | None, tuned: bool, nb: bool, got: dict[str, str],
        problem: str | None) -> None:
    said = c.served_problem("bcast", "binomial", requested, tuned, nb, got)
    if problem is None:
        assert said is None
    else:
        assert said is not None and problem in said and "\n" not in said


def test_labels_name_only_components_the_algorithm_does_not_imply() -> None:
    assert [c.label_suffix(x) for x in ("tuned", "libnbc", "unknown", "han", "self", None)] \
        == ["", "", "", "@han", "@self", ""]


def test_components_are_a_launch_dimension_asked_for_by_priority() -> None:
    plan = make('collectives = ["bcast"]\nalgorithms = ["default", "binomial"]\n'
                'sizes = [8]\nnprocs = [4]\ncomponents = ["default", "tuned", "han"]')
    asked = sorted({str(la.component) for la in plan.launches})
    assert asked == ["None", "han", "tuned"]
    for la in plan.launches:
        mca, env = dict(la.mca), dict(la.env)
        if la.component is None:
            assert not any(k.endswith("_priority") for k in mca) and c.ENV not in env
        else:
            assert mca[f"coll_{la.component}_priority"] == str(c.PRIORITY)
            assert env[c.ENV] == la.component
        if la.component == "han":  # forced for the whole launch: han's sub-communicators
            assert la.selection != "mpit"


def test_components_are_refused_where_no_open_mpi_selects_them() -> None:
    msg = fails('collectives = ["bcast"]\nnprocs = [2]\ncomponents = ["han"]', catalog=MPICH)
    assert "measure.components" in msg and "mpich" in msg
    sim = simgrid_catalog(OMPI, None)
    msg = fails('collectives = ["bcast"]\nnprocs = [2]\ncomponents = ["han"]',
                '[run]\nbackend = "simgrid"\n', catalog=sim)
    assert "SimGrid runs collbench's ports" in msg
    msg = fails('collectives = ["bcast"]\nnprocs = [2]\ncomponents = ["hann"]')
    assert "hann" in msg and "han" in msg
    assert make('collectives = ["bcast"]\nnprocs = [2]\ncomponents = ["default"]',
                catalog=OMPI).launches


def test_algorithms_components_lists_priorities_and_a_collectives_knobs(
        capsys: pytest.CaptureFixture[str]) -> None:
    from collbench.cli import main

    assert main(["algorithms", "bcast", "--components", "--format", "json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)
    priority = {r["component"]: int(r["value"]) for r in rows if r["knob"].endswith("_priority")}
    assert priority["han"] > priority["tuned"]  # the wheel is Open MPI 5.0: han first
    knobs = {r["knob"] for r in rows}
    assert {"coll_han_bcast_low_module", "coll_han_bcast_up_module",
            "coll_tuned_bcast_algorithm"} <= knobs
    assert not any("allreduce" in k for k in knobs)
    assert main(["algorithms", "--components", "--backend", "simgrid"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
