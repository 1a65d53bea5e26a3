"""Choices per size range that do not chase noise: the fewest switches within a regret bound.

`tune` (rules files) and `compare --summary` (recommendations) smooth with this one
function, so both say the same thing about the same data. It sits in analyse, below tune,
because compare needs it too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collbench.analyse.compare import Best, Comparison, PointStat, RatioStat

Picked = tuple[int, PointStat, float | None]  # (size, chosen point, its ratio to the baseline)


@dataclass(frozen=True)
class Smoothing:
    """What choosing with a penalty on switching did to one context's choices."""

    switches_before: int  # changes of choice between neighbouring sizes, size by size
    switches_after: int
    regret: tuple[tuple[int, float], ...]  # (size, chosen / unsmoothed choice - 1) where > 0

    @property
    def max_regret(self) -> float:
        return max((r for _, r in self.regret), default=0.0)

    @property
    def removed(self) -> int:
        return self.switches_before - self.switches_after


def smooth(picked: Sequence[Picked], bests: Sequence[Best], comparison: Comparison,
           ratios: Mapping[int, RatioStat], *, max_regret: float, min_gain: float = 0.0,
           significance: bool = True) -> tuple[list[Picked], Smoothing]:
    """The fewest switches between neighbouring sizes whose regret stays within bound.

    At each size the eligible choices are the baseline, every variant the evidence allows
    (significantly faster than the baseline, and by min_gain) and, to bridge gaps, variants
    whose ratio interval to the baseline stays below 1 + max_regret (not credibly slower);
    among them, any at most `max_regret` slower than the choice made without smoothing may
    be taken (that choice always may). Dynamic programming over sizes minimises the number
    of switches, then the summed log regret, so noise that flips the winner between
    neighbouring sizes no longer makes the choice switch back and forth (the oversubscribed
    quickstart's bcast switched 9 times)."""
    base = comparison.baseline
    steps: list[dict[str, tuple[PointStat, float | None, float]]] = []
    for (_, chosen, ratio), b in zip(picked, bests, strict=True):
        pts = [p for p in comparison.points if p.size_key == b.key]
        eligible: dict[str, tuple[PointStat, float | None]] = {chosen.label: (chosen, ratio)}
        for p in pts:
            rs = ratios.get(id(p))
            if p.label == base:
                eligible.setdefault(p.label, (p, 1.0))
            elif not significance or (rs is not None and rs.significant
                                      and rs.ratio < 1 - min_gain):
                eligible.setdefault(p.label, (p, rs.ratio if rs else None))
            elif rs is not None and rs.ci_high is not None and rs.ci_high <= 1 + max_regret:
                # Not credibly slower than the baseline here: it may bridge the sizes
                # between those where it was significantly faster, instead of switching
                # back and forth with the noise.
                eligible.setdefault(p.label, (p, rs.ratio))
        # Regret is measured against what would be chosen without smoothing.
        ref = chosen.value
        steps.append({label: (p, r, p.value / ref - 1 if ref > 0 else 0.0)
                      for label, (p, r) in eligible.items()
                      if ref <= 0 or p.value <= ref * (1 + max_regret)})
    # cost[label] = (switches, summed log regret) of the best path ending in label
    cost: dict[str, tuple[int, float]] = {k: (0, math.log1p(v[2])) for k, v in steps[0].items()}
    back: list[dict[str, str]] = []
    for step in steps[1:]:
        here: dict[str, tuple[int, float]] = {}
        links: dict[str, str] = {}
        for label, (_, _, lost) in step.items():
            prev = min(cost, key=lambda k: (cost[k][0] + (k != label), cost[k][1]))
            switches, total = cost[prev]
            here[label] = (switches + (prev != label), total + math.log1p(lost))
            links[label] = prev
        cost, back = here, [*back, links]
    label = min(cost, key=lambda k: cost[k])
    path = [label]
    for links in reversed(back):
        label = links[label]
        path.append(label)
    path.reverse()
    out: list[Picked] = []
    regret: list[tuple[int, float]] = []
    for (size, _, _), step, label in zip(picked, steps, path, strict=True):
        point, ratio_of, lost = step[label]
        out.append((size, point, ratio_of))
        if lost > 1e-12:
            regret.append((size, lost))
    before = sum(a[1].label != b[1].label for a, b in itertools.pairwise(picked))
    after = sum(a[1].label != b[1].label for a, b in itertools.pairwise(out))
    return out, Smoothing(before, after, tuple(regret))
