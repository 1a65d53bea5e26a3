"""Stability warnings in the manner of pyperf: what looks unreliable, and what to do.

One finding per problem, block and algorithm, its sizes written as ranges of the sizes
measured ("1K–64K, 1M"); findings are sorted worst first (`severity`: how far past its
threshold), and `brief` keeps the first few for a terminal. The advice fits the run: no
"pin ranks" for ranks already bound, no timer or oversubscription advice for a simulator,
whose clock is exact and whose cores are the platform's, and no repetitions warning for
it either: simulated figures are exact (`repetition_notice` says "simulated: exact").
Checks work on the rows of each point (every status), so they need no database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from collbench.analyse.stats import cv, mad, median, min_p_value
from collbench.sizes import format_size

CV_MAX = 0.10  # pyperf's threshold: standard deviation above 10 % of the mean
RANK_SPREAD_MAX = 3.0  # (max - min over ranks) / avg; rooted collectives reach ~2 normally
OUTLIER_MADS = 3.0  # a repetition above median + 3 scaled MADs ...
OUTLIER_FACTOR = 2.0  # ... or above twice the median
MIN_ITERATIONS = 10
MIN_TIMED_US = 1000.0  # 1 ms of timed work per repetition: below, a single interrupt shows
MIN_REPETITIONS = 3
MAD_TO_SIGMA = 1.4826
BAD_STATUSES = ("failed", "timeout", "invalid")
MAX_NAMED = 8  # named failed points before "and N more"
BRIEF: Final = 5  # findings shown by default; the rest behind --all
SIMULATED: Final = frozenset({"simgrid"})  # backends whose time is simulated, not measured
UNBOUND: Final = frozenset({"", "none"})
# Severities of findings that are not a ratio to a threshold: failures first.
SEVERITY_BAD: Final = {"failed": 1000.0, "timeout": 900.0, "invalid": 1100.0}
SEVERITY_OVERSUBSCRIBED: Final = 50.0
SEVERITY_REPETITIONS: Final = 20.0


@dataclass(frozen=True)
class StabilityWarning:
    where: str
    problem: str
    advice: str
    severity: float = 0.0  # how far past its threshold: the order findings are shown in
    kind: str = ""  # spread, ranks, outlier, few_iterations, short, repetitions, failed, ...


@dataclass(frozen=True)
class Observed:
    """One point's rows, every status, as the checks need them."""

    block: str  # "bcast np=4 map-by=core bind-to=core"
    label: str  # algorithm label
    size_bytes: int
    nprocs: int
    nodes: int | None
    ppn: int | None
    values: tuple[float, ...]  # the compared statistic of each ok repetition
    rows: tuple[Mapping[str, Any], ...]  # every row of the point (status, iterations, ...)

    @property
    def simulated(self) -> bool:
        return any(r.get("backend") in SIMULATED for r in self.rows)

    @property
    def bound(self) -> bool:
        return all(str(r.get("binding") or "") not in UNBOUND for r in self.rows)


@dataclass(frozen=True)
class _Run:
    """What the advice needs to know about the run: its settings and its machine."""

    cores: int | None
    repetitions: int
    iterations: int

    def over(self, ob: Observed) -> bool:
        return bool(self.cores) and _ranks_per_node(ob) > (self.cores or 0)


