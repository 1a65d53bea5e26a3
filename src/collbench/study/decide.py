"""One stage's verdict: is any candidate setting significantly better than the baseline?

The target metric is one number per repetition of a setting: the geometric mean, over every
point the study measures (collective × algorithm × size × process count), of that point's
latency relative to the baseline's median latency at the same point. Relative, so that a
1 MiB point does not outweigh a 1 B point; geometric, so that 2× faster and 2× slower
cancel. A repetition counts only when every point of it was measured (a failed or
timed-out launch leaves the repetition incomplete, and it is left out rather than scored
on fewer points).

Rule (docs/study.md): each candidate's scores against the baseline's, exact two-sided
Mann-Whitney with Holm over the stage's candidates, and the Hodges-Lehmann/Moses interval
of the ratio — the tests of `collbench compare` (analyse.stats). A candidate is better when
the Holm-adjusted p < 1 - confidence, the interval lies below 1 and the estimated gain is at
least min_gain. The best-scoring better candidate is kept; if none is better, the baseline
is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from collbench import points
from collbench.analyse.stats import holm, log_ratio_ci, mann_whitney, median
from collbench.catalog.forcing import is_forcing_mca
from collbench.store import Store
from collbench.study.spec import Parameter

PointKey = tuple[str, int, str, int, int, int]  # collective, nprocs, algorithm, seg, fanout, size
Values = dict[str, dict[int, dict[PointKey, float]]]  # setting -> repetition -> point -> value


@dataclass(frozen=True)
class Setting:
    value: str
    is_baseline: bool
    scores: tuple[float, ...]  # per complete repetition (1.0 = the baseline's medians)
    planned: int  # repetitions planned
    score: float | None  # median of scores
    ratio: float | None  # score / baseline score (< 1: faster)
    ci_low: float | None  # Hodges-Lehmann/Moses interval of the ratio
    ci_high: float | None
    p_holm: float | None
    better: bool | None  # None: not testable (fewer than 2 complete repetitions)


@dataclass(frozen=True)
class Decision:
    parameter: str
    kind: str
    baseline: str
    kept: str
    reason: str
    points: int  # points in each repetition's score
    column: str
    confidence: float
    min_gain: float
    settings: tuple[Setting, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Decision:
        settings = tuple(Setting(**dict(s, scores=tuple(s["scores"])))
                         for s in data["settings"])
        return Decision(**dict(data, settings=settings))


def setting_of(row: dict[str, Any], param: Parameter) -> str | None:
    """Which value of the stage's parameter this row was measured with."""
    if param.kind == "launcher":
        return str(row["binding"] if param.name == "bind_to" else row["mapping"])
    swept = points.params_of(row).get("swept")
    value = swept.get(param.name) if isinstance(swept, dict) else None
    return None if value is None else str(value)


def fetch_rows(store: Store, column: str) -> list[dict[str, Any]]:
    cols = ("collective", "nprocs", "algorithm", "segsize", "fanout", "size_bytes",
            "repetition", "binding", "mapping", "params", "status", column)
    return [{c: r[c] for c in cols} for r in points.read(store)]


def _key(row: dict[str, Any], param: Parameter) -> PointKey:
    if is_forcing_mca(param.name):  # the setting itself changes what rows record as the
        # algorithm, segment size or fanout: compare the settings point for point anyway
        return (str(row["collective"]), int(row["nprocs"]), "", 0, 0, int(row["size_bytes"]))
    return (str(row["collective"]), int(row["nprocs"]), str(row["algorithm"]),
            int(row["segsize"] or 0), int(row["fanout"] or 0), int(row["size_bytes"]))


def complete_repetitions(rows: Sequence[dict[str, Any]], param: Parameter,
                         column: str) -> tuple[set[PointKey], Values]:
    """(every point of the stage, setting -> repetition -> point -> value) for repetitions
    in which every point was measured ok."""
    points = {_key(r, param) for r in rows}
    by: Values = {}
    bad: set[tuple[str, int]] = set()
    for r in rows:
        value = setting_of(r, param)
        if value is None:
            continue
        rep = int(r["repetition"])
        if r["status"] != "ok" or r[column] is None or float(r[column]) <= 0:
            bad.add((value, rep))
            continue
        by.setdefault(value, {}).setdefault(rep, {})[_key(r, param)] = float(r[column])
    complete = {v: {rep: vals for rep, vals in reps.items()
                    if (v, rep) not in bad and set(vals) == points}
                for v, reps in by.items()}
    return points, complete


def scores(reps: dict[int, dict[PointKey, float]], ref: dict[PointKey, float]) -> tuple[float, ...]:
    """Geometric mean over points of value / reference, one per repetition (in rep order)."""
    return tuple(math.exp(sum(math.log(vals[k] / ref[k]) for k in ref) / len(ref))
                 for _, vals in sorted(reps.items()))


def decide(store: Store, param: Parameter, column: str, confidence: float, min_gain: float,
           planned: int) -> Decision:
    """The stage's verdict from what its results folder holds."""
    points, complete = complete_repetitions(fetch_rows(store, column), param, column)
    base_reps = complete.get(param.baseline, {})
    ref = {k: median([vals[k] for vals in base_reps.values()]) for k in points} \
        if base_reps else {}
    values = [param.baseline, *param.candidates]
    got = {v: scores(complete.get(v, {}), ref) if ref else () for v in values}
    base = got[param.baseline]
    base_score = median(base) if base else None
    tests: dict[str, tuple[float, Any]] = {}
    for v in param.candidates:
        if len(got[v]) >= 2 and len(base) >= 2:
            hl = log_ratio_ci(got[v], base, confidence)
            tests[v] = (mann_whitney(got[v], base).p_value, hl[1] if hl else None)
    adjusted = dict(zip(tests, holm([p for p, _ in tests.values()]), strict=True))
    settings = [Setting(param.baseline, True, base, planned, base_score, 1.0 if base else None,
                        None, None, None, None)]
    for v in param.candidates:
        s = got[v]
        score = median(s) if s else None
        ratio = score / base_score if score is not None and base_score else None
        ci = tests[v][1] if v in tests else None
        p = adjusted.get(v)
        better = None if p is None else bool(
            p < 1 - confidence and ci is not None and ci.high < 1
            and ratio is not None and ratio <= 1 - min_gain)
        settings.append(Setting(v, False, s, planned, score, ratio, ci.low if ci else None,
                                ci.high if ci else None, p, better))
    kept, reason = _verdict(settings, param, planned)
    return Decision(param.name, param.kind, param.baseline, kept, reason, len(ref), column,
                    confidence, min_gain, tuple(settings))


def _verdict(settings: Sequence[Setting], param: Parameter, planned: int) -> tuple[str, str]:
    base = settings[0]
    if len(base.scores) < 2:
        return param.baseline, (f"baseline has {len(base.scores)} complete repetitions of "
                                f"{planned}: nothing could be tested; baseline kept")
    better = [s for s in settings[1:] if s.better]
    if not better:
        return param.baseline, "no setting significantly better than the baseline"
    best = min(better, key=lambda s: s.score if s.score is not None else math.inf)
    return best.value, f"{best.value} significantly better than the baseline"
