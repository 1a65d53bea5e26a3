"""`collbench rules verify` and `tune validate` with real Open MPI at 2 and 4 ranks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store

pytestmark = pytest.mark.mpi


@pytest.fixture(autouse=True)
def _yield_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    # Functional tests only: oversubscribed busy-polling ranks would crawl (DESIGN.md).
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")


@pytest.fixture
def tuned(bcast_store: Callable[..., Store], tmp_path: Path) -> Path:
    """bcast: binomial below 8 KiB, pipeline from 8 KiB, for np 2 and 4 (the fake data)."""
    out = tmp_path / "tuned.rules"
    assert main(["tune", str(bcast_store().root), "-o", str(out)]) == 0
    return out


def _rows(text: str) -> dict[tuple[int, int], str]:
    """(np, size per rank) -> the row, from verify's table."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["bcast"] and f[1].isdigit():
            out[(int(f[1]), int(f[2]))] = line
    return out


def test_verify_proves_the_switch_at_the_threshold_at_2_and_4_ranks(
        tuned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["rules", "verify", str(tuned), "-n", "2,4"]) == 0
    out = capsys.readouterr().out
    assert "method: trace" in out and "verified:" in out and "MISMATCH" not in out
    rows = _rows(out)
    for n in (2, 4):
        below, at = rows[(n, 8191)], rows[(n, 8192)]
        # file says and ran: the same algorithm, on both sides of the threshold
        assert below.count("6 binomial") >= 2 and below.rstrip().endswith("yes")
        assert at.count("3 pipeline") >= 2 and at.rstrip().endswith("yes")


def test_verify_exits_1_when_open_mpi_runs_something_else(
        tuned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A forced algorithm beats the file: what Open MPI runs is no longer what the file says.
    code = main(["rules", "verify", str(tuned), "-n", "2", "--mca",
                 "coll_tuned_bcast_algorithm=1"])
    out = capsys.readouterr().out
    assert code == 1 and "MISMATCH" in out
    rows = _rows(out)
    assert rows and all(" NO " in r and "1 basic_linear" in r for r in rows.values())


def test_verify_refuses_a_file_open_mpi_would_ignore(tuned: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.rules"
    bad.write_text("# a comment first\n" + tuned.read_text())
    assert main(["rules", "verify", str(bad), "-n", "2"]) == 1
    assert "REJECTED" in capsys.readouterr().out


def test_verify_by_timing_says_which_method_it_used(
        tuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.rules"  # np=2 only, one threshold: few launches
    text = tuned.read_text()
    one.write_text(text)
    code = main(["rules", "verify", str(one), "-n", "2", "--method", "timing",
                 "--repetitions", "2"])
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert "method: timing" in out and "file vs forced" in out
    assert len(_rows(out)) >= 3


def test_validate_prints_effects_with_intervals(
        tuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "ab"
    code = main(["tune", "validate", str(tuned), "-n", "2", "--repetitions", "3",
                 "--sizes", "1K,16K", "--iterations", "20", "-o", str(out_dir)])
    text = capsys.readouterr().out
    assert code in (0, 1)  # 1 only with a REGRESSION banner
    assert ("REGRESSION" in text) == (code == 1)
    lines = [x.split() for x in text.splitlines() if x.startswith("bcast")]
    assert [(x[1], x[2], x[3]) for x in lines] == [("2", "1K", "switch"), ("2", "16K", "switch")]
    # the effect in compare's words, with its interval
    assert all(" × faster than default" in " ".join(x) or " × slower than default"
               in " ".join(x) for x in lines)
    assert "tuned, all sizes: " in text and "(geometric mean of 2 sizes)" in text
    # an ordinary results folder: default and tuned arms, 3 launches each
    con = Store(out_dir).connect()
    arms = con.execute("SELECT algorithm, count(DISTINCT launch_id) FROM measurements "
                       "GROUP BY 1 ORDER BY 1").fetchall()
    assert arms == [("default", 3), ("tuned", 3)]
    # rerunning resumes: nothing to run again, same table
    assert main(["tune", "validate", str(tuned), "-n", "2", "--repetitions", "3",
                 "--sizes", "1K,16K", "--iterations", "20", "-o", str(out_dir)]) == code
