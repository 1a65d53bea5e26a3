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
least min_gain; worse when the p is as small and the interval lies above 1. The tests are
made over every point and again per message-size range (analyse.against.BANDS). The
best-scoring candidate better overall or in a range, and worse in none, is kept; if there
is none, the baseline is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from collbench import points
from collbench.analyse.against import BANDS, band_of
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
    worse: bool | None = None  # significantly slower (decisions before it: not recorded)


@dataclass(frozen=True)
class Band:
    """The stage's tests on the points of one message-size range only."""

    name: str  # analyse.against.BANDS: "<= 1 KiB", "1-64 KiB", ">= 64 KiB"
    points: int
    settings: tuple[Setting, ...]


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
    bands: tuple[Band, ...] = ()  # per size range, when the points span more than one

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Decision:
        def settings(raw: list[dict[str, Any]]) -> tuple[Setting, ...]:
            return tuple(Setting(**dict(s, scores=tuple(s["scores"]))) for s in raw)

        bands = tuple(Band(b["name"], b["points"], settings(b["settings"]))
                      for b in data.get("bands", ()))
        return Decision(**dict(data, settings=settings(data["settings"]), bands=bands))


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
    """The stage's verdict from what its results folder holds: tested on every point, and
    on each message-size range alone (a setting may help small messages and hurt large)."""
    points, complete = complete_repetitions(fetch_rows(store, column), param, column)
    settings = _tested(param, points, complete, confidence, min_gain, planned)
    by_band: dict[str, set[PointKey]] = {}
    for k in points:
        by_band.setdefault(band_of(k[5]), set()).add(k)
    bands = tuple(Band(name, len(by_band[name]), tuple(_tested(
        param, by_band[name], complete, confidence, min_gain, planned)))
        for name, _, _ in BANDS if name in by_band) if len(by_band) > 1 else ()
    kept, reason = _verdict(settings, bands, param, planned)
    n = len(points) if settings[0].scores else 0
    return Decision(param.name, param.kind, param.baseline, kept, reason, n, column,
                    confidence, min_gain, tuple(settings), bands)


def _tested(param: Parameter, points: set[PointKey], complete: Values, confidence: float,
            min_gain: float, planned: int) -> list[Setting]:
    """Each setting's scores on `points` and its tests against the baseline."""
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
        significant = p is not None and p < 1 - confidence
        better = None if p is None else bool(
            significant and ci is not None and ci.high < 1 and ratio is not None
            and ratio <= 1 - min_gain)
        worse = None if p is None else bool(significant and ci is not None and ci.low > 1)
        settings.append(Setting(v, False, s, planned, score, ratio, ci.low if ci else None,
                                ci.high if ci else None, p, better, worse))
    return settings


def _verdict(settings: Sequence[Setting], bands: Sequence[Band], param: Parameter,
             planned: int) -> tuple[str, str]:
    """Kept: the best-scoring candidate significantly better than the baseline overall or
    in a size range, and significantly worse in none; else the baseline."""
    base = settings[0]
    if len(base.scores) < 2:
        return param.baseline, (f"baseline has {len(base.scores)} complete repetitions of "
                                f"{planned}: nothing could be tested; baseline kept")
    where: dict[str, tuple[list[str], list[str]]] = {}  # value -> (better at, worse at)
    for name, tested in [("every size", settings), *((b.name, b.settings) for b in bands)]:
        for s in tested[1:]:
            better, worse = where.setdefault(s.value, ([], []))
            (better if s.better else worse if s.worse else []).append(name)
    fit = [s for s in settings[1:] if where[s.value][0] and not where[s.value][1]]
    if fit:
        best = min(fit, key=lambda s: s.score if s.score is not None else math.inf)
        return best.value, (f"{best.value} significantly better than the baseline at "
                            f"{', '.join(where[best.value][0])}, worse nowhere")
    mixed = [f"{v} better at {', '.join(b)} but worse at {', '.join(w)}"
             for v, (b, w) in where.items() if b and w]
    if mixed:
        return param.baseline, f"{'; '.join(mixed)}; baseline kept"
    worse = [v for v, (_, w) in where.items() if w]
    if worse:
        return param.baseline, (f"no setting significantly better; significantly worse: "
                                f"{', '.join(worse)}; baseline kept")
    return param.baseline, "no setting significantly better than the baseline"
