"""What the runner makes of a kernel output line: its numbers bounded, the component that
served it recorded, and a forced setting that did not take effect a failed point
(runner.build_rows; the real runs: tests/kernel/test_coll_preference.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from collbench.launch.base import LaunchOutcome
from collbench.plan import Launch, Point
from collbench.runner import RowContext, build_rows

CTX = RowContext("t", "local", "openmpi-5.0.11", "5.0.11")
OK = LaunchOutcome("ok", [], 0, 0.1)


def launch(alg: int = 0, component: str | None = None) -> Launch:
    point = Point("bcast", "binomial" if alg else "default", alg, 0, 0, 64, 10, 1)
    return Launch(launch_id="0000-t", repetition=0, nprocs=4, mapping="core", binding="core",
                  oversubscribe=False, mca=(), env=(), swept=(), selection="mpit",
                  points=(point,), timeout_s=60.0, validate=False, samples=False,
                  component=component)


def line(**kw: Any) -> dict[str, Any]:
    return {"collective": "bcast", "size_bytes": 64, "nprocs": 4, "avg_us": 5.0,
            "min_us": 4.0, "max_us": 6.0, "median_us": 5.0, "iterations": 10, "warmup": 1,
            "status": "ok", **kw}


@pytest.mark.parametrize("value", [-1.0, math.inf, 1e13])
def test_a_time_that_cannot_be_is_a_failed_point_naming_it(value: float) -> None:
    (row,) = build_rows(launch(), [line(avg_us=value)], OK, CTX, 2)
    assert row["status"] == "failed" and row["avg_us"] is None
    assert "kernel output" in row["error"] and "avg_us" in row["error"]


def test_the_component_that_served_is_the_rows() -> None:
    (row,) = build_rows(launch(), [line(component="han", sub_components="libnbc,tuned")],
                        OK, CTX, 2)
    assert (row["status"], row["component"]) == ("ok", "han")
    assert '"sub_components": "libnbc,tuned"' in row["metrics"]


def test_a_forced_algorithm_han_served_is_a_failed_point_of_that_variant() -> None:
    (row,) = build_rows(launch(6), [line(component="han")], OK, CTX, 2)
    assert (row["status"], row["component"], row["algorithm"]) == ("failed", "tuned",
                                                                   "binomial")
    assert "coll/han served bcast, not coll/tuned" in row["error"]
    (row,) = build_rows(launch(0, "han"), [line(component="tuned")], OK, CTX, 2)
    assert (row["status"], row["component"]) == ("failed", "han")
