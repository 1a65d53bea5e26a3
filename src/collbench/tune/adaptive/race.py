"""Racing at one (collective, process count, size): repeat until the answer is clear.

Every candidate algorithm is measured in lockstep, one repetition per round. From
`min_reps` on, each round is a *look*: a candidate is dropped when it is significantly
slower than the current leader (lowest median) — exact one-sided Mann-Whitney at
alpha_drop / L, where L = max_reps - min_reps + 1 is the number of looks (Bonferroni over
the looks: the correction for peeking, so that the chance of ever dropping an algorithm
that is not slower stays below alpha_drop however often we look). The default is never
dropped, and neither is the leader: the rule that follows (switch away from the default
only where significantly faster, tune/select.py) needs both at full strength. The race
ends when one candidate is left or every survivor has max_reps repetitions.

Screening (`screen`, optional) drops earlier, from the first repetition: a candidate whose
fastest repetition is `screen` times slower than the leader's slowest. No test at a few
repetitions can see that (exact Mann-Whitney cannot reach alpha_drop / L below 4 against
4), yet a gap of that size is no noise here (docs/adaptive.md measures how often it was).

`recommended` applies collbench compare's rule (exact two-sided Mann-Whitney against the
default, Holm over the algorithms tested at this size, Hodges-Lehmann ratio interval) to
what has been measured, with the same statistics functions (analyse.stats).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from collbench.analyse.stats import holm, log_ratio_ci, mann_whitney, median
from collbench.catalog.algorithms import DEFAULT


@dataclass(frozen=True)
class RaceConfig:
    min_reps: int = 3
    max_reps: int = 6
    alpha_drop: float = 0.2  # over all looks, per comparison
    confidence: float = 0.95  # of the recommendation (as collbench compare / tune)
    significance: bool = True  # False: recommend the fastest, untested (tune's option)
    # Screening: drop a candidate from its first repetition on when its fastest repetition
    # is `screen` times slower than the leader's slowest (None: statistical drops only)
    screen: float | None = None
    # Practical drop: from min_reps on, a candidate whose median is more than `gap` above
    # the leader's (0.1 = 10 %) is dropped untested (None: statistical drops only)
    gap: float | None = None
    # Futility: from min_reps on, a candidate (the leader too) whose median is not at least
    # `futile` below the default's (0.03 = 3 %) is dropped: switching to it would gain less
    futile: float | None = None

    @property
    def looks(self) -> int:
        return max(1, self.max_reps - self.min_reps + 1)


def slower_p(x: list[float], y: list[float]) -> float:
    """One-sided exact p-value for "x tends to be slower than y" (Mann-Whitney)."""
    test = mann_whitney(x, y)
    half = test.p_value / 2
    return half if test.u > len(x) * len(y) / 2 else 1 - half


@dataclass
class Race:
    size: int
    candidates: tuple[str, ...]  # algorithm labels; DEFAULT among them when measured
    config: RaceConfig
    values: dict[str, list[float]] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)  # label -> repetitions when dropped
    exhausted: set[str] = field(default_factory=set)  # no further value can be had

    def __post_init__(self) -> None:
        for label in self.candidates:
            self.values.setdefault(label, [])

    @property
    def alive(self) -> list[str]:
        return [c for c in self.candidates if c not in self.dropped]

    def _open(self) -> list[str]:
        """Survivors that can still be measured."""
        return [c for c in self.alive if c not in self.exhausted
                and len(self.values[c]) < self.config.max_reps]

    def done(self) -> bool:
        return len(self.alive) <= 1 or not self._open()

    def wanted(self) -> list[str]:
        """The labels to measure once more in the next round (lockstep: the least-measured)."""
        if self.done():
            return []
        open_ = self._open()
        least = min(len(self.values[c]) for c in open_)
        return [c for c in open_ if len(self.values[c]) == least]

    def add(self, label: str, value: float | None) -> None:
        if value is None:
            self.exhausted.add(label)
        else:
            self.values[label].append(value)

    def leader(self) -> str | None:
        measured = [c for c in self.alive if self.values[c]]
        if not measured:
            return None
        return min(measured, key=lambda c: (median(self.values[c]), c != DEFAULT, c))

    def look(self) -> None:
        """Drop the survivors that are significantly (or, with the cutters, clearly) slower
        than the leader, and with `futile` those not faster than the default by enough."""
        self._futility()  # first: it may drop the leader, and the others face the next one
        lead = self.leader()
        if lead is None:
            return
        level = self.config.alpha_drop / self.config.looks
        screen, gap = self.config.screen, self.config.gap
        for c in self.alive:
            if c in (lead, DEFAULT) or not self.values[c]:
                continue
            if screen is not None and min(self.values[c]) > screen * max(self.values[lead]):
                self.dropped[c] = len(self.values[c])
                continue
            if len(self.values[c]) < self.config.min_reps:
                continue
            if len(self.values[lead]) < self.config.min_reps:
                continue
            if gap is not None and median(self.values[c]) > (1 + gap) * median(self.values[lead]):
                self.dropped[c] = len(self.values[c])
                continue
            if slower_p(self.values[c], self.values[lead]) <= level:
                self.dropped[c] = len(self.values[c])
        # A candidate with no value at all (failed from the start) cannot win.
        for c in self.alive:
            if not self.values[c] and c in self.exhausted and c != DEFAULT:
                self.dropped[c] = 0

    def _futility(self) -> None:
        """Drop every candidate not `futile` faster than the default (medians)."""
        futile, base = self.config.futile, self.values.get(DEFAULT)
        if futile is None or not base or len(base) < self.config.min_reps:
            return
        for c in self.alive:
            if c != DEFAULT and len(self.values[c]) >= self.config.min_reps \
                    and median(self.values[c]) > (1 - futile) * median(base):
                self.dropped[c] = len(self.values[c])

    def recommended(self) -> str | None:
        """collbench compare's recommendation from the values so far (see module doc)."""
        measured = {c: v for c, v in self.values.items() if v}
        if not measured:
            return None
        winner = min(measured, key=lambda c: (median(measured[c]), c != DEFAULT, c))
        base = measured.get(DEFAULT)
        if base is None or winner == DEFAULT or not self.config.significance:
            return winner
        if len(base) < 2:
            return winner if len(measured[winner]) < 2 else DEFAULT
        alpha = 1 - self.config.confidence
        tested = {c: v for c, v in measured.items() if c != DEFAULT and len(v) >= 2}
        adjusted = dict(zip(tested, holm([mann_whitney(v, base).p_value
                                          for v in tested.values()]), strict=True))
        faster = []
        for c, v in tested.items():
            hl = log_ratio_ci(v, base, self.config.confidence)
            ratio = median(v) / median(base)
            if adjusted[c] < alpha and hl is not None and hl[1].high < 1 and ratio < 1:
                faster.append(c)
        if winner in faster:
            return winner
        return min(faster, key=lambda c: median(measured[c])) if faster else DEFAULT