def check(observed: Sequence[Observed], stat_column: str, confidence: float,
          cores: int | None) -> list[StabilityWarning]:
    """Every finding, worst first."""
    run = _Run(cores, max((len(ob.values) for ob in observed), default=0),
               min((int(r["iterations"]) for ob in observed for r in _ok(ob)
                    if r.get("iterations") is not None), default=0))
    out: list[StabilityWarning] = []
    out += _few_repetitions(observed, confidence)
    out += _bad_points(observed)
    out += _oversubscribed(observed, cores)
    # (kind, block, label) -> [(size, figure)], and the sizes measured per (block, label)
    found: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    first: dict[tuple[str, str, str], Observed] = {}
    measured: dict[tuple[str, str], set[int]] = {}
    for ob in observed:
        measured.setdefault((ob.block, ob.label), set()).add(ob.size_bytes)
        checks = (_spread,) if ob.simulated else (
            _spread, _rank_spread, _outliers, _few_iterations, _short)
        for fn in checks:
            hit = fn(ob)
            if hit is not None:
                key = (hit[0], ob.block, ob.label)
                found.setdefault(key, []).append((ob.size_bytes, hit[1]))
                first.setdefault(key, ob)
    for (kind, block, label), hits in found.items():
        ob = first[(kind, block, label)]
        figures = [f for _, f in hits]
        worst, severity = _worst(kind, figures)
        sizes = ranges([s for s, _ in hits], measured[(block, label)])
        out.append(StabilityWarning(f"{block}: {label} at {sizes}",
                                    _problem(kind, worst, stat_column, ob),
                                    _advice(kind, ob, run), severity, kind))
    out.sort(key=lambda w: -w.severity)
    return out


def brief(warnings: Sequence[StabilityWarning],
          limit: int = BRIEF) -> tuple[list[StabilityWarning], str | None]:
    """The first `limit` findings (worst first) and, when some are left out, a line saying
    how many and how to see them."""
    if len(warnings) <= limit:
        return list(warnings), None
    rest = len(warnings) - limit
    return list(warnings[:limit]), f"{rest} more warning{'s' if rest != 1 else ''}; --all " \
        "shows every one"


NOISE: Final = ("spread", "outlier", "ranks")


def noise_evidence(warnings: Sequence[StabilityWarning]) -> str | None:
    """For `tune`: one line when the timings its choices rest on are noisy, else None."""
    noisy = [w for w in warnings if w.kind in NOISE]
    if not noisy:
        return None
    return (f"noisy timings at {len(noisy)} place{'s' if len(noisy) != 1 else ''} (spread "
            f"between repetitions, outliers or ranks that disagree); worst: {line(noisy[0])}")


def line(w: StabilityWarning) -> str:
    """One finding on one line: where, what, what to do."""
    return f"{w.where}: {w.problem}; {w.advice}"


def ranges(sizes: Sequence[int], measured: set[int] | Sequence[int]) -> str:
    """'1–64, 1K–1M': runs of consecutive measured sizes; a run needs no size between its
    ends that was measured without the finding."""
    order = sorted(set(measured) | set(sizes))
    hit = set(sizes)
    runs: list[list[int]] = []
    for i, s in enumerate(order):
        if s not in hit:
            continue
        if runs and order[i - 1] == runs[-1][-1] and i > 0:
            runs[-1].append(s)
        else:
            runs.append([s])
    return ", ".join(format_size(r[0]) + (f"–{format_size(r[-1])}" if len(r) > 1 else "")
                     for r in runs)


def _worst(kind: str, figures: Sequence[float]) -> tuple[float, float]:
    """The worst figure of a finding and its severity (a multiple of the threshold)."""
    if kind in ("few_iterations", "short"):
        worst = min(figures)
        limit = MIN_ITERATIONS if kind == "few_iterations" else MIN_TIMED_US
        return worst, limit / max(worst, 1e-9)
    worst = max(figures)
    limit = {"spread": CV_MAX, "ranks": RANK_SPREAD_MAX, "outlier": OUTLIER_FACTOR}[kind]
    return worst, worst / limit


def _problem(kind: str, worst: float, stat: str, ob: Observed) -> str:
    if kind == "spread":
        return (f"the {stat} of repetitions varies: standard deviation up to {worst:.0%} of "
                "the mean (> 10%)")
    if kind == "ranks":
        return f"ranks disagree: (max - min over ranks) reaches {worst:.1f}x the average"
    if kind == "outlier":
        return f"a repetition lies far above the median (up to {worst:.1f}x the median)"
    if kind == "few_iterations":
        return f"only {worst:.0f} timed iterations per repetition (< 10)"
    return (f"too little timed work: as little as {worst:.0f} us per repetition "
            "(iterations x avg_us < 1 ms), so timer resolution and single interrupts show")


