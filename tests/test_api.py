"""`collbench.open(path)`: a results folder as a pandas DataFrame, read-only."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import collbench
from collbench.cli import main
from collbench.errors import UserError
from tests.ingest import OSU


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "nb"
    for name in ("osu_bcast_tail_np4", "osu_iallgather_np4", "osu_bcast_alg6_np4"):
        assert main(["ingest", str(OSU / f"{name}.txt"), "--nprocs", "4", "--mpi", "openmpi",
                     "--mpi-version", "5.0.11", "-o", str(out)]) == 0
    return out


def test_measurements_one_row_per_stored_row_typed(folder: Path) -> None:
    results = collbench.open(folder)
    df = results.measurements()
    con = results.store.connect()
    (count,) = con.execute("SELECT count(*) FROM measurements").fetchone() or (0,)
    con.close()
    assert len(df) == count > 0
    assert df["size_bytes"].dtype == "Int64" and df["avg_us"].dtype == "float64"
    assert df["validated"].dtype == "boolean" and df["algorithm"].dtype == "string"
    # metrics expanded: tail percentiles of osu -z, overlap of osu_i*; absent = NaN
    assert "metrics" not in df.columns
    assert {"p99_us", "overlap_pct", "overall_us"} <= set(df.columns)
    tail = df[df["collective"] == "bcast"]["p99_us"]
    assert tail.notna().any() and tail.isna().any()
    assert (df[df["collective"] == "iallgather"]["overlap_pct"].dropna() >= 0).all()
    # ingested ids stay integers; the forced run is its algorithm, not "default"
    assert set(df["algorithm"]) == {"default", "binomial"}
    assert df[df["algorithm"] == "binomial"]["algorithm_id"].unique().tolist() == [6]
    assert isinstance(df, pd.DataFrame)


def test_campaign_spec_and_plan(folder: Path) -> None:
    results = collbench.open(folder)
    assert results.name == "nb" and results.campaign["kind"] == "ingest"
    assert results.spec is None  # ingested: no spec
    assert results.plan.launches == 0 and results.plan.stored_launches == 3
    assert "nb" in repr(results)
    assert len(results.samples()) == 0


def test_not_a_folder_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="results"):
        collbench.open(tmp_path / "missing")


def test_without_pandas_the_message_says_how(folder: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    real = builtins.__import__

    def no_pandas(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(ImportError, match=r"pip install 'collbench\[notebook\]'"):
        collbench.open(folder).measurements()
