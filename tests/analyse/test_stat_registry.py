"""`--stat NAME`: the registered figures, and any `<NAME>_us` figure the rows' metrics hold,
so a figure the kernel adds (completion time) is compared and shown without a change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.analyse import compare
from collbench.analyse.show import show
from collbench.errors import UserError
from collbench.records import make_row
from collbench.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "res")
    store.create({"name": "t", "seed": 1}, "", {"launches": []}, {"cores": 8})
    for rep in range(4):
        rows = []
        for alg, completion in (("default", 20.0), ("linear", 40.0)):
            t = 10.0 + rep * 0.1
            metrics = {"completion_us": completion + rep * 0.1, "skew_us": 1.0 + rep,
                       "completion_ci": [1, 2]}
            rows.append(make_row(
                campaign="t", launch_id=f"r{rep}", repetition=rep, collective="bcast",
                algorithm=alg, segsize=0, fanout=0, params="{}", nprocs=4, nodes=1, ppn=4,
                mapping="core", binding="core", size_bytes=64, iterations=100, warmup=10,
                avg_us=t, min_us=t * 0.9, max_us=t * 1.1, median_us=t,
                metrics=json.dumps(metrics), status="ok"))
        store.write_launch(f"r{rep}", rows, {"status": "ok"})
    return store


def test_completion_is_compared_and_named(store: Store) -> None:
    avg = compare(store)
    (r,) = avg.ratios
    assert r.ratio == pytest.approx(1.0)  # OSU's average does not see it
    c = compare(store, stat="completion")
    assert (c.stat, c.value_name) == ("completion_us", "median_completion_us")
    (r,) = c.ratios
    assert r.ratio == pytest.approx(2.0, rel=0.01) and r.significant is True
    assert r.p_raw == pytest.approx(2 / 70)


def test_an_unregistered_metric_figure_is_a_stat(store: Store) -> None:
    assert compare(store, stat="skew").stat == "skew_us"
    with pytest.raises(UserError, match=r"--stat 'skw' is not valid; valid: .*skew.* \(did "
                                        r"you mean skew\?\)"):
        compare(store, stat="skw")


def test_show_adds_the_completion_column(store: Store) -> None:
    text = show(store)
    header = next(line for line in text.splitlines() if line.startswith("algorithm"))
    assert "median_completion_us" in header.split()
