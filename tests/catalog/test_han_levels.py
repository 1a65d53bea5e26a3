"""A coll/tuned algorithm forced on one of coll/han's levels only ("+low=tuned:ALG",
catalog/components.py, plan/han_levels.py): the grammar, the rules file keyed by the
levels' communicator sizes (read back as Open MPI reads it), and a layout whose levels
cannot be told apart failing its points with a reason (the real run:
tests/kernel/test_han_settings.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.catalog import components as c
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.ompi_decisions import ALGORITHMS
from collbench.launch.base import LaunchOutcome
from collbench.plan import Launch, Point, han_levels
from collbench.runner import RowContext, build_rows
from collbench.tune.rules import parse_rules
from tests.catalog.test_components import HAN
from tests.test_plan import fails, make

HOSTS = '[run]\nbackend = "hosts"\n[run.hosts]\nhosts = ["n1:3", "n2:3", "n3:3"]\n'
BOTH = "simple+low=tuned:binomial+up=tuned:pipeline"


def test_levels_are_named_once_and_checked_against_what_han_runs_there() -> None:
    s = c.parse_han_setting("SIMPLE+up=tuned:pipeline+low=tuned:binomial", "bcast",
                            ("intra", "simple"))
    assert isinstance(s, c.HanSetting) and s.name == BOTH
    assert s.levels == {"low": "binomial", "up": "pipeline"}
    assert c.han_setting_of(s.name) == s
    assert "coll_han_bcast_up_module" not in s.mca("bcast", 0)  # up=tuned is no up module
    algs = ("intra", "simple")
    for name, coll, why in (
            ("intra+up=tuned:pipeline", "bcast", "runs no single coll/tuned collective"),
            ("simple+low=tuned:binomial", "allreduce", "valid: simple+up"),
            ("intra+low=tuned:ring", "bcast", "valid: basic_linear, chain"),
            ("intra+low=tuned:binomial+low=sm", "bcast", "each once")):
        said = c.parse_han_setting(name, coll, algs, ALGORITHMS.__getitem__)
        assert isinstance(said, str) and why in said, (name, said)
    up = c.parse_han_setting("simple+up=tuned:ring", "allreduce", algs)
    assert isinstance(up, c.HanSetting) and up.levels == {"up": "ring"}


@pytest.mark.parametrize(("nprocs", "ppn", "fine"), [
    (6, 3, True), (6, 2, True), (5, 2, True), (4, 2, False), (3, 3, False), (7, 3, False)])
def test_levels_of_the_same_size_cannot_be_forced_apart(nprocs: int, ppn: int,
                                                        fine: bool) -> None:
    setting = c.han_setting_of(BOTH)
    assert setting is not None
    why = c.levels_problem(setting, nprocs, ppn)
    assert (why is None) == fine, why
    if not fine:
        assert "\n" not in why  # type: ignore[operator]
    # forcing both levels to one algorithm needs no telling apart
    same = c.han_setting_of("simple+low=tuned:binomial+up=tuned:binomial")
    assert same is not None and (c.levels_problem(same, 4, 2) is None)


def _applied(text: str, coll_id: int, comm_size: int) -> int:
    """The algorithm Open MPI's tuned applies on a communicator of `comm_size` (the set of
    the largest size <= it, the first set below that; message rule of size 0)."""
    rules = parse_rules(text)
    assert rules.rules is not None and not [p for p in rules.problems
                                            if p.severity == "rejected"], rules.problems
    coll = rules.rules.find(coll_id)
    assert coll is not None
    fit = [s for s in coll.comms if s.comm_size <= comm_size] or [coll.comms[0]]
    return fit[-1].rules[0].alg


@pytest.mark.parametrize(("nprocs", "ppn"), [(6, 3), (6, 2), (8, 4), (12, 3)])
def test_the_rules_file_forces_each_level_and_nothing_else(nprocs: int, ppn: int) -> None:
    setting = c.han_setting_of(BOTH)
    assert setting is not None
    text = han_levels.rules_text(setting, "bcast", nprocs, ppn)
    nodes = nprocs // ppn
    ident = {a: ALGORITHMS["bcast"].index(a) + 1 for a in ("binomial", "pipeline")}
    assert _applied(text, 7, ppn) == ident["binomial"]
    assert _applied(text, 7, nodes) == ident["pipeline"]
    for size in {2, 3, nprocs, nprocs + 5} - {ppn, nodes}:
        assert _applied(text, 7, size) == 0, size  # tuned's fixed decision


def test_a_plan_forces_levels_by_a_rules_file_and_no_tuned_algorithm(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path))
    plan = make('collectives = ["bcast"]\nsizes = [8]\nnprocs = [6, 4]\nppn = [3, 2]\n'
                f'components = ["han"]\nalgorithms = ["{BOTH}"]', extra=HOSTS, catalog=HAN)
    by_layout = {(la.nprocs, la.ppn): dict(la.mca) for la in plan.launches}
    mca = by_layout[(6, 3)]
    assert mca["coll_han_use_bcast_algorithm"] == "simple"
    assert not [k for k in mca if k.startswith("coll_tuned_bcast_algorithm")]
    text = Path(mca[han_levels.FILENAME_KEY]).read_text()
    assert _applied(text, 7, 3) == ALGORITHMS["bcast"].index("binomial") + 1
    assert han_levels.FILENAME_KEY not in by_layout[(4, 2)]  # 2 nodes of 2: no file
    msg = fails('collectives = ["bcast"]\nsizes = [8]\nnprocs = [6]\ncomponents = ["han"]\n'
                'algorithms = ["simple+low=tuned:nope"]', catalog=HAN)
    assert "not a coll/tuned bcast algorithm" in msg


def _row(launch: Launch, **got: object) -> dict[str, object]:
    line = {"collective": "bcast", "size_bytes": 8, "nprocs": launch.nprocs, "avg_us": 5.0,
            "min_us": 4.0, "max_us": 6.0, "median_us": 5.0, "iterations": 10, "warmup": 1,
            "status": "ok", **got}
    ctx = RowContext("t", "hosts", "openmpi-5.0.11", "5.0.11")
    (row,) = build_rows(launch, [line], LaunchOutcome("ok", [], 0, 0.1), ctx, 2)
    return row


def _launch(nprocs: int, ppn: int) -> Launch:
    point = Point("bcast", BOTH, 2, 0, 0, 8, 10, 1)
    return Launch(launch_id="0000-t", repetition=0, nprocs=nprocs, mapping="core",
                  binding="core", oversubscribe=False, mca=(
                      ("coll_han_use_bcast_algorithm", "simple"),
                      (han_levels.FILENAME_KEY, "/x/tuned.rules"),
                      ("coll_tuned_use_dynamic_rules", "1")), env=(), swept=(),
                  selection="launch", points=(point,), timeout_s=60.0, validate=False,
                  samples=False, ppn=ppn, component="han")


def _ids(*names: str) -> list[int]:
    return [ALGORITHMS["bcast"].index(n) + 1 for n in names]


def test_a_forced_level_that_did_not_or_could_not_run_is_a_failed_point() -> None:
    binomial, pipeline, chain = _ids("binomial", "pipeline", "chain")
    # rank 0 is on its node's 3-rank low and the 2 leaders' up communicator
    ran = f"bcast@3={binomial},bcast@2={pipeline}"
    ok = _row(_launch(6, 3), component="han", sub_components="tuned", sub_algorithms=ran)
    assert (ok["status"], ok["component"], ok["algorithm"]) == ("ok", "han", BOTH)
    assert json.loads(str(ok["params"]))["mca"] == {}  # the forcing is the label's
    assert json.loads(str(ok["metrics"]))["sub_algorithms"] == ran
    same = _row(_launch(4, 2), component="han", sub_components="tuned")
    assert same["status"] == "failed" and "both have 2 ranks" in str(same["error"])
    sm = _row(_launch(6, 3), component="han", sub_components="sm")
    assert sm["status"] == "failed" and "did not take effect" in str(sm["error"])
    # tuned served both levels, but not with the algorithms named, or not seen at all
    for algs, why in ((f"bcast@3={binomial},bcast@2={chain}",
                       "ran bcast chain on han's up communicator (2 ranks), not pipeline"),
                      (f"bcast@3={binomial},bcast@3={chain},bcast@2={pipeline}",
                       "on han's low communicator (3 ranks), not binomial"),
                      (f"bcast@2={pipeline}", "no coll/tuned bcast algorithm on han's low"),
                      ("", "no coll/tuned bcast algorithm on han's low"),
                      ("bcast@3=1,?", "cannot be read"), ("bcast@x=1", "cannot be read")):
        bad = _row(_launch(6, 3), component="han", sub_components="tuned",
                   sub_algorithms=algs)
        assert bad["status"] == "failed" and why in str(bad["error"]), (algs, bad["error"])
        assert "\n" not in str(bad["error"])


@given(st.text(max_size=120))
@settings(max_examples=300, deadline=None)
def test_any_traced_algorithms_are_read_or_refused(text: str) -> None:
    got = han_levels.traced(text)
    assert got is None or all(co in COLLECTIVES and s > 0 and a >= 0 for co, s, a in got)


@given(st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_any_level_name_is_a_setting_or_one_line(value: str) -> None:
    got = c.parse_han_setting(f"simple+low=tuned:{value}", "bcast", ("intra", "simple"),
                              ALGORITHMS.__getitem__)
    assert isinstance(got, c.HanSetting) or "\n" not in got


def test_the_per_level_example_of_the_docs_plans(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.plan import make_plan
    from collbench.spec import parse_spec

    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path))
    doc = (Path(__file__).resolve().parents[2] / "docs" / "components.md").read_text()
    section = doc.split("### A coll/tuned algorithm per level", 1)[1]
    text = section.split("```toml\n", 1)[1].split("```", 1)[0]
    plan = make_plan(parse_spec(text, "components.md"), HAN, "components.md", cores=64)
    files = {p.algorithm: dict(la.mca).get(han_levels.FILENAME_KEY) for la in plan.launches
             for p in la.points}
    assert files["simple"] is None and files["default"] is None
    assert files[BOTH] and files["intra+low=tuned:knomial"]


@given(st.text(max_size=80))
@settings(max_examples=200, deadline=None)
def test_any_stored_name_reads_as_a_setting_or_none(name: str) -> None:
    got = c.han_setting_of(name)
    assert got is None or all(got.levels.values())


def test_tune_says_what_runs_a_per_level_winner() -> None:
    from collbench.tune.select import han_setting_note

    setting = c.han_setting_of(BOTH)
    assert setting is not None
    note = han_setting_note("bcast", f"{BOTH}@han", setting, 0, "bcast np=6 size 8")
    assert "coll_han_use_bcast_algorithm simple" in note and "\n" not in note
    assert "binomial at the low level's, pipeline at the up level's communicator size" in note


@pytest.mark.parametrize("collective", sorted({c for c, _ in c.TUNED_LEVELS}))
def test_algorithms_components_shows_a_per_level_example_that_plans(
        collective: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from collbench.cli import main

    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path))
    assert main(["algorithms", collective, "--components", "--format", "json"]) == 0
    (name,) = [r["knob"].removeprefix("variant ").removesuffix("@han")
               for r in json.loads(capsys.readouterr().out) if "=tuned:" in r["knob"]]
    setting = c.han_setting_of(name)
    assert setting is not None and setting.levels, name
    plan = make(f'collectives = ["{collective}"]\nsizes = [8]\nnprocs = [6]\nppn = [3]\n'
                f'components = ["han"]\nalgorithms = ["{name}"]', HOSTS, catalog=HAN)
    (launch,) = plan.launches
    assert dict(launch.mca)[han_levels.FILENAME_KEY]