def _advice(kind: str, ob: Observed, run: _Run) -> str:
    if ob.simulated:  # only the spread check runs on a simulator: it should be exact
        return ("a simulation repeats exactly unless something varies between launches: "
                "check the platform file and the simulator's settings")
    more = f"more repetitions (run.repetitions, now {run.repetitions})"
    if run.over(ob):
        crowded = (f"oversubscribed ({_ranks_per_node(ob)} ranks per node on {run.cores} "
                   f"cores): ranks wait for a core; compare algorithms at nprocs <= "
                   f"{run.cores}")
        if kind in ("spread", "ranks", "outlier"):
            return crowded
    if kind == "spread":
        pin = "" if ob.bound else "; pin ranks (--bind-to core)"
        return f"rerun with {more}; check for other jobs on the node{pin}"
    if kind == "ranks":
        if not ob.bound:
            return "pin ranks (--bind-to core): a rank that migrates keeps the others waiting"
        return ("ranks are bound already: check for other jobs on the node; rooted "
                "collectives let some ranks finish early by design")
    if kind == "outlier":
        return f"rerun with {more}; check for other jobs on the node"
    now = f" (now {run.iterations})" if run.iterations else ""
    return f"raise measure.iterations{now}"


def _spread(ob: Observed) -> tuple[str, float] | None:
    c = cv(ob.values)
    return ("spread", c) if c is not None and c > CV_MAX else None


def _rank_spread(ob: Observed) -> tuple[str, float] | None:
    spreads = [(float(r["max_us"]) - float(r["min_us"])) / float(r["avg_us"])
               for r in _ok(ob) if _positive(r, "avg_us") and _known(r, "max_us", "min_us")]
    if not spreads:
        return None
    typical = median(spreads)  # one bad repetition is the outlier check's business
    return ("ranks", typical) if typical > RANK_SPREAD_MAX else None


def _outliers(ob: Observed) -> tuple[str, float] | None:
    if len(ob.values) < 3:  # with two values, neither is "far from the median"
        return None
    med = median(ob.values)
    if med <= 0:
        return None
    limit = med + max(OUTLIER_MADS * MAD_TO_SIGMA * mad(ob.values), 0.1 * med)
    far = [v for v in ob.values if v > min(limit, OUTLIER_FACTOR * med)]
    return ("outlier", max(far) / med) if far else None


def _few_iterations(ob: Observed) -> tuple[str, float] | None:
    iters = [int(r["iterations"]) for r in _ok(ob) if r.get("iterations") is not None]
    return ("few_iterations", float(min(iters))) if iters and min(iters) < MIN_ITERATIONS \
        else None


def _short(ob: Observed) -> tuple[str, float] | None:
    totals = [int(r["iterations"]) * float(r["avg_us"]) for r in _ok(ob)
              if _known(r, "iterations", "avg_us")]
    return ("short", min(totals)) if totals and min(totals) < MIN_TIMED_US else None


def repetitions_needed(observed: Sequence[Observed], confidence: float) -> int:
    """Repetitions per point for a difference to be able to reach significance.

    Holm over the k algorithms compared with the baseline at one size: the smallest exact
    Mann-Whitney p-value, 2 / C(2n, n), must beat (1 - confidence) / k. At least 3.
    """
    family, alpha = _family(observed), 1 - confidence
    return max(MIN_REPETITIONS,
               next(k for k in range(2, 10_000) if family * min_p_value(k, k) < alpha))


def _family(observed: Sequence[Observed]) -> int:
    """Most algorithms compared with the baseline at one size (the Holm family size)."""
    per_size: dict[tuple[str, int], set[str]] = {}
    for ob in observed:
        per_size.setdefault((ob.block, ob.size_bytes), set()).add(ob.label)
    return max([1] + [len(labels) - 1 for labels in per_size.values()])


