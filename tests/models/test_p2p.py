from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from collbench.errors import UserError
from collbench.models.p2p import PingPong, fit_groups, fit_level, fit_model

SAMPLE = Path("/work/shared/samples/osu-7.4/osu_latency_np2.txt")
SIZES = [2 ** k for k in range(0, 21)]


def synthetic(regimes: list[tuple[int, float, float]], noise: float, seed: int,
              reps: int = 3, level: str = "core", transport: str = "default"
              ) -> list[PingPong]:
    """Rows from t = α + m/β (β in bytes/s) per regime (from_bytes, α, β), with relative
    Gaussian noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in SIZES:
        _, a, b = [r for r in regimes if m >= r[0]][-1]
        for _ in range(reps):
            t = (a + m * 1e6 / b) * (1 + noise * rng.standard_normal())
            rows.append(PingPong(m, float(t), level, transport))
    return rows


def test_two_regimes_are_found_and_recovered_within_their_cis() -> None:
    truth = [(0, 0.3, 4e9), (16384, 8.0, 12e9)]  # rendezvous: a jump of ~5 µs
    fit = fit_level(synthetic(truth, 0.01, seed=3))
    assert [r.from_bytes for r in fit.regimes] == [0, 16384]
    for reg, (_, a, b) in zip(fit.regimes, truth, strict=True):
        assert reg.alpha_ci is not None and reg.beta_ci is not None
        assert reg.alpha_ci[0] <= a <= reg.alpha_ci[1]
        assert reg.beta_ci[0] <= b <= reg.beta_ci[1]
    assert fit.error is not None and fit.error.median_abs_pct < 2


def test_one_regime_stays_one_and_its_cis_cover_the_truth() -> None:
    covered = 0
    for seed in range(20):
        fit = fit_level(synthetic([(0, 1.0, 10e9)], 0.01, seed=seed))
        assert len(fit.regimes) == 1
        reg = fit.regimes[0]
        assert reg.alpha_ci is not None and reg.beta_ci is not None
        covered += reg.alpha_ci[0] <= 1.0 <= reg.alpha_ci[1]
        covered += reg.beta_ci[0] <= 10e9 <= reg.beta_ci[1]
    assert covered >= 34  # 95% intervals: about 38 of 40 expected


def test_three_regimes() -> None:
    truth = [(0, 0.3, 2e9), (4096, 4.0, 8e9), (262144, 60.0, 20e9)]
    fit = fit_level(synthetic(truth, 0.005, seed=7))
    assert [r.from_bytes for r in fit.regimes] == [0, 4096, 262144]


def test_real_osu_latency_sample() -> None:
    rows = []
    for line in SAMPLE.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit():
            rows.append(PingPong(int(parts[0]), float(parts[1])))
    assert len(rows) == 21
    fit = fit_level(rows)
    assert 1 <= len(fit.regimes) <= 3
    assert all(r.alpha_us >= 0 and r.beta_bytes_per_s > 0 for r in fit.regimes)
    assert fit.regimes[0].alpha_us > 0
    assert 0.15 < fit.regimes[0].alpha_us < 0.5  # measured 0.27-0.28 µs at 1-8 B
    assert fit.error is not None
    assert fit.error.median_abs_pct < 10 and fit.error.p95_abs_pct < 30


def test_groups_are_never_mixed() -> None:
    rows = (synthetic([(0, 0.3, 5e9)], 0.01, 1, level="core", transport="sm")
            + synthetic([(0, 2.0, 10e9)], 0.01, 2, level="node", transport="tcp")
            + synthetic([(0, 1.0, 1e9)], 0.01, 3, level="node", transport="ucx"))
    fits = fit_groups(rows)
    assert set(fits) == {("core", "sm"), ("node", "tcp"), ("node", "ucx")}
    assert fits[("node", "tcp")].transport == "tcp"
    assert abs(fits[("node", "ucx")].regimes[0].alpha_us - 1.0) < 0.1
    with pytest.raises(UserError, match="mix"):
        fit_level(rows)
    with pytest.raises(UserError, match="transport settings"):
        fit_model(rows)
    model = fit_model(rows, transport="tcp")
    assert set(model.levels) == {"node"}


def test_errors_are_one_line() -> None:
    with pytest.raises(UserError, match="2 distinct message size"):
        fit_level([PingPong(1, 1.0), PingPong(2, 1.1), PingPong(2, 1.2)])
    with pytest.raises(UserError, match=r"latency_us: -1\.0"):
        fit_level([PingPong(1, 1.0), PingPong(2, -1.0), PingPong(4, 1.2)])
    with pytest.raises(UserError, match="latency_us: 0"):
        fit_level([PingPong(1, 1.0), PingPong(2, 0), PingPong(4, 1.2)])
    with pytest.raises(UserError, match="level: 'rack'"):
        fit_level([PingPong(1, 1.0, "rack")] * 3)
    with pytest.raises(UserError, match="does not grow"):
        fit_level([PingPong(1, 2.0), PingPong(2, 1.5), PingPong(4, 1.0)])
    with pytest.raises(UserError, match="no ping-pong rows"):
        fit_level([])
