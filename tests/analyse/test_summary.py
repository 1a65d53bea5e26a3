"""`compare --summary`: smoothed as tune smooths, effects in hyperfine's words, any format."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from collbench.analyse import compare
from collbench.analyse.summary import render_summary, summarise
from collbench.cli import main
from collbench.store import Store
from collbench.tune.select import Options, select
from tests.tune.fakedata import write_store

SIZES = [2**k for k in range(0, 16)]


def _flipping(coll: str, alg: str, size: int, nprocs: int) -> float:
    """Both beat the default by 2x; between them the winner flips every size by 2 %."""
    base = 10.0 + size / 1000
    if alg == "default":
        return base * 2
    flip = (SIZES.index(size) % 2 == 0) == (alg == "binomial")
    return base * (0.98 if flip else 1.0)


@pytest.fixture(scope="module")
def noisy(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return write_store(tmp_path_factory.mktemp("s") / "res", mpi="openmpi", version="5.0.11",
                       collectives=["bcast"],
                       algorithms=[("default", 0), ("binomial", 6), ("pipeline", 3)],
                       sizes=SIZES, nprocs=[4], repetitions=8, timing=_flipping, noise=0.002)


def test_summary_smooths_exactly_as_tune(noisy: Store) -> None:
    s = summarise(compare(noisy), max_regret=0.05)
    (block,) = s.blocks
    assert block.smoothing is not None
    tuned = select(noisy, Options(max_regret=0.05)).smoothing[("bcast", 4)]
    assert (block.smoothing.switches_before, block.smoothing.switches_after) == (
        tuned.switches_before, tuned.switches_after)
    assert block.smoothing.removed >= 8 and block.smoothing.switches_after == 0
    assert 0 < block.smoothing.max_regret <= 0.05
    (only,) = block.ranges
    assert (only.size_from, only.size_to, only.sizes) == (1, SIZES[-1], len(SIZES))
    # twice as fast over 16 sizes: a geometric mean with a tight t interval
    assert only.ratio == pytest.approx(0.5, rel=0.03)
    assert only.ci_low is not None and only.ci_high is not None
    assert only.ci_low < only.ratio < only.ci_high
    assert only.effect.startswith("2.0") and only.effect.endswith(
        "× faster than default (geometric mean of 16 sizes)")


def test_without_smoothing_the_noise_shows(noisy: Store) -> None:
    (block,) = summarise(compare(noisy), max_regret=0).blocks
    assert block.smoothing is None and len(block.ranges) >= 8
    assert all(r.sizes == 1 and "±" in r.effect for r in block.ranges)


def test_table_json_csv_say_the_same(noisy: Store) -> None:
    s = summarise(compare(noisy), max_regret=0.05)
    smoothing = s.blocks[0].smoothing
    assert smoothing is not None
    table = render_summary(s, "table")
    assert "\n# bcast np=4 map-by=core bind-to=core\n" in table
    (row,) = [ln.split("  ") for ln in table.splitlines() if ln.startswith("1–32K ")]
    cells = [c.strip() for c in row if c.strip()]
    assert cells[1] == s.blocks[0].ranges[0].algorithm
    assert cells[2:] == [s.blocks[0].ranges[0].effect, "8", "16/16"]
    assert max(len(ln) for ln in table.splitlines() if not ln.startswith(("#", " "))) <= 100
    # warnings: a count and the worst three (all with --all)
    assert "3 stability warnings:" in table or "stability warnings, the worst 3:" in table
    worst = max(r for _, r in smoothing.regret)
    assert (f"smoothing: {smoothing.switches_before} -> 0 switches, at most {worst:.1%} "
            f"slower than the per-size choice at {len(smoothing.regret)} sizes") in table
    data = json.loads(render_summary(s, "json"))
    (b,) = data["blocks"]
    assert b["smoothing"]["switches_after"] == 0
    assert b["smoothing"]["switches_removed"] == smoothing.removed
    assert all(0 < r["regret"] <= 0.05 for r in b["smoothing"]["regret"])
    assert b["ranges"][0]["effect"] == s.blocks[0].ranges[0].effect
    assert data["value"] == "median_avg_us" and data["baseline"] == "default"
    rows = list(csv.DictReader(io.StringIO(render_summary(s, "csv"))))
    assert len(rows) == 1 and rows[0]["size_to"] == str(SIZES[-1])
    assert float(rows[0]["geomean_ratio"]) == pytest.approx(s.blocks[0].ranges[0].ratio)


def test_cli_summary_json_is_json(noisy: Store, capsys: pytest.CaptureFixture[str],
                                  tmp_path: Path) -> None:
    assert main(["compare", str(noisy.root), "--summary", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_regret"] == 0.05 and data["blocks"][0]["ranges"]
    assert main(["compare", str(noisy.root), "--summary", "--format", "csv",
                 "--max-regret", "0"]) == 0
    out, err = capsys.readouterr()
    assert len(out.strip().splitlines()) >= 9 and "collbench: warning:" in err
    assert main(["compare", str(noisy.root), "--summary", "--max-regret", "1.5"]) == 2
    assert "--max-regret 1.5 is not valid" in capsys.readouterr().err


def _far_apart(coll: str, alg: str, size: int, nprocs: int) -> float:
    """knomial: 2x faster at 1 B, 100x at 2 B, 2x slower above: a geometric mean over the
    two sizes has a t interval (1 degree of freedom) from slower to much faster."""
    if alg == "default":
        return 10.0
    return {1: 5.0, 2: 0.1}.get(size, 20.0)


def test_an_interval_across_1_is_not_given_as_the_range_effect(tmp_path: Path) -> None:
    store = write_store(tmp_path / "far", mpi="openmpi", version="5.0.11",
                        collectives=["bcast"], algorithms=[("default", 0), ("knomial", 7)],
                        sizes=[1, 2, 4, 8], nprocs=[2], repetitions=6, timing=_far_apart,
                        noise=0.002)
    (block,) = summarise(compare(store), max_regret=0.05).blocks
    first = block.ranges[0]
    assert (first.algorithm, first.size_from, first.size_to) == ("knomial", 1, 2)
    assert first.ci_low is not None and first.ci_high is not None
    assert first.ci_low < 1 < first.ci_high  # the t interval says nothing...
    # ...so the effect gives what each size showed, not that interval
    assert re.fullmatch(r"2\.00–(99|100)\.\d\d × faster than default at its 2 sizes",
                        first.effect), first.effect
    assert "interval" not in first.effect and first.significant == 2
    assert block.ranges[1].algorithm == "default"
