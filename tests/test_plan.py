"""Expanding a spec into launches and points: dimensions, forcing, exclusion, order, ids."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from collbench.catalog import mpich, openmpi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError
from collbench.plan import Launch, Plan, Point, estimate, make_plan
from collbench.spec import load_spec, parse_spec

ROOT = Path(__file__).resolve().parent.parent
OMPI = Catalog("openmpi", "5.0.11", "built-in table", openmpi.fallback())
MPICH = Catalog("mpich", "4.2.0", "built-in table", mpich.table())


@pytest.fixture(scope="module")
def real_catalog() -> Catalog:
    try:
        mpi = find_mpi()
    except UserError as e:
        pytest.skip(str(e))
    if mpi.implementation != "openmpi":
        pytest.skip("needs Open MPI")
    return load_catalog(mpi)


def make(measure: str, extra: str = "", before: str = "", catalog: Catalog = OMPI,
         cores: int = 64) -> Plan:
    text = f'{before}[campaign]\nname = "t"\n[measure]\n{measure}\n{extra}'
    return make_plan(parse_spec(text, "spec.toml"), catalog, "spec.toml", cores=cores)


def fails(measure: str, extra: str = "", before: str = "", catalog: Catalog = OMPI) -> str:
    with pytest.raises(UserError) as e:
        make(measure, extra, before, catalog)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("spec.toml: "), msg
    return msg


def variants(launch: Launch) -> list[tuple[str, str, int, int]]:
    """(collective, algorithm, segsize, fanout) blocks in launch order."""
    out: list[tuple[str, str, int, int]] = []
    for p in launch.points:
        key = (p.collective, p.algorithm, p.segsize, p.fanout)
        if not out or out[-1] != key:
            out.append(key)
    return out


SEQ = '[run]\norder = "sequential"\nseed = 1\n'


def test_launch_dimensions_are_cartesian() -> None:
    plan = make('collectives = ["bcast", "gather"]\nalgorithms = "default"\nsizes = "1:8"\n'
                'nprocs = [2, 4]\nmap_by = ["core", "socket"]\nbind_to = ["core", "none"]',
                '[mca.sweep]\nbtl_x = [1, 2, 3]\n[run]\nrepetitions = 2\n')
    keys = {(la.nprocs, la.mapping, la.binding, la.swept, la.repetition) for la in plan.launches}
    assert len(plan.launches) == len(keys) == 2 * 2 * 2 * 3 * 2
    assert all(la.selection == "none" and la.mca == la.swept for la in plan.launches)
    assert {len(la.points) for la in plan.launches} == {2 * 4}
    assert plan.points_total() == 48 * 8


def test_zip_varies_dimensions_together() -> None:
    plan = make('collectives = "bcast"\nalgorithms = "default"\nnprocs = [2, 4, 8]\n'
                'map_by = ["core", "socket", "node"]\nbind_to = ["core", "none"]',
                "[mca.sweep]\nbtl_x = [1, 2, 3]\n", 'zip = [["nprocs", "btl_x", "map_by"]]\n')
    combos = {(la.nprocs, la.mapping, dict(la.swept)["btl_x"], la.binding)
              for la in plan.launches}
    assert combos == {(n, m, x, b) for n, m, x in [(2, "core", "1"), (4, "socket", "2"),
                                                     (8, "node", "3")] for b in ("core", "none")}


def test_exclude_points_and_whole_launches() -> None:
    body = ('collectives = ["bcast", "gather"]\nalgorithms = ["default", "binomial"]\n'
            'sizes = "1:1M"\nnprocs = [2, 4]')
    plan = make(body, before='exclude = [{collective = "gather", nprocs = 2}, '
                             '{algorithm = "binomial", size = ["1M", "512K"]}]\n')
    at = {la.nprocs: la.points for la in plan.launches}
    assert {p.collective for p in at[2]} == {"bcast"}
    assert {p.collective for p in at[4]} == {"bcast", "gather"}
    big = [p for p in at[4] if p.size_bytes >= 2**19]
    assert big and all(p.algorithm == "default" for p in big)
    # a launch-level key removes the launch; an algorithm can be named by id
    plan = make(body, before='exclude = [{nprocs = 2}, {algorithm = 2, collective = "gather"}]\n')
    assert [la.nprocs for la in plan.launches] == [4]
    assert ("gather", "binomial") not in {(p.collective, p.algorithm) for p in plan.launches[0]
                                          .points}
    assert fails(body, before="exclude = [{nprocs = [2, 4]}]\n") == (
        "spec.toml: exclude: every point is excluded; nothing to measure")
    assert fails(body, before='exclude = [{algorithm = "binomal"}]\n') == (
        "spec.toml: exclude[0].algorithm: 'binomal' is not measured; valid: default, binomial "
        "(did you mean binomial?)")


def test_exclude_by_mca_sweep_value() -> None:
    plan = make('collectives = "bcast"\nalgorithms = "default"\nnprocs = [2, 4]',
                "[mca.sweep]\nbtl_x = [true, false]\n",
                "exclude = [{btl_x = false, nprocs = 4}]\n")
    assert sorted((la.nprocs, la.swept) for la in plan.launches) == [
        (2, (("btl_x", "false"),)), (2, (("btl_x", "true"),)), (4, (("btl_x", "true"),))]


def test_auto_selection_switches_at_run_time_where_it_can(real_catalog: Catalog) -> None:
    plan = make('collectives = ["bcast", "allgatherv"]\nnprocs = 2', SEQ, catalog=real_catalog)
    by: dict[str, list[Launch]] = {}
    for la in plan.launches:
        by.setdefault(la.selection, []).append(la)
    (mpit,), (none,) = by["mpit"], by["none"]
    bcast = [a.name for a in real_catalog.of("bcast")]
    assert variants(mpit) == [("bcast", n, 0, 0) for n in ["default", *bcast]]
    assert mpit.mca == (("coll_tuned_use_dynamic_rules", "1"),)
    # allgatherv's control variable is read-only: one launch per algorithm, forced by MCA
    assert variants(none) == [("allgatherv", "default", 0, 0)] and none.mca == ()
    forced = {dict(la.mca)["coll_tuned_allgatherv_algorithm"] for la in by["launch"]}
    assert forced == {str(a.id) for a in real_catalog.of("allgatherv")}
    assert all(dict(la.mca)["coll_tuned_use_dynamic_rules"] == "1" for la in by["launch"])
    assert all(len(variants(la)) == 1 for la in by["launch"])


def test_default_points_ride_in_the_mpit_launch() -> None:
    plan = make('collectives = ["bcast", "gatherv", "barrier"]\nnprocs = 2\n'
                'algorithms = {bcast = "binomial", gatherv = "all", barrier = "default"}', SEQ)
    (launch,) = plan.launches
    assert launch.selection == "mpit"
    assert variants(launch) == [("bcast", "binomial", 0, 0), ("gatherv", "default", 0, 0),
                                ("barrier", "default", 0, 0)]
    assert [p.size_bytes for p in launch.points if p.collective == "barrier"] == [0]


def test_launch_selection_forces_one_algorithm_per_launch() -> None:
    plan = make('collectives = "bcast"\nnprocs = 2\nsizes = "1K"\nalgorithms = ["default", '
                '{name = "chain", segsize = [0, "64K"], fanout = [2, 4]}]',
                SEQ + 'selection = "launch"\n')
    assert [la.selection for la in plan.launches] == ["none"] + ["launch"] * 4
    mcas = [dict(la.mca) for la in plan.launches[1:]]
    assert all(m["coll_tuned_bcast_algorithm"] == "2" for m in mcas)
    assert [(m.get("coll_tuned_bcast_algorithm_segmentsize"),
             m["coll_tuned_bcast_algorithm_tree_fanout"],
             m["coll_tuned_bcast_algorithm_chain_fanout"]) for m in mcas] == [
        (None, "2", "2"), (None, "4", "4"), ("65536", "2", "2"), ("65536", "4", "4")]
    assert [(p.segsize, p.fanout) for la in plan.launches[1:] for p in la.points] == [
        (0, 2), (0, 4), (65536, 2), (65536, 4)]


def test_mpit_selection_refuses_read_only_collectives() -> None:
    msg = fails('collectives = ["bcast", "allgatherv"]\nnprocs = 2', '[run]\nselection = "mpit"\n')
    assert msg == ("spec.toml: run.selection: 'mpit' cannot switch allgatherv algorithms at run "
                   "time in openmpi 5.0.11 (read-only control variable); valid: auto, launch")
    # default-only needs no switching
    plan = make('collectives = "allgatherv"\nalgorithms = "default"\nnprocs = 2',
                '[run]\nselection = "mpit"\n')
    assert [la.selection for la in plan.launches] == ["none"]


def test_mpich_forces_algorithms_with_environment() -> None:
    plan = make('collectives = "bcast"\nnprocs = 2\nsizes = 4\n'
                'algorithms = ["default", "binomial", "tree"]', SEQ, catalog=MPICH)
    strict = (("MPIR_CVAR_COLLECTIVE_FALLBACK", "error"),
              ("MPIR_CVAR_DEVICE_COLLECTIVES", "none"))
    assert [(la.selection, la.env, la.mca) for la in plan.launches] == [
        ("none", (), ()),
        ("launch", (("MPIR_CVAR_BCAST_INTRA_ALGORITHM", "binomial"), *strict), ()),
        ("launch", (("MPIR_CVAR_BCAST_INTRA_ALGORITHM", "tree"), *strict), ())]
    point = plan.launches[1].points[0]
    assert point.algorithm_id is None and point.job_line() == "bcast 0 0 0 4 1000 100"
    # "all" means every algorithm of the table, each in its own launch
    plan = make('collectives = "gather"\nnprocs = 2', catalog=MPICH)
    assert len(plan.launches) == 1 + len(MPICH.of("gather"))
    assert "'mpit' needs Open MPI" in fails('collectives = "bcast"\nnprocs = 2',
                                            '[run]\nselection = "mpit"\n', catalog=MPICH)
    assert fails('collectives = "bcast"\nnprocs = 2', "[mca]\nfixed = {btl = 1}\n",
                 catalog=MPICH).startswith("spec.toml: mca: mpich 4.2.0 has no MCA parameters")
    assert "'6' is not a bcast algorithm of mpich" in fails(
        'collectives = "bcast"\nnprocs = 2\nalgorithms = "6"', catalog=MPICH)


def test_unknown_algorithm_names_choices_and_suggests(real_catalog: Catalog) -> None:
    with pytest.raises(UserError) as e:
        make('collectives = "bcast"\nnprocs = 2\nalgorithms = {bcast = ["default", "binomal"]}',
             catalog=real_catalog)
    assert str(e.value) == (
        "spec.toml: measure.algorithms.bcast[1]: 'binomal' is not a bcast algorithm of openmpi "
        f"{real_catalog.version}; valid: default, "
        + ", ".join(f"{a.name} ({a.id})" for a in real_catalog.of("bcast"))
        + " (did you mean binomial?)")


def test_one_list_applies_to_every_collective() -> None:
    plan = make('collectives = ["bcast", "gather"]\nnprocs = 2\nalgorithms = [2]', SEQ)
    assert variants(plan.launches[0]) == [("bcast", "chain", 0, 0), ("gather", "binomial", 0, 0)]
    assert fails('collectives = ["bcast", "gather"]\nnprocs = 2\nalgorithms = ["chain"]'
                 ).startswith("spec.toml: measure.algorithms[0]: 'chain' is not a gather "
                              "algorithm of openmpi 5.0.11; valid: default, basic_linear (1), ")


def test_segment_size_needs_a_segmentable_algorithm() -> None:
    assert fails('collectives = "scatter"\nnprocs = 2\n'
                 'algorithms = {scatter = ["default", {name = "binomial", segsize = 1024}]}') == (
        "spec.toml: measure.algorithms.scatter[1].segsize: binomial takes no segment size or "
        "fanout (scatter in openmpi 5.0.11); valid: none")
    assert fails('collectives = "bcast"\nnprocs = 2\n'
                 'algorithms = [{name = "default", fanout = 2}]').startswith(
        "spec.toml: measure.algorithms[0].fanout: default takes no segment size or fanout "
        "(bcast in openmpi 5.0.11); valid: basic_linear, chain, pipeline")


def test_operations_without_algorithm_choice() -> None:
    plan = make('collectives = ["latency", "gatherv"]\nnprocs = 2\nsizes = "0:4"', SEQ)
    assert variants(plan.launches[0]) == [("latency", "default", 0, 0),
                                          ("gatherv", "default", 0, 0)]
    sizes = {c: [p.size_bytes for p in plan.launches[0].points if p.collective == c]
             for c in ("latency", "gatherv")}
    assert sizes == {"latency": [0, 1, 2, 4], "gatherv": [1, 2, 4]}  # 0 B only where it means
    assert fails('collectives = "latency"\nnprocs = 2\nalgorithms = ["binomial"]') == (
        "spec.toml: measure.algorithms[0]: openmpi 5.0.11 has no algorithm choice for latency; "
        "use 'default'")
    assert fails('collectives = "bcast"\nnprocs = 2\nsizes = 0') == (
        "spec.toml: measure.sizes: bcast needs sizes of at least 1 B; got 0")


def test_iterations_follow_osu_unless_set() -> None:
    points = make('collectives = ["bcast", "latency"]\nalgorithms = "default"\nnprocs = 2\n'
                  'sizes = [8192, 16384]').launches[0].points
    got = {(p.collective, p.size_bytes): (p.iterations, p.warmup) for p in points}
    assert got == {("bcast", 8192): (1000, 100), ("bcast", 16384): (100, 10),
                   ("latency", 8192): (10000, 100), ("latency", 16384): (1000, 10)}
    points = make('collectives = "bcast"\nalgorithms = "default"\nnprocs = 2\n'
                  'sizes = [8192, 16384]\niterations = {large = 7}\nwarmup = 3').launches[0].points
    assert [(p.iterations, p.warmup) for p in points] == [(1000, 3), (7, 3)]


def test_same_spec_and_seed_give_the_same_plan() -> None:
    body = 'collectives = ["bcast", "gather", "allgatherv"]\nnprocs = [2, 4]'
    a, b = make(body, "[run]\nseed = 42\nrepetitions = 2\n"), make(
        body, "[run]\nseed = 42\nrepetitions = 2\n")
    assert a == b and a.to_json() == b.to_json() and a.seed == 42
    c = make(body, "[run]\nseed = 43\nrepetitions = 2\n")
    assert [la.launch_id for la in a.launches] != [la.launch_id for la in c.launches]
    unseeded = make(body)
    again = make(body, f"[run]\nseed = {unseeded.seed}\n")
    assert unseeded == again


def test_random_order_shuffles_blocks_but_keeps_sizes_ascending() -> None:
    body = 'collectives = ["bcast", "gather", "allreduce"]\nnprocs = 2'
    ordered = make(body, SEQ).launches[0]
    shuffled = make(body, "[run]\nseed = 5\n").launches[0]
    assert sorted(variants(shuffled)) == sorted(variants(ordered))
    assert variants(shuffled) != variants(ordered)
    assert len(variants(shuffled)) == len(set(variants(shuffled)))  # blocks stay contiguous
    for la in (ordered, shuffled):
        for v in variants(la):
            sizes = [p.size_bytes for p in la.points if (p.collective, p.algorithm, p.segsize,
                                                         p.fanout) == v]
            assert sizes == sorted(sizes) and len(sizes) == 21
    # sequential: the spec's order of collectives and algorithms
    assert [v[0] for v in variants(ordered)] == ["bcast"] * 10 + ["gather"] * 4 + ["allreduce"] * 7


def test_launch_ids_are_unique_indexed_and_content_hashed() -> None:
    plan = make('collectives = ["bcast", "allgatherv"]\nnprocs = [2, 4]',
                "[run]\nrepetitions = 3\n")
    ids = [la.launch_id for la in plan.launches]
    assert len(set(ids)) == len(ids)
    for i, la in enumerate(plan.launches):
        assert re.fullmatch(rf"{i:04d}-[0-9a-f]{{8}}", la.launch_id)
        content = {k: v for k, v in la.to_json().items() if k != "launch_id"}
        digest = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":"))
                                .encode()).hexdigest()
        assert la.launch_id.endswith(digest[:8])


def test_plan_json_round_trip() -> None:
    plan = make('collectives = ["bcast", "allgatherv"]\nnprocs = [2, 4]\nsamples = true',
                '[mca]\nfixed = {btl = "self,sm"}\n[mca.sweep]\nbtl_x = [1, 2]\n', catalog=OMPI)
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    mp = make('collectives = "bcast"\nnprocs = 2', catalog=MPICH)
    assert Plan.from_json(json.loads(json.dumps(mp.to_json()))) == mp
    with pytest.raises(UserError, match="malformed plan"):
        Plan.from_json({**plan.to_json(), "launches": [{"nprocs": 2}]})
    with pytest.raises(UserError, match="plan format 99 is not supported"):
        Plan.from_json({**plan.to_json(), "format": 99})


def test_oversubscribe_and_launch_settings() -> None:
    body = 'collectives = "bcast"\nalgorithms = "default"\nnprocs = [2, 4]\nvalidate = true'
    plan = make(body, "[run]\ntimeout = 30\n", cores=2)
    assert {la.nprocs: la.oversubscribe for la in plan.launches} == {2: False, 4: True}
    assert all((la.timeout_s, la.validate, la.samples) == (30.0, True, False)
               for la in plan.launches)
    plan = make(body, "[run]\noversubscribe = true\n", cores=2)
    assert all(la.oversubscribe for la in plan.launches)
    assert all(la.binding == "core" for la in plan.launches)  # the backend adds modifiers


def test_mca_pairs_merge_fixed_swept_and_forcing() -> None:
    plan = make('collectives = "allgatherv"\nalgorithms = "ring"\nnprocs = 2',
                '[mca]\nfixed = {btl = "self,sm", coll_tuned_use_dynamic_rules = true}\n'
                "[mca.sweep]\nbtl_x = [7]\n")
    (la,) = plan.launches
    assert la.mca == (("btl", "self,sm"), ("btl_x", "7"), ("coll_tuned_allgatherv_algorithm", "3"),
                      ("coll_tuned_use_dynamic_rules", "1"))
    assert la.swept == (("btl_x", "7"),)
    assert fails('collectives = "allgatherv"\nalgorithms = "ring"\nnprocs = 2',
                 "[mca]\nfixed = {coll_tuned_allgatherv_algorithm = 1}\n") == (
        "spec.toml: mca.fixed.coll_tuned_allgatherv_algorithm: '1' conflicts with the algorithm "
        "forcing (coll_tuned_allgatherv_algorithm = 3); leave it to run.selection")


def test_job_lines() -> None:
    point = Point("bcast", "chain", 2, 8192, 4, 65536, 100, 10)
    la = make('collectives = "bcast"\nalgorithms = "default"\nnprocs = 2\nsizes = 1').launches[0]
    assert replace(la, points=(point,)).job_lines() == ["bcast 2 8192 4 65536 100 10"]
    assert la.job_lines() == ["bcast 0 0 0 1 1000 100"]


def test_estimate_is_a_rough_positive_model() -> None:
    body = 'collectives = ["bcast", "gather"]\nalgorithms = "default"\nnprocs = [2, 4]'
    plan = make(body, cores=64)
    assert plan.estimate_seconds(startup_s=0) > 0
    assert plan.estimate_seconds() == pytest.approx(plan.estimate_seconds(0)
                                                    + 2 * estimate.STARTUP_S)
    launches = sum(la.estimate_seconds(0) for la in plan.launches)
    assert plan.estimate_seconds(0) == pytest.approx(estimate.campaign_seconds() + launches)
    over = make(body, cores=1)
    assert over.estimate_seconds(0) - estimate.campaign_seconds() == pytest.approx(
        estimate.OVERSUBSCRIBED_SLOWDOWN * launches)
    fewer = make(body + "\niterations = 10\nwarmup = 1", cores=64)
    assert fewer.estimate_seconds(0) < plan.estimate_seconds(0)
    la = plan.launches[0]
    assert sum(la.point_seconds()) == pytest.approx(la.estimate_seconds(0))


def test_simulated_estimate_counts_ranks_messages_and_segments() -> None:
    """Under SimGrid the wall time is the simulator's: start-up grows with the square of
    the ranks, and each iteration costs its messages (a pipeline's segments count)."""
    small, large = (Point("bcast", "default", 0, 0, 0, size, 10, 1) for size in (8, 1 << 20))
    assert estimate.messages(large, 16) > estimate.messages(small, 16)
    alltoall = replace(small, collective="alltoall")
    assert estimate.messages(alltoall, 16) > estimate.messages(small, 16)
    la = make('collectives = "bcast"\nalgorithms = "default"\nnprocs = 2\nsizes = 1',
              cores=64).launches[0]
    few, many = (replace(la, nprocs=n, points=(small,)) for n in (16, 256))
    # 16 times the ranks, more than 16 times the time: start-up grows with their square
    assert many.estimate_seconds(simulated=True) > 16 * few.estimate_seconds(simulated=True)
    assert few.estimate_seconds(simulated=True) != few.estimate_seconds()


def test_quickstart_is_quick(real_catalog: Catalog) -> None:
    path = ROOT / "examples" / "quickstart.toml"
    plan = make_plan(load_spec(path), real_catalog, str(path), cores=2)
    assert {la.selection for la in plan.launches} == {"mpit"}
    assert len(plan.launches) == 2 * 6  # two process counts, six repetitions
    assert {p.collective for p in plan.launches[0].points} == {"bcast", "gather", "scatter",
                                                                "allreduce"}
    assert plan.estimate_seconds() < 180  # "a few minutes" on this 2-core machine


def test_documented_example_plans() -> None:
    doc = (ROOT / "docs" / "spec.md").read_text()
    example = re.search(r"```toml\n(.*?)```", doc, re.S)
    assert example
    plan = make_plan(parse_spec(example.group(1), "spec.md"), OMPI, "spec.md", cores=64)
    assert {la.nprocs: la.mapping for la in plan.launches} == {4: "core", 8: "socket"}
    assert not any(p.algorithm == "pipeline" and p.size_bytes > 2**18
                   for la in plan.launches for p in la.points)


def test_algorithm_table_may_name_collectives_not_measured() -> None:
    plan = make('collectives = "bcast"\nnprocs = 2\n'
                'algorithms = {bcast = "binomial", allgatherv = "ring"}')
    assert {p.collective for la in plan.launches for p in la.points} == {"bcast"}
