"""One recommendation per folder: the report, `compare --summary` and `tune` name the same
variant at every size (all smoothed by analyse/smoothing.py from compare's per-size
choice), and each place that reads results says when they were oversubscribed."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store
from collbench.tune.select import Options, select
from tests.tune.fakedata import write_store

SIZES = [2**k for k in range(0, 12)]


def _timing(coll: str, alg: str, size: int, nprocs: int) -> float:
    """knomial wins small sizes by far; above 256 B binomial and knomial trade the lead by
    1 % from size to size (the per-size winner flips; smoothing keeps one), both 30 %
    faster than the default."""
    base = 5.0 + size / 100
    if alg == "default":
        return base
    if size <= 256:
        return base * (0.4 if alg == "knomial" else 0.9)
    flip = (SIZES.index(size) % 2 == 0) == (alg == "binomial")
    return base * (0.70 if flip else 0.707)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return write_store(tmp_path_factory.mktemp("agree") / "res", mpi="openmpi",
                       version="5.0.11", collectives=["bcast"],
                       algorithms=[("default", 0), ("binomial", 6), ("knomial", 7)],
                       sizes=SIZES, nprocs=[4], repetitions=6, timing=_timing, noise=0.002)


def _per_size(ranges: list[tuple[int, int, str]]) -> dict[int, str]:
    return {s: alg for lo, hi, alg in ranges for s in SIZES if lo <= s <= hi}


def test_report_summary_and_tune_agree(folder: Store, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", str(folder.root), "--summary", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    summary = _per_size([(int(r["size_from"]), int(r["size_to"]), r["recommended"])
                         for r in csv.DictReader(io.StringIO(out))])
    assert "oversubscribed" in err  # 4 ranks on the 2 cores write_store records

    assert main(["report", str(folder.root), "-o", str(tmp_path / "rep")]) == 0
    table = (tmp_path / "rep" / "tables" / "recommendations.csv").read_text()
    report = _per_size([(int(r["size_from"]), int(r["size_to"]), r["recommended"])
                        for r in csv.DictReader(io.StringIO(table))])
    assert "oversubscribed" in (tmp_path / "rep" / "index.html").read_text()

    (choices,) = select(folder, Options()).tables.values()
    tune = _per_size([(c.threshold, c.size_to, c.algorithm) for c in choices])

    assert summary == report == tune, (summary, report, tune)
    assert set(summary) == set(SIZES)
    # the data make a real choice: knomial for small sizes, one algorithm (no flipping) above
    assert {summary[s] for s in SIZES if s <= 256} == {"knomial"}
    assert len({summary[s] for s in SIZES if s > 256}) == 1

    capsys.readouterr()
    assert main(["show", str(folder.root)]) == 0
    assert "# NOTE: oversubscribed: up to 4 ranks per node on the 2 cores" in (
        capsys.readouterr().out)
    assert main(["show", str(folder.root), "--best"]) == 0
    assert "oversubscribed" in capsys.readouterr().out
