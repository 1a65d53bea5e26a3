"""Precision-driven repetitions in adaptive tuning: the replay's stopping rule is the
kernel's (checked against the real kernel), a replay serves exactly what a precision run
would have reported, and a live run measures in the kernel's precision mode."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.errors import UserError
from collbench.store import Store
from collbench.tune.adaptive import Config, Precision, RaceConfig, live, replay
from collbench.tune.adaptive.precise import next_total, relative_halfwidth, stop
from collbench.tune.adaptive.replay import load, sample_key
from tests.conftest import RunKernel
from tests.tune.test_adaptive import LIVE_SPEC, write_campaign

times = st.lists(st.floats(0.01, 1e6, allow_nan=False), min_size=1, max_size=300)


# Samples around one value, so that most targets are met after a few batches.
noisy = st.builds(lambda base, xs: [base * (1 + x) for x in xs], st.floats(0.1, 1e4),
                  st.lists(st.floats(0, 0.5), min_size=1, max_size=400))


@given(st.one_of(times, noisy), st.floats(1e-3, 1.0), st.integers(1, 64))
def test_stop_is_the_first_batch_boundary_that_meets_the_target(
        samples: list[float], target: float, first: int) -> None:
    n = stop(samples, Precision(target, first))
    # the totals the kernel reaches: first, then each next_total, capped at the recording
    chain, b = [], min(first, len(samples))
    while True:
        chain.append(b)
        reached = relative_halfwidth(samples[:b])
        if b == len(samples) or reached <= target:
            break
        following = next_total(b, reached, target)
        assert math.ceil(1.25 * b) <= following <= 2 * b  # never more than doubling
        b = min(following, len(samples))
    assert n == chain[-1]
    assert n == len(samples) or relative_halfwidth(samples[:n]) <= target


@given(st.integers(1, 10**6), st.floats(1e-6, 10.0), st.floats(1e-4, 1.0))
def test_next_total_aims_at_the_count_the_half_width_predicts(
        n: int, reached: float, target: float) -> None:
    want = (reached / target) ** 2
    total = next_total(n, reached, target)
    if 1.25 <= want <= 2.0:  # half-width ~ 1/sqrt(n): the count where it meets the target
        assert total == pytest.approx(n * want, abs=1.0)
    else:
        assert total == math.ceil(n * (2.0 if want > 2.0 else 1.25))
    assert next_total(n, math.inf, target) == 2 * n


@pytest.mark.mpi
def test_stop_reproduces_the_real_kernels_precision_mode(run_kernel: RunKernel) -> None:
    """The kernel in precision mode with its samples: the replay rule applied to those
    samples stops where the kernel stopped and reaches the precision it reported."""
    jobs = "".join(f"bcast 0 0 0 {size} 5 5 precision=0.05 max_iterations=4000 "
                   f"max_seconds=60\n" for size in (1, 1024, 65536, 1048576))
    run = run_kernel(2, jobs, "--samples")
    assert run.returncode == 0, run.stderr
    for rec in run.records:
        assert rec["status"] == "ok", rec
        samples = rec["samples_us"]
        assert len(samples) == rec["iterations"]
        assert stop(samples, Precision(0.05, 5)) == rec["iterations"], rec["size_bytes"]
        assert relative_halfwidth(samples) == pytest.approx(rec["precision"], rel=1e-6)


SAMPLED = LIVE_SPEC.replace("[run]", "samples = true\n\n[run]")


@pytest.mark.mpi
def test_replay_serves_the_prefix_a_precision_run_would_have_timed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional test only
    spec = tmp_path / "spec.toml"
    spec.write_text(SAMPLED.format(reps=3))
    exh = tmp_path / "exh"
    assert main(["run", str(spec), "-o", str(exh), "-q"]) == 0
    precision = Precision(0.2, 5)
    full = load(Store(exh), samples=True)
    assert full.samples is not None
    cfg = Config(race=RaceConfig(min_reps=2), stride=4)
    run, recorded = replay(exh, tmp_path / "out", cfg, seed=3, precision=precision)
    con = Store(tmp_path / "out").connect()
    try:
        cur = con.execute("SELECT * FROM measurements")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
    assert rows and len(rows) == run.tally.measured
    # served rows are stored under launch ids of their own; the repetition says whose
    origin = {(r["repetition"], r["collective"], r["algorithm"], r["size_bytes"]): sample_key(r)
              for rs in full.rows.values() for r in rs}
    cut = 0
    for row in rows:
        samples = full.samples[origin[(row["repetition"], row["collective"], row["algorithm"],
                                       row["size_bytes"])]]
        n = stop(samples, precision)
        assert row["iterations"] == n
        assert row["avg_us"] == pytest.approx(statistics.fmean(samples[:n]))
        assert row["median_us"] == pytest.approx(statistics.median(samples[:n]))
        assert row["min_us"] is None and row["max_us"] is None  # not in the samples
        reached = json.loads(row["metrics"])["precision"]
        assert reached == pytest.approx(relative_halfwidth(samples[:n]))
        cut += n < len(samples)
    assert cut > 0  # at a ±20 % target some repetitions stop early
    # Kernel time charged = (timed iterations of the prefix + warm-up) x its mean.
    charged = sum((r["iterations"] + r["warmup"]) * r["avg_us"] for r in rows)
    assert run.tally.kernel_us == pytest.approx(charged)
    assert run.tally.kernel_us < sum(
        (r["iterations"] + r["warmup"]) * r["avg_us"]
        for rs in recorded.rows.values() for r in rs)
    # The rules come out of tune's selection over what was served.
    assert run.selection.tables[("bcast", 2)][0].threshold == 0
    # A damaged samples file is one line naming the folder, never a traceback.
    next((exh / "samples").glob("*.parquet")).write_bytes(b"PAR1 not parquet")
    with pytest.raises(UserError, match=r"/samples: unreadable \(.*--precision"):
        replay(exh, tmp_path / "again", cfg, seed=3, precision=precision)


def test_replay_without_samples_is_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = write_campaign(tmp_path / "exh")
    rules = tmp_path / "t.rules"
    assert main(["tune", str(store.root), "--adaptive", "--precision", "0.1", "-o",
                 str(rules)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(store.root) in err and "samples = true" in err
    assert main(["tune", str(store.root), "--adaptive", "--precision", "0.1", "--stat",
                 "min", "-o", str(rules)]) == 2
    assert "valid: --stat avg, median" in capsys.readouterr().err
    assert main(["tune", str(store.root), "--adaptive", "--min-iterations", "5", "-o",
                 str(rules)]) == 2
    assert "only with --precision" in capsys.readouterr().err
    with pytest.raises(SystemExit) as bad:  # argparse's own exit, one line
        main(["tune", str(store.root), "--adaptive", "--precision", "nan", "-o", str(rules)])
    assert bad.value.code == 2
    assert "valid: 0.0001 to 1" in capsys.readouterr().err


@pytest.mark.mpi
def test_live_precision_runs_points_in_the_kernels_precision_mode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional test only
    spec = tmp_path / "spec.toml"
    spec.write_text(LIVE_SPEC.format(reps=3))
    out = tmp_path / "live"
    run = live(spec, out, find_mpi(), Config(race=RaceConfig(min_reps=2), stride=8),
               precision=Precision(0.5, 3))
    con = Store(out).connect()
    try:
        got = con.execute("SELECT size_bytes, iterations, metrics FROM measurements "
                          "WHERE status = 'ok'").fetchall()
    finally:
        con.close()
    assert got and len(got) == run.tally.measured
    for size, iterations, metrics in got:
        cap = 50 if size <= 8192 else 5  # the spec's fixed counts are the cap
        assert min(3, cap) <= iterations <= cap
        reached = json.loads(metrics)["precision"]
        assert math.isfinite(reached) and (reached <= 0.5 or iterations == cap)
    assert json.loads((out / "campaign.json").read_text())["adaptive"]["precision"] == 0.5
