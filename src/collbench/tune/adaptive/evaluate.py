"""How good an adaptive run was, judged on the exhaustive data it replayed.

Regret at a size = the exhaustive median latency of the algorithm the rules choose there /
the exhaustive median of the fastest algorithm at that size (1 = no loss). It is reported
for the adaptive rules and, as the yardstick, for the rules the exhaustive data itself gives
(above 1 where the fastest was not significantly faster than the default, which then stays).
Relative regret at a size = the adaptive rules' regret / the exhaustive rules' regret, i.e.
the exhaustive median of the adaptive choice / that of the exhaustive rules' choice; the
target "≤ 3 % regret" (docs/adaptive.md) is its median over sizes ≤ 1.03.
Measurement saved = 1 - (point repetitions, or kernel time, measured adaptively) / (the same
for the exhaustive sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from collbench.analyse.compare import algorithm_label
from collbench.analyse.stats import median
from collbench.tune.adaptive.engine import Tally
from collbench.tune.adaptive.replay import Recorded
from collbench.tune.select import Choice, Selection


@dataclass(frozen=True)
class SizeRegret:
    collective: str
    nprocs: int
    size: int
    best: str  # fastest algorithm in the exhaustive data (lowest median)
    adaptive: str  # what the adaptive rules run at this size
    exhaustive: str  # what the rules from the exhaustive data run
    regret: float  # adaptive choice / best, exhaustive medians
    exhaustive_regret: float

    @property
    def relative(self) -> float:
        """Regret of the adaptive choice relative to the exhaustive rules' choice:
        exhaustive median of the adaptive choice / that of the exhaustive choice."""
        return self.regret / self.exhaustive_regret


@dataclass(frozen=True)
class Evaluation:
    sizes: tuple[SizeRegret, ...]
    points_saved: float  # fraction of point repetitions not measured
    kernel_saved: float  # fraction of kernel time not spent
    adaptive_points: int
    exhaustive_points: int
    rounds: int

    @property
    def agreement(self) -> float:
        """Fraction of sizes where adaptive and exhaustive rules choose the same algorithm."""
        return sum(s.adaptive == s.exhaustive for s in self.sizes) / max(1, len(self.sizes))

    def regrets(self) -> list[float]:
        return [s.regret for s in self.sizes]

    def relative(self) -> list[float]:
        return [s.relative for s in self.sizes]

    @property
    def kernel_factor(self) -> float:
        """Exhaustive kernel time / adaptive kernel time (10 = ten times less)."""
        return 1 / (1 - self.kernel_saved) if self.kernel_saved < 1 else float("inf")


def label_at(choices: Sequence[Choice], size: int) -> str:
    """The label a table of choices runs at `size` (the last threshold <= size)."""
    chosen = choices[0]
    for c in choices:
        if c.threshold <= size:
            chosen = c
    return algorithm_label(chosen.algorithm, chosen.segsize, chosen.fanout)


def evaluate(recorded: Recorded, adaptive: Selection, exhaustive: Selection,
             tally: Tally) -> Evaluation:
    out = []
    for (coll, nprocs), (sizes, labels) in recorded.contexts().items():
        if (coll, nprocs) not in adaptive.tables or (coll, nprocs) not in exhaustive.tables:
            continue
        for size in sizes:
            med = {lab: recorded.median((coll, nprocs, lab, size)) for lab in labels
                   if (coll, nprocs, lab, size) in recorded.rows}
            best = min(med, key=lambda lab: med[lab])
            a = label_at(adaptive.tables[(coll, nprocs)], size)
            e = label_at(exhaustive.tables[(coll, nprocs)], size)
            out.append(SizeRegret(coll, nprocs, size, best, a, e,
                                  med.get(a, float("nan")) / med[best],
                                  med.get(e, float("nan")) / med[best]))
    total_k = recorded.kernel_us()
    return Evaluation(tuple(out), 1 - tally.measured / max(1, recorded.points()),
                      1 - tally.kernel_us / total_k if total_k else 0.0, tally.measured,
                      recorded.points(), tally.rounds)


def summary(values: Sequence[float]) -> tuple[float, float]:
    """(median, max) of regrets."""
    return median(values), max(values)
