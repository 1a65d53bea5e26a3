"""Which component a row names, how a launch asks for one, and when what ran is not what
the row would say (catalog/components.py; the real runs: tests/kernel/test_coll_preference)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.catalog import components as c
from collbench.catalog import openmpi
from collbench.catalog.algorithms import Catalog
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
    # han's settings, as [measure] algorithms names them, with the MCA each launch gets
    variants = {r["knob"]: r["value"] for r in rows if r["knob"].startswith("variant ")}
    assert variants["variant simple@han"] == "coll_han_use_bcast_algorithm=simple"
    assert variants["variant intra+low=sm@han"] == ("coll_han_use_bcast_algorithm=intra "
                                                   "coll_han_bcast_low_module=1")
    assert main(["algorithms", "--components", "--backend", "simgrid"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


HAN = Catalog("openmpi", "5.0.11", "built-in table", openmpi.fallback(), openmpi.han_fallback())
HAN_MEASURE = ('collectives = ["bcast"]\nsizes = [8]\nnprocs = [4]\n'
               'components = ["default", "han"]\n')


def test_han_settings_are_named_by_a_grammar_with_one_spelling() -> None:
    algs = ("intra", "simple")
    s = c.parse_han_setting("INTRA+up=adapt+low=sm", "bcast", algs)
    assert isinstance(s, c.HanSetting) and s.name == "intra+low=sm+up=adapt"
    assert s.mca("bcast", 16384) == {
        "coll_han_use_bcast_algorithm": "intra", "coll_han_bcast_low_module": "1",
        "coll_han_bcast_up_module": "1", "coll_han_bcast_segsize": "16384"}
    assert c.han_setting_of(s.name) == s and c.han_setting_of("binomial") is None
    for bad, why in (("ring", "valid: intra, simple"), ("intra+low=adapt", "valid: tuned, sm"),
                     ("intra+mid=sm", "valid modifiers"), ("simple+up=adapt", "intra algorithm"),
                     ("intra+low=sm+low=tuned", "each once")):
        said = c.parse_han_setting(bad, "bcast", algs)
        assert isinstance(said, str) and why in said, (bad, said)
    assert isinstance(c.parse_han_setting("intra+low=sm", "allgather", algs), str)


def test_han_algorithms_come_from_ompi_info() -> None:
    text = ("mca:coll:han:param:coll_han_use_bcast_algorithm:enumerator:value:0:default\n"
            "mca:coll:han:param:coll_han_use_bcast_algorithm:enumerator:value:2:simple\n"
            "mca:coll:han:param:coll_han_use_bcast_algorithm:enumerator:value:1:intra\n"
            "mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:6:binomial\n")
    got = openmpi.parse_han(text)
    assert [(a.name, a.id, a.segmentable) for a in got["bcast"]] == [
        ("intra", 1, True), ("simple", 2, False)]
    assert list(got) == ["bcast"]


def test_han_settings_are_variants_of_component_han_set_for_the_whole_launch() -> None:
    plan = make(HAN_MEASURE + 'algorithms = ["default", "binomial", "simple", '
                '{name = "intra+up=adapt", segsize = [16384]}]', catalog=HAN)
    han = {p.algorithm: dict(la.mca) for la in plan.launches for p in la.points
           if la.component == "han"}
    assert set(han) == {"default", "binomial", "simple", "intra+up=adapt"}
    assert han["simple"]["coll_han_use_bcast_algorithm"] == "simple"
    assert "coll_tuned_use_dynamic_rules" not in han["simple"]
    assert (han["intra+up=adapt"]["coll_han_bcast_up_module"],
            han["intra+up=adapt"]["coll_han_bcast_segsize"]) == ("1", "16384")
    # not under the other components: those run coll/tuned's variants only
    assert {p.algorithm for la in plan.launches if la.component is None
            for p in la.points} == {"default", "binomial"}
    assert all(la.selection == "launch" for la in plan.launches  # MPI_T cannot reach han
               if la.component == "han" and la.points[0].algorithm != "default")


def test_a_han_setting_needs_han_and_says_its_valid_knobs() -> None:
    msg = fails('collectives = ["bcast"]\nsizes = [8]\nnprocs = [4]\nalgorithms = ["simple"]',
                catalog=HAN)
    assert "'simple' is a coll/han setting" in msg and 'add "han"' in msg
    msg = fails(HAN_MEASURE + 'algorithms = [{name = "simple", segsize = [4096]}]',
                catalog=HAN)
    assert "takes no segsize" in msg
    msg = fails(HAN_MEASURE + 'algorithms = ["intra+low=adapt"]', catalog=HAN)
    assert "valid: tuned, sm" in msg
    # an MPI without han algorithms (4.1) knows no such name
    msg = fails(HAN_MEASURE + 'algorithms = ["simple"]')
    assert "not a bcast algorithm" in msg


def test_tune_says_how_to_run_a_han_setting_that_won() -> None:
    from collbench.tune.select import han_setting_note

    note = han_setting_note("bcast", "intra+up=adapt@han", c.HanSetting("intra", None, "adapt"),
                            0, "bcast np=4 size 8")
    assert "kept the default" in note and note.endswith(
        "mpirun --mca coll_han_use_bcast_algorithm intra --mca coll_han_bcast_up_module 1")


def test_the_han_settings_example_of_the_docs_plans() -> None:
    from pathlib import Path

    from collbench.plan import make_plan
    from collbench.spec import parse_spec

    doc = (Path(__file__).resolve().parents[2] / "docs" / "components.md").read_text()
    section = doc.split("## han's own settings", 1)[1]
    text = section.split("```toml\n", 1)[1].split("```", 1)[0]
    plan = make_plan(parse_spec(text, "components.md"), HAN, "components.md", cores=64)
    labels = {(p.collective, p.algorithm, p.segsize) for la in plan.launches
              if la.component == "han" for p in la.points}
    assert ("bcast", "intra+up=adapt", 0) in labels and ("bcast", "intra", 16384) in labels
    assert ("allreduce", "simple", 0) in labels


@given(st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_any_name_is_a_han_setting_or_one_line_saying_why(name: str) -> None:
    got = c.parse_han_setting(name, "bcast", ("intra", "simple"))
    if isinstance(got, c.HanSetting):
        assert c.parse_han_setting(got.name, "bcast", ("intra", "simple")) == got
    else:
        assert got and "\n" not in got  # one line (the name is quoted with repr)


@given(st.binary(max_size=400))
@settings(max_examples=200, deadline=None)
def test_any_ompi_info_bytes_give_han_algorithms_or_none(data: bytes) -> None:
    text = data.decode(errors="replace")
    for coll, algs in openmpi.parse_han(
            text + "\nmca:coll:han:param:coll_han_use_bcast_algorithm:enumerator:value:2:simple"
    ).items():
        assert algs and all(a.id and a.id > 0 and a.collective == coll for a in algs)
