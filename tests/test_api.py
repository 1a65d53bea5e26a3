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


def test_settings_time_and_hosts_are_columns_and_compare_is_a_frame(tmp_path: Path) -> None:
    """A run with an MCA sweep on the fake backend: each setting is a column, each row has
    its launch's time and hosts, and compare() is the CSV table as a DataFrame."""
    from tests.test_runner import write_spec
    spec = write_spec(tmp_path, nprocs="[2]")
    text = spec.read_text()
    spec.write_text(text + '\n[mca.sweep]\nbtl_sm_eager_limit = ["4096", "8192"]\n')
    out = tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out), "--backend", "fake"]) == 0
    results = collbench.open(out)
    df = results.measurements()
    assert "params" not in df.columns
    assert set(df["mca.btl_sm_eager_limit"]) == {"4096", "8192"}
    assert set(df["swept.btl_sm_eager_limit"]) == {"4096", "8192"}
    assert str(df["stored_at"].dtype) == "datetime64[ns, UTC]" and df["stored_at"].notna().all()
    assert (pd.Timestamp.now(tz="UTC") - df["stored_at"].min()).total_seconds() < 3600
    assert df["hosts"].notna().all()
    table = results.compare()
    from collbench.analyse import compare
    from collbench.analyse.render import csv_columns
    expected = compare(results.store)
    assert list(table.columns) == csv_columns(expected)
    assert len(table) == len(expected.points) > 0
    assert set(table["baseline"]) == {"default"}
