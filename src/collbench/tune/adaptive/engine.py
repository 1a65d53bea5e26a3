"""Where to measure: a coarse size grid first, then bisection only where the answer changes.

Per (collective, process count):
1. Coarse grid: every `stride`-th size of the requested list, and the last one. Every
   algorithm races there (race.py): this is the safety net that sees every algorithm —
   unless a model prunes it at that size (`Config.prune`, prune.py).
2. Refinement: between two neighbouring measured sizes whose recommendations differ, the
   middle size races — among the algorithms that survived at either neighbour, plus the
   default. An algorithm dropped at both neighbours is dominated there and is not measured
   in between. Bisection repeats until the crossover lies between adjacent sizes.
3. Between neighbours that agree, the sizes in between are not measured: they take the
   neighbours' answer. (This assumes no algorithm wins only inside a stretch of `stride`
   sizes while losing at both ends; the coarser the grid, the bolder the assumption.)

All contexts advance in lockstep so that one round of measurements is one batch (one launch
per process count in live mode).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from collbench.catalog.algorithms import DEFAULT
from collbench.tune.adaptive.race import Race, RaceConfig

Context = tuple[str, int]  # (collective, nprocs)
Request = tuple[str, int, str, int]  # (collective, nprocs, algorithm label, size)


@dataclass(frozen=True)
class Observation:
    value_us: float  # the statistic compared (avg_us by default)
    kernel_us: float  # time the kernel spent on this point: (iterations + warm-up) × latency


class Measurer(Protocol):
    def measure(self, requests: Sequence[Request]) -> Mapping[Request, Observation | None]:
        """One repetition of every request; None where no value can be had."""


# Which of these labels are worth measuring at (context, size): a model's verdict (prune.py).
Pruner = Callable[[Context, int, Sequence[str]], Sequence[str]]


@dataclass(frozen=True)
class Config:
    race: RaceConfig = field(default_factory=RaceConfig)
    stride: int = 2  # coarse grid: every stride-th size (docs/adaptive.md: 2 vs 4)
    prune: Pruner | None = None  # None: every algorithm races on the coarse grid
    max_reps: int | None = None  # cap below the data's repetition count (None: no cap)


def coarse_indices(n: int, stride: int) -> list[int]:
    idx = list(range(0, n, max(1, stride)))
    return idx if idx[-1] == n - 1 else [*idx, n - 1]


@dataclass
class ContextTuner:
    context: Context
    sizes: tuple[int, ...]  # ascending
    labels: tuple[str, ...]  # every algorithm of this collective (DEFAULT included)
    config: Config
    races: dict[int, Race] = field(default_factory=dict)  # by size index

    def __post_init__(self) -> None:
        for i in coarse_indices(len(self.sizes), self.config.stride):
            self.races[i] = self._race(i, self.labels)

    def _race(self, i: int, labels: Sequence[str]) -> Race:
        """A race at size index i among `labels`, less those the model prunes there (never
        the default: the rules switch away from it only where it is beaten)."""
        if self.config.prune is not None:
            kept = set(self.config.prune(self.context, self.sizes[i], labels)) | {DEFAULT}
            labels = [c for c in labels if c in kept]
        return Race(self.sizes[i], tuple(labels), self.config.race)

    def active(self) -> list[Race]:
        return [r for r in self.races.values() if not r.done()]

    def refine(self) -> bool:
        """Start races at the midpoints of disagreeing neighbours; False when none is left."""
        measured = sorted(self.races)
        new = False
        for i, j in itertools.pairwise(measured):
            if j - i < 2:
                continue
            a, b = self.races[i], self.races[j]
            if a.recommended() == b.recommended():
                continue
            keep = set(a.alive) | set(b.alive) | ({DEFAULT} & set(self.labels))
            m = (i + j) // 2
            self.races[m] = self._race(m, [c for c in self.labels if c in keep])
            new = True
        return new

    def choices(self) -> dict[int, str]:
        """Recommended label per size: measured sizes from their race, the others from the
        nearest measured size below (its neighbours agree, or it would have been refined)."""
        out: dict[int, str] = {}
        last: str | None = None
        for i, size in enumerate(self.sizes):
            if i in self.races:
                last = self.races[i].recommended() or last
            if last is not None:
                out[size] = last
        return out


@dataclass
class Tally:
    rounds: int = 0
    requests: int = 0  # point repetitions asked for
    measured: int = 0  # point repetitions obtained
    kernel_us: float = 0.0
    pruned: int = 0  # (context, size, algorithm) races the model spared


def run(contexts: Mapping[Context, tuple[Sequence[int], Sequence[str]]], measurer: Measurer,
        config: Config | None = None) -> tuple[dict[Context, ContextTuner], Tally]:
    """Race and refine every context until nothing is left to measure."""
    config = config or Config()
    tuners = {ctx: ContextTuner(ctx, tuple(sorted(sizes)), tuple(labels), config)
              for ctx, (sizes, labels) in contexts.items()}
    tally = Tally()
    while True:
        wanted: list[Request] = []
        for ctx, t in tuners.items():
            if not t.active():
                t.refine()
            wanted += [(ctx[0], ctx[1], label, r.size) for r in t.active()
                       for label in r.wanted()]
        if not wanted:
            return tuners, tally
        got = measurer.measure(wanted)
        tally.rounds += 1
        tally.requests += len(wanted)
        touched: dict[int, Race] = {}
        for req in wanted:
            obs = got.get(req)
            race = _race(tuners[(req[0], req[1])], req[3])
            race.add(req[2], obs.value_us if obs else None)
            touched[id(race)] = race
            if obs is not None:
                tally.measured += 1
                tally.kernel_us += obs.kernel_us
        for race in touched.values():
            race.look()


def _race(t: ContextTuner, size: int) -> Race:
    return next(r for r in t.races.values() if r.size == size)
