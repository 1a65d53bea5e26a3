"""Size expressions: OSU-style ranges, binary suffixes, lists, and the inverse format."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.errors import UserError
from collbench.sizes import SizeExpr, format_size, parse_sizes


@pytest.mark.parametrize(("expr", "expected"), [
    ("1:1M", [2**k for k in range(21)]),
    ("0:8", [0, 1, 2, 4, 8]),
    ("3:100", [3, 6, 12, 24, 48, 96]),  # OSU doubles from MIN; MAX only when reached
    ("4K", [4096]),
    ("4K:4K", [4096]),
    (65536, [65536]),
    (0, [0]),
    ("1KiB", [1024]), ("1kb", [1024]), ("1g", [1024**3]), (" 8 M ", [8 * 1024**2]),
    ([1, "4K", 65536], [1, 4096, 65536]),
    (["1:4", 2, "8"], [1, 2, 4, 8]),  # ranges inside lists, duplicates merged
    ([65536, 1], [1, 65536]),  # always ascending
])
def test_parse_sizes(expr: SizeExpr, expected: list[int]) -> None:
    assert parse_sizes(expr, "spec.toml: measure.sizes") == expected


@pytest.mark.parametrize(("expr", "problem"), [
    ("1:1Q", "'1Q' is not a size"),
    ("8:1", "runs backwards"),
    (-1, "negative"),
    ([], "no sizes given"),
    ("", "is not a size"),
    ("1.5K", "is not a size"),
    ([1, True], "expected a byte count"),
])
def test_parse_sizes_errors(expr: SizeExpr, problem: str) -> None:
    with pytest.raises(UserError) as e:
        parse_sizes(expr, "spec.toml: measure.sizes")
    msg = str(e.value)
    assert msg.startswith("spec.toml: measure.sizes: ") and problem in msg and "\n" not in msg


@pytest.mark.parametrize(("n", "text"), [
    (0, "0"), (3, "3"), (1024, "1K"), (1536, "1536"), (3072, "3K"), (2**20, "1M"),
    (2**30, "1G"), (5 * 2**30, "5G"), (1023, "1023"),
])
def test_format_size(n: int, text: str) -> None:
    assert format_size(n) == text


@given(st.integers(min_value=0, max_value=2**30))
def test_format_then_parse_round_trips(n: int) -> None:
    assert parse_sizes(format_size(n), "x") == [n]


@given(st.integers(min_value=0, max_value=30), st.integers(min_value=0, max_value=30))
def test_ranges_are_consecutive_powers_of_two(a: int, b: int) -> None:
    low, high = sorted((a, b))
    sizes = parse_sizes(f"{format_size(2**low)}:{format_size(2**high)}", "x")
    assert sizes == [2**k for k in range(low, high + 1)]
    assert all(y == 2 * x for x, y in itertools.pairwise(sizes))


@pytest.mark.parametrize("expr", ["2G", 2**30 + 1, "1:2G", "99999999999999999999"])
def test_sizes_above_1g_are_refused(expr: str | int) -> None:
    with pytest.raises(UserError, match=r"x: .*(above 1G|not a size)"):
        parse_sizes(expr, "x")
