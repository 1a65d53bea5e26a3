"""The readers of a program's output (launch/program.py) on arbitrary bytes, JSON of any
shape and finite-but-absurd numbers: they never raise, and what they let through is bounded
(strict JSON, times that can be times, numbers every reader can hold)."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.launch.program import (
    COUNTS,
    MAX_DEPTH,
    MAX_FIGURE,
    MAX_TIME_US,
    json_lines,
    number,
    out_of_bounds,
    parse_metrics,
    primary_us,
)

NAMES = st.sampled_from(["time_us", "avg_us", "min_us", "elapsed_s", "t_ms", "size_bytes",
                         "iterations", "warmup", "bandwidth_mbs", "g_us", "valid", "x", "",
                         "a\nb", "é_us"]) | st.text(max_size=8)
ABSURD = (st.floats(allow_nan=True, allow_infinity=True)
          | st.integers(min_value=-(10**400), max_value=10**400)
          | st.sampled_from([1e12, 1e12 + 1, -1e-300, 2**63, 2**31, 1 << 50, (1 << 50) + 1,
                             1e18, 1.0000001e18, -0.0])
          | st.booleans() | st.none() | st.text(max_size=5))
VALUES = st.recursive(ABSURD, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=12)
METRICS = st.dictionaries(NAMES, VALUES, max_size=6)


def _deep(depth: int) -> str:
    return '{"a": ' + "[" * depth + "]" * depth + "}"


def _text(metrics: dict[str, Any]) -> str:
    """A line as a program prints it: Python's json writes NaN, Infinity and huge integers."""
    return json.dumps(metrics)


LINES = (METRICS.map(_text) | st.integers(1, 5000).map(_deep)
         | st.binary(max_size=300).map(lambda b: b.decode("utf-8", "replace"))
         | st.text(alphabet=st.sampled_from(list('{}[]":,0123456789.eE+-naNIfinity tv_us\n')),
                   max_size=200))
OUTPUT = st.lists(LINES, max_size=5).map("\n".join)


def bounded(value: Any, depth: int = 0) -> bool:
    """Strict JSON within the limits: finite numbers of at most MAX_FIGURE in size."""
    if depth > MAX_DEPTH + 1:
        return False
    if isinstance(value, dict):
        return all(bounded(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(bounded(v, depth + 1) for v in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return math.isfinite(value) and abs(value) <= MAX_FIGURE
    return True


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OUTPUT)
def test_json_readers_never_raise_and_bounds_decide(text: str) -> None:
    metrics, why = parse_metrics(text, {})
    assert (metrics is None) == bool(why) and "\n" not in why
    for obj in [*json_lines(text), *([metrics] if metrics else [])]:
        problem = out_of_bounds(obj)
        assert "\n" not in problem
        if not problem:
            json.dumps(obj, allow_nan=False)  # strict JSON: every reader can read it
            assert bounded(obj)
            for name, high in COUNTS.items():
                value = number(obj, name)
                assert value is None or 0 <= value <= high


@settings(max_examples=250, deadline=None)
@given(METRICS, st.sampled_from([None, "time_us", "x", "elapsed_s", "t_ms"]))
def test_a_primary_time_is_a_time_or_a_reason(metrics: dict[str, Any],
                                             primary: str | None) -> None:
    us, why = primary_us(metrics, primary)
    assert "\n" not in why
    assert us is None or (0 <= us <= MAX_TIME_US and not why)
    for name in metrics:
        value = number(metrics, name)
        assert value is None or (math.isfinite(value) and abs(value) <= MAX_FIGURE)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.dictionaries(st.sampled_from(["t", "time_us", "n"]),
                                              st.sampled_from([r"t=(\S+)", r"(\d+)", r"x(y)?",
                                                               r"[a-z]+"]), max_size=3))
def test_regex_metrics_never_raise(text: str, patterns: dict[str, str]) -> None:
    metrics, why = parse_metrics(text, patterns)
    assert (metrics is None) == bool(why) and "\n" not in why
    if metrics is not None:
        out_of_bounds(metrics)
        primary_us(metrics, None)


def test_absurd_values_are_named_in_one_line() -> None:
    assert out_of_bounds({"time_us": -5}, None) == ("metric time_us: -5 is not a time "
                                                   "(valid: 0 to 1e+12 µs)")
    assert out_of_bounds({"x": 1, "latency": -1.5}, "latency").startswith(
        "metric latency: -1.5 is not a time")
    assert out_of_bounds({"g_us": -0.5}) == ""  # an estimate below zero (PLogP's gap)
    assert out_of_bounds({"g_us": -2e12}).startswith("metric g_us: -2e+12 is not a time")
    assert out_of_bounds({"iterations": 2**31}) == ("metric iterations: 2147483648 is out of "
                                                   "range (valid: 0 to 2147483647)")
    huge = out_of_bounds({"time_us": 10**400})
    assert huge.startswith("metric time_us: 1000000000000000… (401 characters) is not a time")
    assert out_of_bounds({"a\nb": math.inf}).startswith("metric 'a\\nb': inf is out of range")
    assert out_of_bounds({"nest": json.loads("[" * 18 + "]" * 18)}) == (
        "metric nest: nested deeper than 16 levels")
    assert out_of_bounds({"v": [1, {"w": math.nan}]}).startswith("metric v: nan is out of range")
    assert out_of_bounds({"blob": "x" * 70_000}).startswith("metrics: 70012 bytes of JSON")
    assert parse_metrics(_deep(100_000), {}) == (None, "no JSON object line on stdout")
    assert parse_metrics('{"time_us": NaN}', {})[0] is not None  # read, then bounded
    assert primary_us({"time_us": 10**400}, None)[1].startswith("metric time_us:")
