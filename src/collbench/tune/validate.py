"""`collbench tune validate`: the MPI's defaults against a rules file, A/B, with statistics.

Each repetition is one launch per arm, in an order shuffled with a recorded seed, so drift
and warm caches hit both arms alike. The arms differ only in coll_tuned_use_dynamic_rules
(0: the default; 1: the file, named by coll_tuned_dynamic_rules_filename in both), so
collbench compare sees one context and two "algorithms": default and tuned. Effects are
compare's ratio (tuned / default, with its interval) in the same words as compare, "1.12 ±
0.03 × faster than default" (analyse/columns.effect_text), and summaries are geometric
means of the ratios with a t interval (analyse/stats.geomean_ci). A regression is a size
where the file switches the algorithm and the tuned arm is significantly slower after
Holm's correction over those sizes. Regressions are printed in a banner and make the
command exit 1.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.analyse.columns import effect_text, point_column
from collbench.analyse.compare import RatioStat, compare
from collbench.analyse.stats import Interval, geomean_ci, holm
from collbench.catalog.collectives import COLLECTIVES, rules_bytes
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.plan import Launch, Point
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tables import text_table
from collbench.tune import campaign
from collbench.tune.han import activation as han_activation
from collbench.tune.rules import COLLTYPES, RulesFile
from collbench.tune.verify import comm_set, message_rule
from collbench.tune.writer import activation

TUNED: Final = "tuned"
DEFAULT: Final = "default"


@dataclass(frozen=True)
class Row:
    collective: str
    nprocs: int
    size: int
    switched: bool  # the file picks an algorithm (ALG != 0) at this size
    default_us: float  # median over repetitions of avg_us (median_avg_us)
    tuned_us: float
    ratio: float  # tuned / default (< 1: the file is faster), as collbench compare
    low: float | None  # the ratio's interval
    high: float | None
    significant: bool | None
    regression: bool = False

    @property
    def effect(self) -> str:
        return effect_text(self.ratio, self.low, self.high, DEFAULT)


@dataclass(frozen=True)
class Validation:
    rows: tuple[Row, ...]
    repetitions: int
    store: Path
    confidence: float = 0.95

    @property
    def regressions(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.regression)

    def geomean(self, rows: Sequence[Row] | None = None
                ) -> tuple[float, Interval | None] | None:
        """Geometric mean of tuned / default over the rows, with its t interval."""
        xs = [r.ratio for r in (self.rows if rows is None else rows) if r.ratio > 0]
        return geomean_ci(xs, self.confidence) if xs else None


def plan_launches(rules: RulesFile, path: Path, nprocs_list: Sequence[int], sizes: Sequence[int],
                  collectives: Sequence[str], repetitions: int, seed: int, iterations: int,
                  timeout: float, hosts: campaign.Hosts | None = None,
                  han_path: Path | None = None) -> list[Launch]:
    file_mca = activation(path)[1:]
    # han's file (5.0 on several nodes): named in both arms, used in the tuned one
    han_file = han_activation(han_path)[1:] if han_path else []
    arms = {DEFAULT: [("coll_tuned_use_dynamic_rules", "0"), *file_mca,
                      *([("coll_han_use_dynamic_file_rules", "0"), *han_file] if han_path
                        else [])],
            TUNED: [("coll_tuned_use_dynamic_rules", "1"), *file_mca,
                    *([("coll_han_use_dynamic_file_rules", "1"), *han_file] if han_path
                      else [])]}

    def launch(arm: str, rep: int, nprocs: int, points: list[Point]) -> Launch:
        return campaign.launch(nprocs, points, arms[arm], "launch" if arm == TUNED else "none",
                               rep, timeout, hosts=hosts)

    return interleaved(list(arms), nprocs_list, collectives, sizes, repetitions, seed,
                       iterations, launch)


def interleaved(arms: Sequence[str], nprocs_list: Sequence[int], collectives: Sequence[str],
                sizes: Sequence[int], repetitions: int, seed: int, iterations: int,
                launch: Callable[[str, int, int, list[Point]], Launch]) -> list[Launch]:
    """One launch per arm, repetition and process count, the arms in an order and the
    collectives in blocks shuffled per repetition with `seed` (Open MPI's and Intel MPI's
    validate: `launch(arm, repetition, nprocs, points)` makes the arm's launch)."""
    rng = random.Random(seed)
    launches = []
    for rep in range(repetitions):
        for nprocs in nprocs_list:
            order = list(arms)
            rng.shuffle(order)
            blocks = list(collectives)
            rng.shuffle(blocks)
            for arm in order:
                points = [campaign.point(c, arm, 0, s, iterations, max(1, iterations // 10)
                                         if iterations else 0)
                          for c in blocks for s in sizes if s >= COLLECTIVES[c].min_size
                          and not (c == "reduce_scatter_block" and s < nprocs)]
                launches.append(launch(arm, rep, nprocs, points))
    return launches


def collectives_in(rules: RulesFile, wanted: Sequence[str]) -> list[str]:
    present = [COLLTYPES[c.coll_id] for c in rules.collectives]
    colls = [c for c in present if c in COLLECTIVES and (not wanted or c in wanted)]
    if not colls:
        raise UserError(f"no collective to validate: the file has {', '.join(present) or 'none'}"
                        f"{'; asked for ' + ', '.join(wanted) if wanted else ''}")
    return colls


def validate(rules: RulesFile, path: Path, out: Path, nprocs_list: Sequence[int],
             sizes: Sequence[int], mpi: MpiInstall, *, repetitions: int, seed: int,
             collectives: Sequence[str] = (), iterations: int = 0, timeout: float = 600,
             confidence: float = 0.95, hosts: campaign.Hosts | None = None,
             han_path: Path | None = None) -> Validation:
    if repetitions < 2:
        raise UserError(f"--repetitions {repetitions}: at least 2 are needed to test a "
                        "difference (6 or more to find one among noise, docs/statistics.md)")
    colls = collectives_in(rules, collectives)
    launches = plan_launches(rules, path, nprocs_list, sizes, colls, repetitions, seed,
                             iterations, timeout, hosts, han_path)
    spec = _spec_text(path, colls, sizes, nprocs_list, repetitions, seed, hosts)
    _, summary = campaign.run(out, f"validate-{path.stem}", seed, launches, mpi, spec,
                              str(path), hosts=hosts)
    bad = {k: v for k, v in summary.points.items() if k != "ok"}
    if bad:
        raise UserError(f"{out}: not every point was measured ({bad}); see `collbench show "
                        f"{out}`; rerun the same command to retry")
    return analyse(Store(out), rules, confidence)


def analyse(store: Store, rules: RulesFile | None, confidence: float = 0.95,
            switches: Callable[[RatioStat], bool] | None = None,
            arm: str = TUNED) -> Validation:
    """`switches`: whether the file leaves the default at a point, for files that are not
    Open MPI rules (Intel MPI's JSON: tune/impi_validate.py); else read from `rules`.
    `arm`: the arm set against the default (another than "tuned": Intel's autotuner)."""
    cmp = compare(store, baseline=DEFAULT, confidence=confidence)
    ratios = [r for r in cmp.ratios if r.point.algorithm == arm]
    switched = [switches(r) if switches is not None
                else rules is not None and _switched(rules, r) for r in ratios]
    slower = [i for i, r in enumerate(ratios) if switched[i] and r.p_raw is not None]
    adjusted = dict(zip(slower, holm([ratios[i].p_raw or 1.0 for i in slower]), strict=True))
    rows = []
    for i, r in enumerate(ratios):
        p = adjusted.get(i)
        regression = (p is not None and p < 1 - confidence and r.ratio > 1
                      and r.ci_low is not None and r.ci_low > 1)
        rows.append(Row(r.point.collective, r.point.nprocs, r.point.size_bytes, switched[i],
                        r.baseline.value, r.point.value, r.ratio, r.ci_low, r.ci_high,
                        r.significant, regression))
    rows.sort(key=lambda x: (x.collective, x.nprocs, x.size))
    return Validation(tuple(rows), cmp.repetitions, store.root, confidence)


def _switched(rules: RulesFile, r: RatioStat) -> bool:
    coll = r.point.collective
    cid = COLLTYPES.index(coll) if coll in COLLTYPES else -1
    comm = comm_set(rules, cid, r.point.nprocs)
    if comm is None:
        return False
    return message_rule(comm, rules_bytes(coll, r.point.size_bytes, r.point.nprocs)).alg != 0


def _spec_text(path: Path, colls: Sequence[str], sizes: Sequence[int],
               nprocs: Sequence[int], repetitions: int, seed: int,
               hosts: campaign.Hosts | None = None) -> str:
    quoted = ", ".join(f'"{c}"' for c in colls)
    return (f"# Written by collbench tune validate: the default arm of an A/B campaign; the\n"
            f"# tuned arm adds coll_tuned_use_dynamic_rules = 1 with the rules file\n"
            f"# {path.resolve()}\n"
            f'[campaign]\nname = "validate-{path.stem}"\n\n'
            f"[measure]\ncollectives = [{quoted}]\nalgorithms = \"default\"\n"
            f"sizes = {list(sizes)}\nnprocs = {list(nprocs)}\n"
            f"{hosts.measure_line() if hosts else ''}\n"
            f"[run]\nrepetitions = {repetitions}\nseed = {seed}\n"
            f"{hosts.run_table() if hosts else ''}")


def render(v: Validation) -> str:
    value = point_column("median", "avg_us")
    rows = [{"collective": r.collective, "np": r.nprocs, "size": format_size(r.size),
             "file": "switch" if r.switched else "default", f"default {value}": r.default_us,
             f"tuned {value}": r.tuned_us, "tuned": r.effect, "verdict": _verdict(r)}
            for r in v.rows]
    cols = ["collective", "np", "size", "file", f"default {value}", f"tuned {value}", "tuned",
            "verdict"]
    out = [f"# tune validate: {v.repetitions} repetitions per arm, interleaved in random "
           f"order; {value} = median over repetitions of avg_us; tuned: the file's arm "
           "against the default in `collbench compare`'s words (± reaches both ends of the "
           f"{v.confidence:.0%} interval); results: {v.store}",
           "", text_table(rows, cols), ""]
    if v.repetitions < 4:
        out.append(f"note: with {v.repetitions} repetitions per arm no difference can be "
                   "significant (exact test); use --repetitions 6 or more")
    switched = [r for r in v.rows if r.switched]
    for label, subset in (("all sizes", v.rows), ("sizes the file switches", switched)):
        g = v.geomean(subset)
        if g is not None:
            ratio, ci = g
            out.append(f"tuned, {label}: " + effect_text(
                ratio, ci.low if ci else None, ci.high if ci else None, DEFAULT)
                + f" (geometric mean of {len(subset)} sizes)")
    if v.regressions:
        bar = "!" * 78
        worst = ", ".join(f"{r.collective} np={r.nprocs} {format_size(r.size)} "
                          f"({r.effect})" for r in v.regressions)
        out += ["", bar, f"REGRESSION: the tuned file is significantly slower than the "
                f"default at {len(v.regressions)} size(s): {worst}", bar]
    return "\n".join(out) + "\n"


def _verdict(r: Row) -> str:
    if r.regression:
        return "REGRESSION"
    if r.significant is None:
        return "untested"
    if not r.significant:
        return "no difference"
    return "faster" if r.ratio < 1 else "slower (noise?)" if not r.switched else "slower"
