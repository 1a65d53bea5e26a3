"""`show`: the same value under the same name as `compare`; `--best` is compare itself."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from collbench.analyse import compare
from collbench.analyse.show import best, show
from collbench.cli import main
from collbench.store import Store
from tests.tune.fakedata import write_store


def _timing(coll: str, alg: str, size: int, nprocs: int) -> float:
    # binomial wins at np=2 by 40 %, and is 3 % slower (not credibly) at np=4
    factor = {"default": 1.0, "binomial": 0.6 if nprocs == 2 else 1.03}[alg]
    return (10.0 + size / 100) * factor


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return write_store(tmp_path_factory.mktemp("show") / "res", mpi="openmpi",
                       version="5.0.11", collectives=["bcast", "reduce"],
                       algorithms=[("default", 0), ("binomial", 6)], sizes=[1, 1024, 65536],
                       nprocs=[2, 4], repetitions=5, timing=_timing, noise=0.05)


def test_show_and_compare_print_one_value_under_one_name(store: Store) -> None:
    rows = list(csv.DictReader(io.StringIO(show(store, "csv"))))
    by_point = {(r["collective"], int(r["nprocs"]), r["algorithm"], int(r["size_bytes"])):
                float(r["median_avg_us"]) for r in rows}
    c = compare(store)
    assert len(c.points) == len(by_point) == 2 * 2 * 2 * 3
    for p in c.points:
        assert by_point[(p.collective, p.nprocs, p.label, p.size_bytes)] == \
            pytest.approx(p.value)
    assert c.value_name == "median_avg_us"
    assert {"min_min_us", "max_max_us", "median_median_us"} <= set(rows[0])
    assert "avg_us" not in rows[0]  # no unnamed statistic


def test_table_names_each_statistic(store: Store) -> None:
    text = show(store, collective="bcast", nprocs=2)
    assert text.startswith("# median_avg_us: median over the ok repetitions (launches) of "
                           "avg_us; min_min_us: lowest over the ok repetitions of min_us")
    header = next(line for line in text.splitlines() if line.startswith("algorithm"))
    assert header.split()[:7] == ["algorithm", "component", "size", "median_avg_us",
                                  "min_min_us", "max_max_us", "median_median_us"]


def test_best_honours_filters_and_agrees_with_compare(store: Store) -> None:
    rows = json.loads(best(store, "json", collective="bcast", nprocs=2))
    assert {r["block"] for r in rows} == {"bcast np=2 map-by=core bind-to=core"}
    c = compare(store, collective="bcast", nprocs=2)
    assert [(r["fastest"], r["recommended"], r["significant"]) for r in rows] == [
        (b.winner.label, b.recommended, b.significant) for b in c.best]
    assert all(r["recommended"] == "binomial" and r["significant"] for r in rows)
    assert all(r["effect"].endswith("× faster than default") for r in rows)
    # np=4: binomial is not credibly different; compare keeps the default, and so does show
    rows4 = json.loads(best(store, "json", collective="bcast", nprocs=4))
    c4 = compare(store, collective="bcast", nprocs=4)
    assert [r["recommended"] for r in rows4] == [b.recommended for b in c4.best]
    assert all(r["recommended"] == "default" for r in rows4)


def test_best_cli(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(store.root), "--best", "--nprocs", "4", "--collective",
                 "reduce"]) == 0
    out = capsys.readouterr().out
    assert "reduce np=4" in out and "np=2" not in out and "bcast" not in out
    assert "median_avg_us" in out and "default_median_avg_us" in out
    assert main(["show", str(store.root), "--best", "--algorithm", "binomial"]) == 2
    assert "--algorithm does not go with --best" in capsys.readouterr().err


def test_several_mpis_are_separate_blocks(tmp_path: Path) -> None:
    for version in ("5.0.11", "4.1.8"):
        write_store(tmp_path / version, mpi="openmpi", version=version,
                    collectives=["bcast"], algorithms=[("default", 0)], sizes=[8],
                    nprocs=[2], repetitions=2, timing=_timing)
    merged = Store(tmp_path / "both")
    merged.create({"name": "m", "seed": 1}, "", {"launches": []}, {"cores": 4})
    con_rows = []
    for version in ("5.0.11", "4.1.8"):
        con = Store(tmp_path / version).connect()
        cur = con.execute("SELECT * FROM measurements")
        names = [d[0] for d in cur.description]
        con_rows += [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        con.close()
    for r in con_rows:
        r["launch_id"] = f"{r['launch_id']}-{r['mpi_version']}"
    for lid in {r["launch_id"] for r in con_rows}:
        merged.write_launch(lid, [r for r in con_rows if r["launch_id"] == lid],
                            {"status": "ok"})
    text = show(merged)
    assert "mpi=openmpi-5.0.11" in text and "mpi=openmpi-4.1.8" in text
    assert text.count("reps") == 2  # two blocks, each of 2 repetitions
