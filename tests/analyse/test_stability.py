"""Each stability warning: triggered by crafted data, silent on clean data."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collbench.analyse.stability import (
    Observed,
    StabilityWarning,
    brief,
    check,
    line,
    noise_evidence,
    ranges,
    repetitions_needed,
)

BLOCK = "bcast np=4 map-by=core bind-to=core"
CLEAN = (10.0, 10.2, 9.9, 10.1, 10.0)


def observed(values: Sequence[float] = CLEAN, *, label: str = "binomial", size: int = 1024,
             iterations: int = 1000, spread: float = 0.2, nprocs: int = 4,
             statuses: Sequence[str] = (), binding: str = "core",
             backend: str = "local") -> Observed:
    common = {"binding": binding, "backend": backend, "iterations": iterations}
    rows: list[dict[str, Any]] = [
        {"status": "ok", "repetition": i, "avg_us": v, "min_us": v * (1 - spread / 2),
         "max_us": v * (1 + spread / 2), "median_us": v, **common}
        for i, v in enumerate(values)]
    rows += [{"status": s, "repetition": len(values) + i, **common}
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
    assert "ranks disagree" in out and "ranks are bound already" in out
    assert "ranks disagree" not in problems([observed(spread=2.5)])  # a rooted bcast


def test_outlier_repetition() -> None:
    out = problems([observed((10.0, 10.2, 9.9, 10.1, 25.0))])
    assert "far above the median (up to 2.5x" in out
    assert "check for other jobs on the node" in out
    # A moderate excursion inside 3 scaled MADs is not an outlier.
    assert "far above" not in problems([observed((10.0, 10.2, 9.9, 10.1, 10.4))])


def test_too_few_iterations_and_too_little_timed_work() -> None:
    out = problems([observed(iterations=5)])
    assert "only 5 timed iterations" in out and "raise measure.iterations (now" in out
    out = problems([observed((1.0, 1.01, 0.99, 1.0, 1.0), iterations=100)])
    assert "as little as 99 us per repetition" in out
    assert "raise measure.iterations (now" in out


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


def test_sizes_are_ranges_of_the_measured_sizes() -> None:
    assert ranges([1, 2, 4, 1024, 2048], [1, 2, 4, 8, 1024, 2048]) == "1–4, 1K–2K"
    assert ranges([8], [1, 8, 64]) == "8"
    # A size measured without the finding splits a run; unmeasured sizes do not.
    obs = [observed((10.0, 14.0, 8.0, 12.0, 10.0), size=s) for s in (64, 128, 256, 4096)]
    obs.insert(2, observed(size=200))  # clean, between 128 and 256
    out = problems(obs)
    assert f"{BLOCK}: binomial at 64–128, 256–4K:" in out
    assert out.count("standard deviation") == 1  # one line per finding


def test_one_line_per_algorithm_worst_first() -> None:
    obs = [observed((10.0, 10.2, 9.9, 10.1, 25.0), label="ring"),  # 2.5x outlier
           observed((10.0, 10.2, 9.9, 10.1, 60.0), label="linear"),  # 6x outlier
           observed((10.0, 10.1, 9.9, 10.0, 10.0), label="chain", iterations=2)]
    ws = warnings(obs)
    assert [w.where.split(": ")[1].split(" at")[0] for w in ws] [:3] == [
        "chain", "linear", "ring"]  # 50x too little timed work; spread 111% and 51%
    assert all("\n" not in line(w) for w in ws)
    assert [w.severity for w in ws] == sorted((w.severity for w in ws), reverse=True)


def test_brief_keeps_the_worst_and_says_how_many_more() -> None:
    obs = [observed((10.0, 10.2, 9.9, 10.1, 10.0 * (2 + i)), label=f"alg{i}")
           for i in range(8)]
    ws = warnings(obs)
    shown, more = brief(ws, 3)
    assert shown == ws[:3] and shown[0].where == "campaign"  # 5 repetitions for 8 algorithms
    assert shown[1].where.startswith(f"{BLOCK}: alg7 at")
    assert more == f"{len(ws) - 3} more warnings; --all shows every one"
    assert brief(ws[:2], 3) == (ws[:2], None)


def test_advice_fits_the_binding() -> None:
    noisy = (10.0, 14.0, 8.0, 12.0, 10.0)
    bound = problems([observed(noisy)])
    assert "pin ranks" not in bound and "(run.repetitions, now 5)" in bound
    loose = warnings([observed(noisy, binding="none"), observed(spread=4.5, binding="none",
                                                                label="ring")])
    assert all("pin ranks (--bind-to core)" in w.advice for w in loose)
    assert "ranks are bound already" in problems([observed(spread=4.5)])


def test_oversubscribed_advice_replaces_noise_advice() -> None:
    out = problems([observed((10.0, 14.0, 8.0, 12.0, 10.0), nprocs=4)], cores=2)
    assert "oversubscribed (4 ranks per node on 2 cores)" in out
    assert "compare algorithms at nprocs <= 2" in out and "other jobs" not in out


def test_a_simulator_gets_no_timer_or_oversubscription_advice() -> None:
    sim = [observed(iterations=5, nprocs=64, backend="simgrid"),
           observed((1.0, 1.01, 0.99, 1.0, 1.0), iterations=100, backend="simgrid",
                    label="ring"),
           observed(spread=4.5, backend="simgrid", label="linear")]
    assert problems(sim, cores=2) == ""
    assert "check the platform file" in problems(
        [observed((10.0, 14.0, 8.0, 12.0, 10.0), backend="simgrid")])


def test_real_results_folders(tmp_path: Path) -> None:
    """The warnings compare finds in folders written by the store: one noisy algorithm."""
    from collbench.analyse import compare
    from collbench.store import Store
    from tests.report import make_results

    clean = compare(Store(make_results(tmp_path / "clean", repetitions=6)))
    assert not [w for w in clean.warnings if "far above" in w.problem or "varies" in w.problem]
    noisy = compare(Store(make_results(tmp_path / "noisy", repetitions=6, outlier=True)))
    lines = [line(w) for w in noisy.warnings]
    assert lines and all("\n" not in ln for ln in lines)
    # make_results multiplies one repetition of "default" by 5 at every size and nprocs.
    assert {w.where for w in noisy.warnings if "far above" in w.problem} == {
        "bcast np=2 map-by=core bind-to=core: default at 1–1M",
        "bcast np=4 map-by=core bind-to=core: default at 1–1M"}
    assert not any("pin ranks" in w.advice for w in noisy.warnings)  # bound to cores


def test_noise_evidence_for_tune() -> None:
    assert noise_evidence(warnings([observed(), observed(label="default")])) is None
    assert noise_evidence(warnings([observed(iterations=5)])) is None  # not noise
    text = noise_evidence(warnings([observed((10.0, 10.2, 9.9, 10.1, 60.0))]))
    assert text is not None and text.startswith("noisy timings at 2 places")
    assert "\n" not in text and "binomial at 1K" in text