def _few_repetitions(observed: Sequence[Observed],
                     confidence: float) -> list[StabilityWarning]:
    # a simulated point is exact: one repetition is all it has to say
    counts = [len(ob.values) for ob in observed if ob.values and not ob.simulated]
    if not counts:
        return []
    n, needed = min(counts), repetitions_needed(observed, confidence)
    if n >= needed:
        return []
    advice = f"run with run.repetitions >= {needed} (now {max(counts)})"
    if n == 1:
        problem = "only 1 repetition at some points: no confidence interval or significance there"
    elif _family(observed) * min_p_value(n, n) >= 1 - confidence:
        problem = (f"only {n} repetitions at some points: too few for any difference to be "
                   f"significant at {1 - confidence:g} once corrected for the algorithms "
                   "compared per size (Holm)")
    else:
        problem = f"only {n} repetitions at some points: confidence intervals are wide"
    return [StabilityWarning("campaign", problem, advice, SEVERITY_REPETITIONS, "repetitions")]


REPETITION_NOTICE: Final = ("1 repetition: no confidence intervals or significance; run with "
                            "run.repetitions >= {needed}")
SIMULATED_NOTICE: Final = ("simulated: exact (a simulation repeats to the last digit): no "
                           "repetitions needed, no noise warnings; differences are the "
                           "model's, not noise")


def exact(observed: Sequence[Observed]) -> bool:
    """Every point simulated: figures are exact, repetitions add nothing."""
    return bool(observed) and all(ob.simulated for ob in observed)


def repetition_notice(observed: Sequence[Observed], confidence: float,
                      repetitions: int) -> str | None:
    """The line under a comparison about repetitions: SIMULATED_NOTICE for simulated data,
    REPETITION_NOTICE for a single measured repetition, else None."""
    if exact(observed):
        return SIMULATED_NOTICE
    if repetitions == 1:
        return REPETITION_NOTICE.format(needed=repetitions_needed(observed, confidence))
    return None


def _bad_points(observed: Sequence[Observed]) -> list[StabilityWarning]:
    out = []
    for status in BAD_STATUSES:
        named = []
        for ob in observed:
            bad = [r for r in ob.rows if r.get("status") == status]
            if bad:
                reps = ",".join(sorted({str(r.get("repetition")) for r in bad}))
                named.append(f"{ob.block} {ob.label} {format_size(ob.size_bytes)} (rep {reps})")
        if not named:
            continue
        more = f" and {len(named) - MAX_NAMED} more" if len(named) > MAX_NAMED else ""
        advice = {
            "failed": "see the error column (collbench show); rerun with --resume "
                      "--retry-failed",
            "timeout": "raise run.timeout or reduce the sizes; rerun with --resume "
                       "--retry-failed",
            "invalid": "the algorithm computed a wrong result: these points are excluded; "
                       "report it to the MPI developers",
        }[status]
        out.append(StabilityWarning("; ".join(named[:MAX_NAMED]) + more,
                                    f"{len(named)} point(s) {status}", advice,
                                    SEVERITY_BAD[status] + len(named), status))
    return out


def _oversubscribed(observed: Sequence[Observed], cores: int | None) -> list[StabilityWarning]:
    if not cores:
        return []
    # A simulator's ranks do not share this machine's cores: no oversubscription there.
    over = [ob for ob in observed if not ob.simulated and _ranks_per_node(ob) > cores]
    blocks = sorted({ob.block for ob in over})
    if not blocks:
        return []
    worst = max(_ranks_per_node(ob) for ob in over)
    return [StabilityWarning(
        "; ".join(blocks), f"more ranks per node than the {cores} cores recorded in "
        f"provenance.json (oversubscribed, up to {worst} ranks per node)",
        f"timings of oversubscribed runs are noisy: compare algorithms with nprocs <= {cores}",
        SEVERITY_OVERSUBSCRIBED + worst / cores, "oversubscribed")]


def _ranks_per_node(ob: Observed) -> int:
    if ob.ppn:
        return ob.ppn
    return ob.nprocs // ob.nodes if ob.nodes else ob.nprocs


def _ok(ob: Observed) -> list[Mapping[str, Any]]:
    return [r for r in ob.rows if r.get("status") == "ok"]


def _known(r: Mapping[str, Any], *cols: str) -> bool:
    return all(r.get(c) is not None for c in cols)


def _positive(r: Mapping[str, Any], col: str) -> bool:
    return r.get(col) is not None and float(r[col]) > 0
