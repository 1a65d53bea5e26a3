"""What a kernel output line may put in a row, and when a measured point is no
measurement of its row: numbers out of bounds, or a setting that did not run (the component
that served it is not the one its variant names; docs/components.md). Split from runner.py,
which builds the rows."""

from __future__ import annotations

import json
from typing import Any

from collbench.catalog import components
from collbench.catalog.collectives import COLLECTIVES, Kind
from collbench.launch import program as programs
from collbench.plan import Launch, Point, han_levels

# Keys of a kernel output line that go into the row's metrics column: under SimGrid,
# whose code ran ("port" or "smpi") and what a "default" point resolved to; with a real
# MPI, "coll_preference": "^han" when a forced coll/tuned algorithm was measured on a
# communicator coll/han may not take (the kernel's new_measure_comm says why), and
# "sub_components": the components coll/han's sub-communicators used, "sub_algorithms":
# the coll/tuned algorithm ids run on them by communicator size (the probe's).
KERNEL_METRICS = ("implementation", "resolved_algorithm", "resolved_algorithm_id",
                  "coll_preference", "sub_components", "sub_algorithms")


# Figures of [measure] timing = "completion" (docs/statistics.md, "Completion time"): the
# median completion time, its 95% interval [low, high], iterations with a late rank, the
# rank-averaged call time of the synchronised loop and the clock synchronisation error.
# [measure] precision: the relative half-width of the median's 95% CI reached.
TIMING_METRICS = ("completion_us", "completion_ci", "completion_late", "synced_avg_us",
                  "sync_error_us", "precision")


def kernel_metrics(got: dict[str, Any]) -> str | None:
    """The metrics JSON of one kernel output line (None when it has none of the keys)."""
    metrics = {k: got[k] for k in KERNEL_METRICS if k in got
               and (k not in ("sub_components", "sub_algorithms") or got[k])}
    metrics.update({k: got[k] for k in TIMING_METRICS if got.get(k) is not None})
    return json.dumps(metrics, sort_keys=True) if metrics else None


# A non-blocking point's figures (kernel output keys, OSU's names: docs/nonblocking.md).
NONBLOCKING_METRICS = ("overall_us", "compute_us", "init_us", "test_us", "wait_us", "pure_us",
                       "min_comm_us", "max_comm_us", "overlap_pct", "overlap_imb_pct",
                       "overlap_raw_pct", "slowdown_us", "max_hidden_us", "max_hidden_pct",
                       "hide_bound_us")


def nonblocking_metrics(point: Point, got: dict[str, Any]) -> dict[str, Any]:
    """A non-blocking point's metrics: its settings (test_calls, compute, hide_steps: from
    the plan, so that failed points group with their settings too) and the figures the
    kernel measured; {} for a blocking point."""
    if point.test_calls is None:
        return {}
    out: dict[str, Any] = {"test_calls": point.test_calls, "compute": point.compute}
    if point.hide_steps:
        out["hide_steps"] = point.hide_steps
    out.update({k: got[k] for k in NONBLOCKING_METRICS if got.get(k) is not None})
    return out


def with_metrics(metrics: str | None, extra: dict[str, Any]) -> str | None:
    """`metrics` (a JSON object or None) with the keys of `extra` added; keys already there
    are kept as they are."""
    if not extra:
        return metrics
    merged = {**extra, **(json.loads(metrics) if metrics else {})}
    return json.dumps(merged, sort_keys=True)


# The kernel's numbers stored in a row or its metrics (besides strings, lists, booleans).
KERNEL_FIGURES = ("avg_us", "min_us", "max_us", "median_us", "bandwidth_mbs", "iterations",
                  "warmup", *TIMING_METRICS, *NONBLOCKING_METRICS)


def bounded(got: dict[str, Any]) -> dict[str, Any]:
    """A measured point whose numbers cannot be (a time that is negative, not finite or
    above 11 days; another figure beyond its column) is a failed point that says which:
    every number is bounded before it is stored, the kernel's as a program's."""
    if got.get("status") != "ok":
        return got
    figures = {k: got[k] for k in KERNEL_FIGURES if k in got and got[k] is not None
               and not isinstance(got[k], str | list | bool)}
    why = programs.out_of_bounds(figures, "avg_us")
    return {"status": "failed", "error": f"kernel output: {why}"} if why else got


def han_setting(launch: Launch, point: Point) -> components.HanSetting | None:
    """The coll/han setting a point of a launch that asks for han measures (None: none)."""
    if launch.component != "han":
        return None
    return components.han_setting_of(point.algorithm)


def launch_forcing_mca(launch: Launch) -> frozenset[str]:
    """The MCA keys that force the launch's coll/han setting (one per launch: the plan
    gives each forced variant its own): left out of the params column, as coll/tuned's."""
    keys: set[str] = set()
    for point in launch.points:
        setting = han_setting(launch, point)
        if setting is not None:
            keys |= set(setting.mca(point.collective, point.segsize))
            keys |= set(han_levels.MCA_KEYS) if setting.levels else set()
    return frozenset(keys)


def served(launch: Launch, point: Point, got: dict[str, Any], mpi: str
           ) -> tuple[str, dict[str, Any]]:
    """The point's component, and its output made a failed point when what served it is
    not what its row says (a label is what ran): the component (the probe's), and for a
    coll/han setting what ran below han (components.han_problem)."""
    p2p = COLLECTIVES[point.collective].kind is Kind.P2P
    han = han_setting(launch, point)
    forced = bool(point.algorithm_id) and not p2p and han is None
    forced_tuned = forced and point.test_calls is None
    forced_nb = forced and point.test_calls is not None
    want = components.expected(launch.component, forced_tuned, forced_nb)
    component = components.row_component(mpi, p2p, got, want)
    if got.get("status") == "ok" and not p2p:
        problem = components.served_problem(point.collective, point.algorithm,
                                            launch.component, forced_tuned, forced_nb, got)
        if problem is None and han is not None:  # e.g. han's levels of the same size
            problem = components.levels_problem(han, launch.nprocs, launch.ppn)
        if problem is None and han is not None and got.get("component") == "han":
            problem = components.han_problem(point.collective, han, got)
        if problem is None and han is not None and got.get("component") == "han" \
                and launch.ppn:  # each level ran its forced tuned algorithm (the probe's)
            problem = han_levels.traced_problem(han, point.collective, launch.nprocs,
                                                launch.ppn, got)
        if problem:  # the row is the variant asked for, failed; the error says what ran
            got = {"status": "failed", "error": problem}
            component = want or component
    return component, got
