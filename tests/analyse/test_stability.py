"""Each stability warning: triggered by crafted data, silent on clean data."""

from collections.abc import Sequence
from typing import Any

from collbench.analyse.stability import Observed, StabilityWarning, check, repetitions_needed

BLOCK = "bcast np=4 map-by=core bind-to=core"
CLEAN = (10.0, 10.2, 9.9, 10.1, 10.0)


def observed(values: Sequence[float] = CLEAN, *, label: str = "binomial", size: int = 1024,
             iterations: int = 1000, spread: float = 0.2, nprocs: int = 4,
             statuses: Sequence[str] = ()) -> Observed:
    rows: list[dict[str, Any]] = [
        {"status": "ok", "repetition": i, "iterations": iterations, "avg_us": v,
         "min_us": v * (1 - spread / 2), "max_us": v * (1 + spread / 2), "median_us": v}
        for i, v in enumerate(values)]
    rows += [{"status": s, "repetition": len(values) + i, "iterations": iterations}
             for i, s in enumerate(statuses)]
    return Observed(BLOCK, label, size, nprocs, 1, nprocs, tuple(values), tuple(rows))


def warnings(obs: Sequence[Observed], cores: int | None = 64) -> list[StabilityWarning]:
    return check(obs, "avg_us", 0.95, cores)


def problems(obs: Sequence[Observed], cores: int | None = 64) -> str:
    return "\n".join(f"{w.where}: {w.problem} -> {w.advice}" for w in warnings(obs, cores))


def test_clean_data_gives_no_warning() -> None:
    assert warnings([observed(), observed(label="default")]) == []


def test_high_spread_between_repetitions() -> None:
    out = problems([observed((10.0, 14.0, 8.0, 12.0, 10.0))])
    assert "standard deviation up to 21% of the mean (> 10%)" in out
    assert f"{BLOCK}: binomial at 1K" in out


def test_ranks_disagree() -> None:
    out = problems([observed(spread=4.5)])
    assert "ranks disagree" in out and "check binding and oversubscription" in out
    assert "ranks disagree" not in problems([observed(spread=2.5)])  # a rooted bcast


def test_outlier_repetition() -> None:
    out = problems([observed((10.0, 10.2, 9.9, 10.1, 25.0))])
    assert "far above the median (up to 2.5x" in out
    assert "check for other jobs on the node" in out
    # A moderate excursion inside 3 scaled MADs is not an outlier.
    assert "far above" not in problems([observed((10.0, 10.2, 9.9, 10.1, 10.4))])


def test_too_few_iterations_and_too_little_timed_work() -> None:
    out = problems([observed(iterations=5)])
    assert "only 5 timed iterations" in out and "increase measure.iterations" in out
    out = problems([observed((1.0, 1.01, 0.99, 1.0, 1.0), iterations=100)])
    assert "as little as 99 us per repetition" in out
    assert "increase measure.iterations" in out


def test_few_repetitions() -> None:
    out = problems([observed((10.0,))])
    assert "only 1 repetition at some points" in out and "repetitions >= 4" in out
    out = problems([observed((10.0, 10.1, 9.9))])
    assert "only 3 repetitions" in out and "too few for any difference to be significant" in out


def test_many_algorithms_need_more_repetitions() -> None:
    # Holm over 7 algorithms: 7 * 2/252 = 0.056 >= 0.05 with 5 repetitions, but
    # 7 * 2/924 = 0.015 with 6.
    obs = [observed(label=f"alg{i}") for i in range(8)]
    assert repetitions_needed(obs, 0.95) == 6
    assert "repetitions >= 6" in problems(obs)
    assert repetitions_needed(obs[:2], 0.95) == 4
    assert repetitions_needed(obs[:2], 0.8) == 3  # never fewer than 3


def test_failed_timeout_invalid_points_are_named() -> None:
    out = problems([observed(statuses=["failed"]),
                    observed(label="ring", size=64, statuses=["timeout", "timeout"]),
                    observed(label="linear", size=8, statuses=["invalid"])])
    assert f"{BLOCK} binomial 1K (rep 5): 1 point(s) failed" in out
    assert f"{BLOCK} ring 64 (rep 5,6): 1 point(s) timeout" in out
    assert "raise run.timeout" in out
    assert f"{BLOCK} linear 8 (rep 5): 1 point(s) invalid" in out
    assert "failed" not in problems([observed(statuses=["skipped"])])


def test_oversubscription() -> None:
    out = problems([observed(nprocs=4)], cores=2)
    assert "more ranks per node than the 2 cores" in out
    assert "timings of oversubscribed runs are noisy" in out
    assert problems([observed(nprocs=4)], cores=4) == ""
    assert problems([observed(nprocs=4)], cores=None) == ""
