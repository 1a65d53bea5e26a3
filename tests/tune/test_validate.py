"""`tune validate`'s analysis and wording: compare's ratio in compare's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.analyse.columns import effect_text
from collbench.store import Store
from collbench.tune.rules import parse_rules
from collbench.tune.validate import analyse, render
from tests.tune.fakedata import write_store

# bcast at np=4: the file switches at every size (algorithms 6, 3, 2 from 0, 8K, 256K)
RULES = """\
rule-file-version-2
1
7
1
4
3
0      6 0 0     0
8192   3 0 32768 0
262144 2 4 0     0
"""


def _arms(coll: str, alg: str, size: int, nprocs: int) -> float:
    # the file halves the time up to 1 KiB and is 50 % slower at 64 KiB: a regression
    base = 10.0 + size / 100
    if alg == "default":
        return base
    return base * (1.5 if size == 65536 else 0.5)


@pytest.fixture(scope="module")
def validation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str]:
    store = write_store(tmp_path_factory.mktemp("v") / "res", mpi="openmpi",
                        version="5.0.11", collectives=["bcast"],
                        algorithms=[("default", 0), ("tuned", None)], sizes=[1, 1024, 65536],
                        nprocs=[4], repetitions=6, timing=_arms, noise=0.01)
    return store, RULES


def test_rows_carry_compares_ratio_and_words(validation: tuple[Store, str],
                                             tmp_path: Path) -> None:
    store, text = validation
    rules = parse_rules(text).rules
    assert rules is not None
    v = analyse(store, rules)
    assert [r.size for r in v.rows] == [1, 1024, 65536]
    small, _, big = v.rows
    assert small.ratio == pytest.approx(0.5, rel=0.03) and small.significant
    assert small.low is not None and small.high is not None and small.high < 1
    assert small.effect == effect_text(small.ratio, small.low, small.high, "default")
    assert small.effect.startswith("2.0") and small.effect.endswith("× faster than default")
    assert big.regression and big.effect.endswith("× slower than default")
    assert v.regressions == (big,)
    g = v.geomean()
    assert g is not None and g[0] == pytest.approx((0.5 * 0.5 * 1.5) ** (1 / 3), rel=0.03)


def test_render_speaks_as_compare(validation: tuple[Store, str]) -> None:
    store, text = validation
    rules = parse_rules(text).rules
    assert rules is not None
    out = render(analyse(store, rules))
    assert "speedup" not in out and "speed-up" not in out
    assert "× faster than default" in out and "default median_avg_us" in out
    assert "tuned, all sizes: " in out and "(geometric mean of 3 sizes)" in out
    assert "REGRESSION: the tuned file is significantly slower than the default at 1 size(s)" \
        in out and "× slower than default)" in out
