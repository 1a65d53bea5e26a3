"""Non-blocking collectives as a user capability (issue 13), without MPI: the spec's
`measure.nonblocking`, the plan's job lines, forcing and estimates, the rows' metrics, and
show / compare / export / report on rows from the fake backend and from OSU ingest."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from collbench.analyse.compare import compare
from collbench.catalog import mpich, openmpi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.collectives import COLLECTIVES, NONBLOCKING
from collbench.catalog.forcing import is_forcing_mca
from collbench.cli import main
from collbench.errors import UserError
from collbench.launch.base import LaunchOutcome
from collbench.plan import Launch, Point, make_plan
from collbench.runner import RowContext, build_rows, with_metrics
from collbench.spec import Spec, parse_spec, spec_from_dict
from collbench.store import Store

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = Path("/work/shared/samples/osu-7.4/osu_iallgather_np2.txt")
OMPI = Catalog("openmpi", "5.0.11", "test", {**openmpi.fallback(), **openmpi.libnbc_fallback()})
MPICH = Catalog("mpich", "4.2.0", "test", mpich.table())

BASE = """\
[campaign]
name = "nb"
[measure]
collectives = {colls}
sizes = ["1K", "64K"]
nprocs = 2
iterations = 10
{extra}
[run]
order = "sequential"
seed = 3
{run}
"""


def spec_text(colls: str = '["iallgather", "ibcast"]', extra: str = "", run: str = "") -> str:
    return BASE.format(colls=colls, extra=extra, run=run)


# --- catalog ------------------------------------------------------------------------------
def test_catalog_has_the_14_osu_nonblocking_collectives() -> None:
    assert len(NONBLOCKING) == 14
    assert NONBLOCKING[0] == "ibarrier" and NONBLOCKING[-1] == "ireduce_scatter_block"
    ibcast = COLLECTIVES["ibcast"]
    assert ibcast.blocking == "bcast" and ibcast.ompi_rules_id is None
    assert ibcast.mpich_cvar == "MPIR_CVAR_IBCAST_INTRA_ALGORITHM"
    assert COLLECTIVES["ialltoallv"].rules_bytes is COLLECTIVES["alltoallv"].rules_bytes
    assert not COLLECTIVES["bcast"].nonblocking


def test_libnbc_algorithms_from_ompi_info_and_fallback() -> None:
    text = "\n".join([
        "mca:coll:libnbc:param:coll_libnbc_ibcast_algorithm:status:writeable",
        "mca:coll:libnbc:param:coll_libnbc_ibcast_algorithm:enumerator:value:0:ignore",
        "mca:coll:libnbc:param:coll_libnbc_ibcast_algorithm:enumerator:value:2:binomial",
        "mca:coll:libnbc:param:coll_libnbc_iexscan_algorithm:enumerator:value:1:linear",
        "mca:coll:libnbc:param:coll_libnbc_ireduce_algorithm:status:read-only",
        "mca:coll:libnbc:param:coll_libnbc_ireduce_algorithm:enumerator:value:1:chain",
    ])
    algs = openmpi.parse_libnbc(text)
    assert set(algs) == {"ibcast", "ireduce"}  # iexscan: not measured
    assert [(a.name, a.id, a.runtime_switchable) for a in algs["ibcast"]] == [
        ("binomial", 2, True)]
    assert not algs["ireduce"][0].runtime_switchable
    fb = openmpi.libnbc_fallback()
    assert [a.name for a in fb["iallreduce"]] == ["ring", "binomial", "rabenseifner",
                                                   "recursive_doubling"]
    assert is_forcing_mca("coll_libnbc_ibcast_algorithm")
    assert not is_forcing_mca("coll_libnbc_ibcast_knomial_radix")


# --- spec: one-line errors ----------------------------------------------------------------
@pytest.mark.parametrize(("colls", "extra", "message"), [
    ('["bcast"]', "nonblocking = { test_calls = 25 }",
     "spec.toml: measure.nonblocking: only blocking collectives are measured (bcast)"),
    ('["ibcast"]', "nonblocking = { test_calls = [0, -1] }",
     "spec.toml: measure.nonblocking.test_calls[1]: -1 MPI_Test calls: must not be negative"),
    ('["ibcast"]', "nonblocking = { test_calls = 1000001 }",
     "spec.toml: measure.nonblocking.test_calls: 1000001 MPI_Test calls is too many"),
    ('["ibcast"]', "nonblocking = { compute = [1, 0] }",
     "spec.toml: measure.nonblocking.compute[1]: compute factor 0 must be greater than 0"),
    ('["ibcast"]', 'nonblocking = { compute = "-2x" }',
     "spec.toml: measure.nonblocking.compute: compute '-2x' must not be negative"),
    ('["ibcast"]', 'nonblocking = { compute = "20000000us" }',
     "spec.toml: measure.nonblocking.compute: compute '20000000us' is too long"),
    ('["ibcast"]', 'nonblocking = { compute = "soon" }',
     "spec.toml: measure.nonblocking.compute: compute 'soon' is not valid"),
    ('["ibcast"]', "nonblocking = { hide = 101 }",
     "spec.toml: measure.nonblocking.hide: expected false, true (10 steps)"),
    ('["ibcast"]', "nonblocking = { test = 1 }",
     "spec.toml: measure.nonblocking.test: unknown key 'test'"),
])
def test_bad_nonblocking_settings_are_one_line(colls: str, extra: str, message: str) -> None:
    with pytest.raises(UserError) as e:
        parse_spec(spec_text(colls, extra), "spec.toml")
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_nonblocking_settings_normalise_and_round_trip() -> None:
    spec = parse_spec(spec_text(extra='nonblocking = { test_calls = [0, 25], compute = '
                                      '["auto", 2, "0.5x", "50us"], hide = true }'), "s")
    nb = spec.measure.nonblocking
    assert nb is not None
    assert nb.compute == ["auto", "2x", "0.5x", "50us"] and nb.hide == 10
    again = json.loads(spec.model_dump_json(by_alias=True))
    assert parse_spec_dict(again).measure.nonblocking == nb


def parse_spec_dict(data: dict[str, object]) -> Spec:
    return spec_from_dict(data, "dump")


# --- plan ---------------------------------------------------------------------------------
def test_plan_writes_the_kernel_options_one_block_per_setting() -> None:
    spec = parse_spec(spec_text('["ibcast", "bcast"]', 'algorithms = "default"\n'
                                'nonblocking = { test_calls = [0, 25], compute = ["auto", 2], '
                                'hide = 3 }'), "s")
    plan = make_plan(spec, OMPI)
    (launch,) = plan.launches
    lines = launch.job_lines()
    assert "ibcast 0 0 0 1024 10 100 test_calls=25 compute=2x hide_steps=3" in lines
    assert "bcast 0 0 0 1024 10 100" in lines  # blocking lines keep 7 fields
    nb = [p for p in launch.points if p.collective == "ibcast"]
    assert {(p.test_calls, p.compute) for p in nb} == {(0, "auto"), (0, "2x"), (25, "auto"),
                                                      (25, "2x")}
    # sizes ascend inside each setting's block
    for t, c in {(p.test_calls, p.compute) for p in nb}:
        sizes = [p.size_bytes for p in nb if (p.test_calls, p.compute) == (t, c)]
        assert sizes == sorted(sizes) == [1024, 65536]
    stored = plan.to_json()["launches"][0]["points"]
    assert "test_calls" not in next(p for p in stored if p["collective"] == "bcast")
    assert Launch.from_json(plan.to_json()["launches"][0]) == launch


def test_estimate_counts_the_overlapped_runs() -> None:
    blocking = Point("bcast", "default", 0, 0, 0, 65536, 100, 10)
    nb = Point("ibcast", "default", 0, 0, 0, 65536, 100, 10, 0, "auto", 0)
    swept = Point("ibcast", "default", 0, 0, 0, 65536, 100, 10, 0, "auto", 4)
    comm = blocking.modelled_seconds(2)
    assert blocking.work_seconds(2) == pytest.approx(110 * comm)
    assert nb.work_seconds(2) == pytest.approx(110 * 3 * comm)  # pure + overall (pure + cpu)
    # 4 more overlapped loops, compute k/4 of the pure time: (2 + 4) + 1 + 2.5
    assert swept.work_seconds(2) == pytest.approx(110 * 9.5 * comm)
    fixed = Point("ibcast", "default", 0, 0, 0, 65536, 100, 10, 0, "1000us", 0)
    assert fixed.work_seconds(2) == pytest.approx(110 * (2 * comm + 1e-3))


def test_libnbc_forcing_at_launch_and_through_mpit() -> None:
    extra = 'algorithms = { ibcast = ["default", "binomial"], iallgather = "all" }'
    by_launch = make_plan(parse_spec(spec_text(extra=extra, run='selection = "launch"'), "s"),
                          OMPI)
    forced = {la.mca for la in by_launch.launches if la.selection == "launch"}
    assert forced == {(("coll_libnbc_iallgather_algorithm", "1"),),
                      (("coll_libnbc_iallgather_algorithm", "2"),),
                      (("coll_libnbc_ibcast_algorithm", "2"),)}
    (mpit,) = make_plan(parse_spec(spec_text(extra=extra), "s"), OMPI).launches
    assert mpit.selection == "mpit"
    assert {(p.collective, p.algorithm_id) for p in mpit.points} == {
        ("ibcast", 0), ("ibcast", 2), ("iallgather", 0), ("iallgather", 1), ("iallgather", 2)}
    # the user's own --mca forcing is recorded as the algorithm that runs
    user = spec_text('["ibcast"]', run="", extra='algorithms = "default"') + \
        '[mca]\nfixed = { coll_libnbc_ibcast_algorithm = 4 }\n'
    (la,) = make_plan(parse_spec(user, "s"), OMPI).launches
    assert {p.algorithm for p in la.points} == {"knomial"} and la.selection == "launch"


def test_mpich_forces_nonblocking_algorithms_with_their_cvars() -> None:
    extra = 'algorithms = { ibcast = ["default", "tsp_ring"] }'
    plan = make_plan(parse_spec(spec_text('["ibcast"]', extra), "s"), MPICH)
    envs = [dict(la.env) for la in plan.launches if la.selection == "launch"]
    assert envs and envs[0]["MPIR_CVAR_IBCAST_INTRA_ALGORITHM"] == "tsp_ring"
    with pytest.raises(UserError, match="not an ibcast algorithm of mpich"):
        make_plan(parse_spec(spec_text('["ibcast"]', 'algorithms = { ibcast = "ring" }'), "s"),
                  MPICH)


# --- rows ---------------------------------------------------------------------------------
def test_metrics_are_merged_never_overwriting_other_keys() -> None:
    assert with_metrics(None, {}) is None
    merged = json.loads(with_metrics('{"implementation": "smpi", "test_calls": 9}',
                                     {"test_calls": 1, "overall_us": 2.0}) or "")
    assert merged == {"implementation": "smpi", "test_calls": 9, "overall_us": 2.0}
    point = Point("ibcast", "default", 0, 0, 0, 8, 10, 1, 25, "auto", 0)
    launch = Launch("0000-x", 0, 2, "core", "core", False, (), (), (), "none", (point,), 60.0,
                    False, False)
    rows = build_rows(launch, [], LaunchOutcome("failed", [], 1, 0.1, "boom", []),
                      RowContext("c", "local", "openmpi", "5"), 1)
    assert rows[0]["status"] == "failed"
    assert json.loads(rows[0]["metrics"]) == {"test_calls": 25, "compute": "auto"}


# --- a campaign on the fake backend: show, compare, export, report --------------------------
@pytest.fixture(scope="module")
def fake_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("nb")
    spec = tmp / "spec.toml"
    spec.write_text(spec_text('["iallgather", "ibcast", "bcast"]',
                              'algorithms = { ibcast = ["default", "binomial"] }\n'
                              "nonblocking = { test_calls = [0, 25], hide = 2 }",
                              run='backend = "fake"\nrepetitions = 3'))
    out = tmp / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    return out


def test_rows_hold_the_overlap_figures_and_settings(fake_results: Path) -> None:
    con = Store(fake_results).connect()
    rows = con.execute("SELECT collective, avg_us, metrics FROM measurements "
                       "WHERE collective LIKE 'i%'").fetchall()
    assert len(rows) == 3 * 2 * 2 * (1 + 2)  # reps x sizes x test_calls x (iallgather + 2)
    for _coll, avg, metrics in rows:
        m = json.loads(metrics)
        assert m["test_calls"] in (0, 25) and m["compute"] == "auto" and m["hide_steps"] == 2
        assert m["pure_us"] == avg and m["overall_us"] >= m["compute_us"]
        assert 0 <= m["overlap_pct"] <= 100 and "max_hidden_us" in m


def test_compare_overlap_is_a_difference_grouped_by_test_calls(fake_results: Path) -> None:
    c = compare(Store(fake_results), stat="overlap_pct", collective="ibcast")
    assert c.stat == "overlap_pct" and c.effect == "difference"
    settings = {json.loads(p.params or "{}")["nonblocking"]["test_calls"] for p in c.points}
    assert settings == {0, 25}
    some = [p for p in c.points if '"test_calls": 25' in (p.params or "")]
    none = [p for p in c.points if '"test_calls": 0' in (p.params or "")]
    assert max(p.value for p in some) > 0 and max(p.value for p in none) == 0
    for r in c.ratios:  # value - baseline, in percentage points
        assert r.ratio == pytest.approx(r.point.value - r.baseline.value)
    overall = compare(Store(fake_results), stat="overall", collective="ibcast")
    assert overall.stat == "overall_us" and overall.effect == "ratio"
    with pytest.raises(UserError, match="a non-blocking figure"):
        compare(Store(fake_results), stat="pure", collective="bcast")


def test_cli_show_compare_export_report(fake_results: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", str(fake_results), "--stat", "overlap_pct"]) == 0
    out = capsys.readouterr().out
    assert "diff = median_overlap_pct - default's in percentage points" in out
    assert '"test_calls": 25' in out
    assert main(["show", str(fake_results), "--collective", "ibcast", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["test_calls"] for r in table} == {"0", "25"}
    assert all(r["median_overlap_pct"] != "" for r in table)
    assert len(table) == 2 * 2 * 2  # algorithms x test_calls x sizes: not pooled over tests
    export = tmp_path / "rows.csv"
    assert main(["export", str(fake_results), "-o", str(export), "--expand-metrics"]) == 0
    rows = list(csv.DictReader(export.open()))
    assert {r["metric_test_calls"] for r in rows if r["collective"] == "ibcast"} == {"0.0",
                                                                                     "25.0"}
    report = tmp_path / "report"
    assert main(["report", str(fake_results), "-o", str(report)]) == 0
    figs = sorted(p.name for p in (report / "figures").glob("nb-*"))
    assert any(n.endswith("_overlap.png") for n in figs)
    assert any(n.endswith("_overall.png") for n in figs)
    assert "Non-blocking collectives: overlap" in (report / "index.html").read_text()


def test_example_spec_runs_on_the_fake_backend(tmp_path: Path) -> None:
    text = (ROOT / "examples" / "nonblocking.toml").read_text()
    spec = tmp_path / "nonblocking.toml"
    spec.write_text(text.replace("[run]\n", '[run]\nbackend = "fake"\n'))
    assert main(["run", str(spec), "-o", str(tmp_path / "res")]) == 0
    n = Store(tmp_path / "res").connect().execute(
        "SELECT count(*) FROM measurements WHERE status = 'ok' AND "
        "metrics LIKE '%overlap_pct%'").fetchone()
    assert n is not None and n[0] == 3 * 3 * 2 * (3 + 2)  # reps, sizes, tests, algorithms


# --- ingest -------------------------------------------------------------------------------
needs_sample = pytest.mark.skipif(not SAMPLE.exists(), reason=f"{SAMPLE} not found")


def _ingested(out: Path) -> set[object]:
    con = Store(out).connect()
    return {json.loads(m).get("test_calls") for (m,) in con.execute(
        "SELECT metrics FROM measurements").fetchall()}


@needs_sample
def test_ingest_keeps_test_calls_from_the_recorded_command(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    text = SAMPLE.read_text().replace("osu_iallgather -f", "osu_iallgather -t 25 -i 200 -x 20 -f")
    f = tmp_path / "osu_iallgather_t25.txt"
    f.write_text(text)
    assert main(["ingest", str(f), "--nprocs", "2", "-o", str(tmp_path / "a")]) == 0
    assert _ingested(tmp_path / "a") == {25}
    con = Store(tmp_path / "a").connect()
    assert con.execute("SELECT DISTINCT iterations, warmup FROM measurements").fetchall() == [
        (200, 20)]
    # the sample's own command has no -t: OSU's default, 0 MPI_Test calls
    assert main(["ingest", str(SAMPLE), "--nprocs", "2", "-o", str(tmp_path / "b")]) == 0
    assert _ingested(tmp_path / "b") == {0}
    capsys.readouterr()
    assert main(["ingest", str(f), "--nprocs", "2", "-o", str(tmp_path / "c"), "--param",
                 "test_calls=3"]) == 2
    assert "contradicts the recorded command (test_calls = 25" in capsys.readouterr().err
    # compare and show see the ingested overlap
    assert main(["compare", str(tmp_path / "a"), "--stat", "overlap_pct"]) == 0
    assert '"test_calls": 25' in capsys.readouterr().out


@needs_sample
def test_ingest_param_sets_test_calls_when_no_command(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bare.txt"
    f.write_text("".join(ln for ln in SAMPLE.read_text().splitlines(keepends=True)
                         if not ln.startswith("###")))
    assert main(["ingest", str(f), "--nprocs", "2", "-o", str(tmp_path / "a")]) == 0
    assert _ingested(tmp_path / "a") == {None}  # unknown, not guessed
    assert main(["ingest", str(f), "--nprocs", "2", "-o", str(tmp_path / "b"), "--param",
                 "test_calls=25"]) == 0
    assert _ingested(tmp_path / "b") == {25}
    capsys.readouterr()
    for bad, why in (("test_calls=-1", "expected KEY=NUMBER"), ("tests=1", "'tests'"),
                     ("test_calls=2000000", "out of range")):
        assert main(["ingest", str(f), "--nprocs", "2", "-o", str(tmp_path / "c"),
                     "--param", bad]) == 2
        err = capsys.readouterr().err
        assert why in err and err.count("\n") == 1, err
    blocking = tmp_path / "bcast.txt"
    shutil.copy(SAMPLE.parent / "osu_bcast_np2.txt", blocking)
    assert main(["ingest", str(blocking), "--nprocs", "2", "-o", str(tmp_path / "d"),
                 "--param", "test_calls=1"]) == 2
    assert "test_calls is for non-blocking OSU benchmarks" in capsys.readouterr().err


def test_plan_lists_each_launch_non_blocking_settings(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert main(["plan", str(ROOT / "examples" / "nonblocking.toml")]) == 0
    launches = [ln for ln in capsys.readouterr().out.splitlines() if " np=" in ln]
    assert launches and all("test_calls=0,25 compute=auto" in ln for ln in launches)
