"""What the runner makes of a kernel output line: its numbers bounded, the component that
served it recorded, and a forced setting that did not take effect a failed point
(runner.build_rows; the real runs: tests/kernel/test_coll_preference.py)."""

from __future__ import annotations

import json
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


def han_launch(algorithm: str, alg_id: int, component: str | None = "han") -> Launch:
    point = Point("bcast", algorithm, alg_id, 0, 0, 64, 10, 1)
    mca = {"coll_han_use_bcast_algorithm": algorithm.split("+")[0], "coll_han_priority": "100",
           "coll_han_bcast_low_module": "1"}
    return Launch(launch_id="0000-t", repetition=0, nprocs=4, mapping="core", binding="core",
                  oversubscribe=False, mca=tuple(sorted(mca.items())), env=(), swept=(),
                  selection="launch", points=(point,), timeout_s=60.0, validate=False,
                  samples=False, component=component)


def test_a_han_setting_is_judged_by_what_ran_below_han() -> None:
    # ran as asked: han served, sm on the low level; han's keys are not parameters
    (row,) = build_rows(han_launch("intra+low=sm", 1),
                        [line(component="han", sub_components="tuned,sm")], OK, CTX, 2)
    assert (row["status"], row["component"], row["algorithm"]) == ("ok", "han", "intra+low=sm")
    assert json.loads(row["params"])["mca"] == {}
    # its algorithm id (han's) is no forced coll/tuned algorithm: no tuned check below han
    (row,) = build_rows(han_launch("simple", 2), [line(component="han", sub_components="sm")],
                        OK, CTX, 2)
    assert row["status"] == "ok"
    assert json.loads(row["params"])["mca"] == {"coll_han_bcast_low_module": "1"}  # not its
    # han did not serve, the low level was not sm, simple ran han's non-blocking level
    for name, got, why in (
            ("simple", line(component="tuned"), "coll/tuned served bcast, not coll/han"),
            ("intra+low=sm", line(component="han", sub_components="tuned,libnbc"),
             "low level did not use coll/sm"),
            ("simple", line(component="han", sub_components="tuned,libnbc"),
             "not its simple algorithm")):
        (row,) = build_rows(han_launch(name, 1), [got], OK, CTX, 2)
        assert (row["status"], row["component"], row["algorithm"]) == ("failed", "han", name)
        assert why in row["error"], row["error"]
    # the same name without han asked for is no han setting (nothing of han's is judged)
    (row,) = build_rows(han_launch("simple", 0, None), [line(component="han")], OK, CTX, 2)
    assert row["status"] == "ok"
