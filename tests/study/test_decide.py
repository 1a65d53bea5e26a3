"""A stage's verdict from stored rows: scores per repetition, tests, the kept setting."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from collbench.records import make_row
from collbench.store import Store
from collbench.study.decide import Decision, decide
from collbench.study.spec import Parameter

POINTS = [("bcast", 8), ("bcast", 65536), ("allreduce", 8), ("allreduce", 65536)]
MCA = Parameter("btl_sm_eager_limit", "mca", "4096", ("8192", "32768"), "4096")
BIND = Parameter("bind_to", "launcher", "core", ("none",), "core")


def stage(root: Path, param: Parameter, speed: dict[str, float | tuple[float, float]],
          reps: int = 10, failed: tuple[str, int] | None = None, seed: int = 1) -> Store:
    """A stage folder: every setting × repetition × point; `speed` scales the latency (a
    pair: at 8 B and at 64 KiB)."""
    rng = random.Random(seed)
    store = Store(root)
    store.create({"name": "stage", "seed": seed}, "# stage\n", {"launches": []}, {})
    for value, factors in speed.items():
        for rep in range(reps):
            lid = f"{value}-{rep}"
            rows = []
            for i, (coll, size) in enumerate(POINTS):
                factor = factors if isinstance(factors, float) else factors[size > 1024]
                v = (1.0 + size / 1000) * factor * math.exp(rng.gauss(0, 0.05))
                bad = failed == (value, rep) and i == 0
                swept = {param.name: value} if param.kind == "mca" else {}
                rows.append(make_row(
                    campaign="stage", launch_id=lid, repetition=rep, backend="local",
                    source="kernel", mpi="openmpi", mpi_version="5.0.11", collective=coll,
                    algorithm="default", algorithm_id=0, segsize=0, fanout=0, selection="none",
                    params=json.dumps({"env": {}, "mca": swept, "swept": swept}), nprocs=2,
                    nodes=1, ppn=2, mapping="core",
                    binding=value if param.kind == "launcher" else "core", size_bytes=size,
                    iterations=100, warmup=10, avg_us=None if bad else v, min_us=v, max_us=v,
                    median_us=v, status="timeout" if bad else "ok", validated=False))
            store.write_launch(lid, rows, {"launch_id": lid, "status": "ok"})
    return store


def test_a_significantly_faster_setting_is_kept(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": 0.8, "32768": 1.0})
    d = decide(store, MCA, "avg_us", 0.95, 0.0, 10)
    assert d.kept == "8192" and d.points == 4
    base, fast, same = d.settings
    assert base.is_baseline and base.ratio == 1.0
    assert fast.better is True and fast.ratio == pytest.approx(0.8, rel=0.05)
    assert fast.ci_high is not None and fast.ci_high < 1 and fast.p_holm is not None
    assert same.better is False
    assert len(fast.scores) == 10 and fast.planned == 10
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))) == d


def test_nothing_better_keeps_the_baseline(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": 1.0, "32768": 1.3})
    d = decide(store, MCA, "avg_us", 0.95, 0.0, 10)
    assert d.kept == "4096" and "no setting significantly better" in d.reason
    assert [s.better for s in d.settings[1:]] == [False, False]


def test_a_significantly_slower_setting_is_called_worse(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": 1.0, "32768": 3.0})
    d = decide(store, MCA, "avg_us", 0.95, 0.0, 10)
    slow = d.settings[2]
    assert slow.better is False and slow.worse is True and slow.ratio == pytest.approx(3, 0.1)
    assert d.settings[1].worse is False
    assert d.kept == "4096" and "significantly worse: 32768" in d.reason


def test_each_size_range_is_decided_on_its_own(tmp_path: Path) -> None:
    """8192 halves the small messages and leaves large ones alone: kept, though the mean
    over every size may not show it; 32768 helps small ones but doubles large ones: not."""
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": (0.5, 1.0), "32768": (0.4, 2.0)})
    d = decide(store, MCA, "avg_us", 0.95, 0.0, 10)
    assert [b.name for b in d.bands] == ["<= 1 KiB", ">= 64 KiB"]
    small, large = d.bands
    assert small.points == large.points == 2
    assert [s.better for s in small.settings[1:]] == [True, True]
    assert [s.worse for s in large.settings[1:]] == [False, True]
    assert d.kept == "8192" and "<= 1 KiB" in d.reason
    assert Decision.from_json(json.loads(json.dumps(d.to_json()))) == d
    mixed = decide(stage(tmp_path / "m", MCA, {"4096": 1.0, "8192": (0.5, 2.0),
                                                 "32768": 1.0}), MCA, "avg_us", 0.95, 0.0, 10)
    assert mixed.kept == "4096" and "8192 better at <= 1 KiB but worse at" in mixed.reason


def test_min_gain_demands_a_large_enough_gain(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": 0.8, "32768": 1.0})
    assert decide(store, MCA, "avg_us", 0.95, 0.3, 10).kept == "4096"
    assert decide(store, MCA, "avg_us", 0.95, 0.1, 10).kept == "8192"


def test_incomplete_repetitions_are_left_out(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": 0.8, "32768": 1.0},
                  failed=("8192", 3))
    d = decide(store, MCA, "avg_us", 0.95, 0.0, 10)
    assert len(d.settings[1].scores) == 9 and d.settings[1].planned == 10
    assert d.kept == "8192"


def test_launcher_parameters_are_read_from_the_binding_column(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", BIND, {"core": 1.0, "none": 1.5}, reps=6)
    d = decide(store, BIND, "avg_us", 0.95, 0.0, 6)
    assert d.kept == "core"
    assert d.settings[1].ratio == pytest.approx(1.5, rel=0.05) and d.settings[1].better is False


def test_too_few_repetitions_cannot_change_anything(tmp_path: Path) -> None:
    store = stage(tmp_path / "s", MCA, {"4096": 1.0, "8192": 0.5, "32768": 1.0}, reps=1)
    d = decide(store, MCA, "avg_us", 0.95, 0.0, 1)
    assert d.kept == "4096" and "nothing could be tested" in d.reason
    assert all(s.better is None for s in d.settings[1:])
