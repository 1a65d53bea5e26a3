"""[measure] mpi: the MPI as a plan dimension (spec, plan, rows), without running an MPI."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from collbench.campaign import Request, SpecSource, prepare
from collbench.catalog import mpich, openmpi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError
from collbench.launch.base import LaunchOutcome
from collbench.plan import Plan, make_plan
from collbench.plan.model import PLAN_FORMAT
from collbench.records import make_row, mpi_implementation, mpi_key
from collbench.runner import RowContext, build_rows
from collbench.spec import parse_spec
from collbench.store import Store
from tests.backend_support import private_mpi

OMPI = Catalog("openmpi", "5.0.11", "built-in", openmpi.fallback())
MPICH = Catalog("mpich", "5.0.2", "built-in", mpich.table())
CATALOGS = {"openmpi-5.0.11": OMPI, "mpich-5.0.2": MPICH}


def spec(measure: str = "", extra: str = "") -> str:
    return f"""\
[campaign]
name = "multi"
[measure]
collectives = ["bcast"]
sizes = [8, 1024]
nprocs = [2, 4]
mpi = ["openmpi==5.0.11", "mpich==5.0.2"]
{measure}
[run]
seed = 3
{extra}"""


def plan_of(text: str, catalogs: dict[str, Catalog] | None = None) -> Plan:
    return make_plan(parse_spec(text, "m.toml"), OMPI, "m.toml", cores=64,
                     catalogs=CATALOGS if catalogs is None else catalogs)


def test_spec_takes_one_mpi_or_a_list_and_refuses_bad_entries() -> None:
    one = parse_spec(spec().replace('["openmpi==5.0.11", "mpich==5.0.2"]',
                                    '"openmpi==4.1.8"'), "m.toml")
    assert one.measure.mpi == ["openmpi==4.1.8"]
    assert parse_spec(spec().replace("mpi = [", "#"), "m.toml").measure.mpi is None
    with pytest.raises(UserError, match=r"m.toml: measure.mpi.*listed twice"):
        parse_spec(spec().replace('"mpich==5.0.2"', '"openmpi==5.0.11"'), "m.toml")
    with pytest.raises(UserError, match=r"measure.mpi.*one line"):
        parse_spec(spec().replace('"mpich==5.0.2"', '"mpich==5.0.2\\nrm -rf /"'), "m.toml")


def test_every_mpi_gets_its_own_launches_algorithms_and_forcing() -> None:
    plan = plan_of(spec('algorithms = "all"'))
    by_mpi: dict[str | None, list[str]] = {}
    for la in plan.launches:
        by_mpi.setdefault(la.mpi, []).extend(p.algorithm for p in la.points)
    assert set(by_mpi) == {"openmpi-5.0.11", "mpich-5.0.2"}
    assert "split_binary_tree" in by_mpi["openmpi-5.0.11"]
    assert "split_binary_tree" not in by_mpi["mpich-5.0.2"]
    assert "scatter_ring_allgather" in by_mpi["mpich-5.0.2"]
    for la in plan.launches:  # MPICH forces by environment, Open MPI by MCA / MPI_T
        if la.mpi == "mpich-5.0.2":
            assert not la.mca and la.selection in ("launch", "none")
        else:
            assert not any(k.startswith("MPIR_CVAR") for k, _ in la.env)
    assert len({la.launch_id for la in plan.launches}) == len(plan.launches)
    # both process counts for both MPIs
    assert {(la.mpi, la.nprocs) for la in plan.launches} == {
        (k, n) for k in CATALOGS for n in (2, 4)}


def test_named_algorithm_missing_in_one_mpi_is_an_error_naming_it() -> None:
    text = spec('algorithms = ["default", "split_binary_tree"]')
    with pytest.raises(UserError) as e:
        plan_of(text)
    msg = str(e.value)
    assert "split_binary_tree" in msg and "mpich-5.0.2" in msg and "\n" not in msg


def test_excluding_it_for_that_mpi_plans_it_for_the_others_only() -> None:
    text = spec('algorithms = ["default", "split_binary_tree"]').replace(
        "[campaign]", 'exclude = [{mpi = "mpich-5.0.2", algorithm = "split_binary_tree"}]\n'
                      "[campaign]")
    plan = plan_of(text)
    algs = {(la.mpi, p.algorithm) for la in plan.launches for p in la.points}
    assert ("openmpi-5.0.11", "split_binary_tree") in algs
    assert ("mpich-5.0.2", "default") in algs
    assert not any(m == "mpich-5.0.2" and a != "default" for m, a in algs)


def test_exclude_mpi_names_a_measured_mpi() -> None:
    text = spec().replace("[campaign]", 'exclude = [{mpi = "mpich-4.3.0"}]\n[campaign]')
    with pytest.raises(UserError, match=r"exclude\[0\]\.mpi: 'mpich-4.3.0' is not measured; "
                                        r"valid: openmpi-5.0.11, mpich-5.0.2"):
        plan_of(text)
    single = parse_spec(text.replace("mpi = [", "#"), "m.toml")
    with pytest.raises(UserError, match=r"exclude\[0\]\.mpi: needs \[measure\] mpi"):
        make_plan(single, OMPI, "m.toml", cores=64)


def test_exclude_mpi_drops_that_mpis_points() -> None:
    text = spec().replace("[campaign]", 'exclude = [{mpi = "mpich-5.0.2", nprocs = 4}]\n'
                                        "[campaign]")
    pairs = {(la.mpi, la.nprocs) for la in plan_of(text).launches}
    assert ("mpich-5.0.2", 4) not in pairs and ("openmpi-5.0.11", 4) in pairs


def test_plan_json_keeps_the_mpi_and_reads_format_1() -> None:
    plan = plan_of(spec())
    data = json.loads(json.dumps(plan.to_json()))
    assert data["format"] == PLAN_FORMAT == 3
    again = Plan.from_json(data)
    assert [la.mpi for la in again.launches] == [la.mpi for la in plan.launches]
    old = {**data, "format": 1, "launches": [
        {k: v for k, v in la.items() if k != "mpi"} for la in data["launches"]]}
    assert all(la.mpi is None for la in Plan.from_json(old).launches)


def test_without_measure_mpi_launches_carry_no_mpi() -> None:
    one = parse_spec(spec().replace("mpi = [", "#"), "m.toml")
    plan = make_plan(one, OMPI, "m.toml", cores=64)
    assert all(la.mpi is None for la in plan.launches)
    assert all("mpi" not in la.to_json() for la in plan.launches)


def test_rows_carry_their_launchs_mpi_key_and_version() -> None:
    plan = plan_of(spec())
    ctx = RowContext("multi", "local", "openmpi-5.0.11", "5.0.11",
                     {"openmpi-5.0.11": ("openmpi-5.0.11", "5.0.11"),
                      "mpich-5.0.2": ("mpich-5.0.2", "5.0.2")})
    outcome = LaunchOutcome("failed", [], 1, 0.1)
    for la in plan.launches:
        assert la.mpi is not None
        rows = build_rows(la, [], outcome, ctx, 1)
        assert {(r["mpi"], r["mpi_version"]) for r in rows} == {
            (la.mpi, la.mpi.split("-", 1)[1])}


def test_mpi_key_and_implementation_read_both_formats() -> None:
    assert mpi_key("openmpi", "4.1.8") == "openmpi-4.1.8"
    assert mpi_implementation("openmpi-4.1.8") == "openmpi"
    assert mpi_implementation("openmpi") == "openmpi"  # a format 1 row
    assert mpi_implementation("mpich-5.0.2") == "mpich"


def test_format_1_folders_are_still_read(tmp_path: Path) -> None:
    """Rows of format 1 (mpi = the implementation alone) are read, as written."""
    store = Store(tmp_path / "old")
    store.create({"name": "old", "seed": 1}, "[campaign]\nname='old'\n", {"launches": []},
                 {"host": "h"})
    meta = json.loads(store.meta_path.read_text())
    store.meta_path.write_text(json.dumps({**meta, "format_version": 1}))
    store.write_launch("0000-aaaaaaaa", [make_row(
        campaign="old", launch_id="0000-aaaaaaaa", mpi="openmpi", mpi_version="5.0.3",
        collective="bcast", algorithm="default", size_bytes=8, avg_us=1.0, status="ok",
        nprocs=2)], {"status": "ok"})
    assert Store(store.root).campaign()["format_version"] == 1
    con = Store(store.root).connect()
    assert con.execute("SELECT mpi, mpi_version FROM measurements").fetchall() == [
        ("openmpi", "5.0.3")]
    meta["format_version"] = 99
    store.meta_path.write_text(json.dumps(meta))
    with pytest.raises(UserError, match="format_version 99 is not supported; valid: 1, 2"):
        Store(store.root).campaign()


def test_a_store_of_one_mpi_reads_only_its_rows(tmp_path: Path) -> None:
    store = Store(tmp_path / "two")
    store.create({"name": "two", "seed": 1}, "[campaign]\nname='two'\n", {"launches": []},
                 {"host": "h"})
    for i, key in enumerate(["openmpi-4.1.8", "openmpi-5.0.11"]):
        lid = f"000{i}-aaaaaaaa"
        store.write_launch(lid, [make_row(
            campaign="two", launch_id=lid, mpi=key, mpi_version=key.split("-")[1],
            collective="bcast", algorithm="default", size_bytes=8, avg_us=1.0 + i,
            status="ok", nprocs=2)], {"status": "ok"})
    con = Store(store.root, only_mpi="openmpi-4.1.8").connect()
    assert con.execute("SELECT mpi, avg_us FROM measurements").fetchall() == [
        ("openmpi-4.1.8", 1.0)]
    assert len(Store(store.root).connect().execute(
        "SELECT * FROM measurements").fetchall()) == 2


EMBEDDED = Path(sys.executable).parent.parent  # the venv holding the openmpi wheel


@pytest.mark.skipif(shutil.which("smpirun") is None, reason="SimGrid is not installed")
def test_simgrid_refuses_measure_mpi(tmp_path: Path) -> None:
    text = spec().replace('["openmpi==5.0.11", "mpich==5.0.2"]', json.dumps([str(EMBEDDED)]))
    text = text.replace("[run]", '[run]\nbackend = "simgrid"')
    source = SpecSource.from_text(text, "m.toml")
    with pytest.raises(UserError, match=r"m.toml: measure.mpi: the simgrid backend simulates "
                                        r"MPI .*run.simgrid.ompi_version"):
        prepare(source, find_mpi(), Request(tmp_path / "r"))


@pytest.mark.mpi
def test_a_batch_backend_runs_one_mpi_per_campaign(tmp_path: Path) -> None:
    ompi41 = private_mpi("openmpi")
    text = spec().replace('["openmpi==5.0.11", "mpich==5.0.2"]',
                          json.dumps([str(ompi41), str(EMBEDDED)]))
    text = text.replace("[run]", '[run]\nbackend = "slurm"')
    with pytest.raises(UserError, match=r"m.toml: measure.mpi: backend 'slurm' runs one MPI "
                                        r"per campaign \(2 listed: openmpi-4.1.8, openmpi-5"):
        prepare(SpecSource.from_text(text, "m.toml"), find_mpi(), Request(tmp_path / "r"))
