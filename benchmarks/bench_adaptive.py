"""Adaptive tuning against an exhaustive sweep: measurement saved and regret per size.

One exhaustive campaign is recorded (bcast + allreduce, every algorithm, 1 B–1 MiB, 2 and
4 ranks, REPS repetitions). The adaptive procedure then replays it — drawing repetitions
from the recording instead of measuring — racing only (the first strategy) and with the
measurement cutters (FAST: screening, gap and futility drops), each over SEEDS draw orders,
and runs live on the same spec. A SimGrid campaign is replayed the same way, with and
without model-guided pruning (a p2p model fitted to a simulated ping-pong). Regret at a
size = exhaustive median latency of the algorithm the rules choose / exhaustive median of
the fastest algorithm there; relative regret = the adaptive rules' regret / the exhaustive
rules' regret (docs/adaptive.md, "The target").
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import run_campaign, sim_pingpong_spec

from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tune.adaptive import Config, Precision, PruneModel, RaceConfig, live, replay
from collbench.tune.adaptive.evaluate import Evaluation, evaluate
from collbench.tune.adaptive.replay import load
from collbench.tune.select import Options, Selection, select

REPS = 8
STRIDES = (2, 4)
SEEDS = (1, 2, 3, 4, 5)
RECORDINGS = 3
FAST = RaceConfig(min_reps=2, screen=1.3, gap=0.05, futile=0.05)
FAST_FLAGS = "--min-reps 2 --screen 1.3 --drop-gap 0.05 --futile 0.05"
# Precision-driven repetitions (docs/adaptive.md): each repetition timed from a first batch
# of 5 iterations, doubling, until the median's 95 % interval is within +-P, never beyond
# the recorded count. PRECISE is the configuration the target is judged on; the others show
# how the saving and the regret move with P.
FIRST = 5
PRECISE = 0.1
PRECISIONS = (0.05, PRECISE, 0.2)
SIM_ERROR = 0.035  # p95 error of the smpi-network model against SimGrid (docs/models.md)
SPEC = f"""
[campaign]
name = "adaptive-bench"
[measure]
collectives = ["bcast", "allreduce"]
algorithms = "all"
sizes = "1:1M"
nprocs = [2, 4]
iterations = {{small = 200, large = 20}}
warmup = {{small = 20, large = 2}}
samples = true
[run]
repetitions = {REPS}
timeout = 600
seed = 11
"""


HEAD = ("| run | point repetitions (adaptive / exhaustive) | kernel time saved | kernel time "
        "× less | same choice as exhaustive rules | relative regret median / mean / max | "
        "sizes > 3 % | regret median / max | exhaustive rules' regret median / max |")
RULE = "|---|---:|---:|---:|---:|---:|---:|---:|---:|"


def _line(name: str, ev: Evaluation) -> str:
    r, rel = ev.regrets(), ev.relative()
    ex = [s.exhaustive_regret for s in ev.sizes]
    return (f"| {name} | {ev.adaptive_points} / {ev.exhaustive_points} | "
            f"{ev.kernel_saved:.0%} | {ev.kernel_factor:.1f}× | {ev.agreement:.0%} | "
            f"{statistics.median(rel):.3f} / {statistics.mean(rel):.3f} / {max(rel):.2f} | "
            f"{sum(x > 1.03 for x in rel)} / {len(rel)} | "
            f"{statistics.median(r):.3f} / {max(r):.2f} | {statistics.median(ex):.3f} / "
            f"{max(ex):.2f} |")


def _verdict(evs: list[Evaluation]) -> str:
    k = statistics.median(e.kernel_factor for e in evs)
    reg = statistics.median(statistics.median(e.relative()) for e in evs)
    return "met" if k >= 10 and reg <= 1.03 else "not met"


def _seeds(name: str, evs: list[Evaluation]) -> str:
    """One row over recordings and draw orders: the median of each figure, [min–max] of
    the key ones."""
    k = [e.kernel_factor for e in evs]
    med = [statistics.median(e.relative()) for e in evs]
    mean = [statistics.mean(e.relative()) for e in evs]
    worst = [max(e.relative()) for e in evs]
    over = [sum(x > 1.03 for x in e.relative()) for e in evs]
    agree = [e.agreement for e in evs]
    return (f"| {name} | {statistics.median(k):.1f}× [{min(k):.1f}–{max(k):.1f}] | "
            f"{statistics.median(agree):.0%} | {max(med):.3f} | {statistics.median(mean):.3f} "
            f"[{min(mean):.3f}–{max(mean):.3f}] | {statistics.median(worst):.2f} | "
            f"{statistics.median(over):.0f} / {len(evs[0].sizes)} |")


SEED_HEAD = ("| run | kernel time × less, median [min–max] | same choice as exhaustive "
             "rules (median) | relative regret median (worst run) | relative regret mean, "
             "median [min–max] | relative regret max (median) | sizes > 3 % (median) |")
SEED_RULE = "|---|---:|---:|---:|---:|---:|---:|"


def _per_size(ev: Evaluation) -> list[str]:
    contexts = sorted({(s.collective, s.nprocs) for s in ev.sizes})
    head = " | ".join(f"{c} np={n}" for c, n in contexts)
    out = [f"| size | {head} |", "|---:|" + "---:|" * len(contexts)]
    at = {(s.collective, s.nprocs, s.size): s for s in ev.sizes}
    for size in sorted({s.size for s in ev.sizes}):
        cells = []
        for c, n in contexts:
            s = at.get((c, n, size))
            if s is None:
                cells.append("")
                continue
            mark = "" if s.adaptive == s.exhaustive else f" ({s.adaptive} vs {s.exhaustive})"
            cells.append(f"{s.regret:.2f} / {s.exhaustive_regret:.2f}{mark}")
        out.append(f"| {format_size(size)} | " + " | ".join(cells) + " |")
    return out


SIM_SPEC = """
[campaign]
name = "adaptive-bench-sim"
[measure]
collectives = ["bcast", "allreduce"]
algorithms = "all"
sizes = "1:1M"
nprocs = [4, 16]
iterations = {small = 20, large = 5}
warmup = {small = 2, large = 1}
[run]
backend = "simgrid"
repetitions = 2
timeout = 600
seed = 11
[run.simgrid]
platform = "jupiter"
"""


def _run_allowing_failed_points(spec_text: str, out: Path) -> float:
    """`collbench run`, accepting exit status 1 (some points failed: SMPI aborts a few
    algorithms); the failed rows stay out of the comparison."""
    spec = out.with_suffix(".toml")
    spec.write_text(spec_text)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "collbench.cli", "run", str(spec), "-o",
                           str(out)], check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"collbench run {spec}: exit status {done.returncode}")
    return time.monotonic() - start


SIM_PP = sim_pingpong_spec("adaptive-bench-sim-pp", "jupiter")


def _replays(src: Path, root: Path, name: str, exhaustive: Selection, config: Config,
             options: Options, prune: PruneModel | None = None,
             precision: Precision | None = None) -> list[Evaluation]:
    out = []
    for seed in SEEDS:
        run, rec = replay(src, root / f"{name}-{seed}", config, options, seed=seed,
                          prune=prune, precision=precision)
        out.append(evaluate(rec, run.selection, exhaustive, run.tally))
    return out


def _simulated(root: Path) -> list[str]:
    """The same comparison on a SimGrid campaign (exact: one repetition, no tests)."""
    try:
        from collbench.launch.simgrid import find_smpi

        find_smpi()
    except (UserError, ImportError) as e:
        return [f"No simulated campaign: {e}"]
    exh = root / "simulated"
    wall = _run_allowing_failed_points(SIM_SPEC, exh)
    run_campaign(SIM_PP, root / "sim-pp")
    p2p = root / "jupiter.p2p.toml"
    subprocess.run([sys.executable, "-m", "collbench.cli", "model", "p2p", str(root / "sim-pp"),
                    "-o", str(p2p)], check=True, capture_output=True)
    options = Options(significance=False)
    exhaustive = select(Store(exh), options)
    model = PruneModel(p2p, SIM_ERROR)
    runs = {
        "racing, stride 2": (Config(stride=2), None),
        "racing, stride 4": (Config(stride=4), None),
        f"model pruning (e = {SIM_ERROR}), stride 2": (Config(stride=2), model),
        f"model pruning (e = {SIM_ERROR}), stride 4": (Config(stride=4), model),
    }
    evs: dict[str, Evaluation] = {}
    for name, (config, prune) in runs.items():
        run, rec = replay(exh, root / f"sim-{len(evs)}", config, options, prune=prune)
        evs[name] = evaluate(rec, run.selection, exhaustive, run.tally)
    best = evs[f"model pruning (e = {SIM_ERROR}), stride 2"]
    return [
        "",
        "### Simulated campaign (SimGrid)",
        "",
        f"The same sweep simulated with SMPI on the built-in `jupiter` platform at 4 and 16 "
        f"ranks (one launch per algorithm, as SMPI has no MPI_T; 2 repetitions; {wall:.0f} s; "
        "SMPI's algorithms that abort are left out). A simulation is exact, so the adaptive "
        "run measures each point once and both rules take the fastest algorithm per size "
        "untested. Model pruning: a ping-pong simulated on `jupiter` (core, socket, node), "
        "fitted by `collbench model p2p`, then `collbench tune SIM --adaptive --prune-model "
        f"jupiter.p2p.toml --prune-error {SIM_ERROR}` (the smpi network model's p95 error "
        "against SimGrid, docs/models.md). One draw order: exact data has nothing to draw.",
        "",
        HEAD,
        RULE,
        *(_line(f"simulated replay, {name}", ev) for name, ev in evs.items()),
        "",
        f"**Simulated target** (≥ 10× less kernel time, median relative regret ≤ 1.03): "
        f"{best.kernel_factor:.1f}× at median {statistics.median(best.relative()):.3f} "
        f"(mean {statistics.mean(best.relative()):.3f}, max {max(best.relative()):.2f}) with "
        "model pruning at stride 2 — "
        f"{_verdict([best])}.",
    ]


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # Several recordings: how much a strategy saves depends on how noisy the recording
        # is, so one recording is one draw of that too.
        recordings = [root / f"exhaustive-{i}" for i in range(RECORDINGS)]
        walls = [run_campaign(SPEC, exh) for exh in recordings]
        exh, wall_exh = recordings[0], walls[0]
        exhaustive: Selection = select(Store(exh))
        recorded = load(Store(exh))
        launches_exh = len(list((exh / "launches").glob("*.jsonl")))
        options = Options()
        configs: dict[str, tuple[Config, Precision | None]] = {
            "racing, stride 2 (default)": (Config(stride=2), None),
            "racing, stride 4": (Config(stride=4), None),
            "FAST, stride 2": (Config(FAST, stride=2), None),
            "FAST, stride 4": (Config(FAST, stride=4), None),
            **{f"FAST + precision {p} (first {FIRST}), stride 2":
               (Config(FAST, stride=2), Precision(p, FIRST)) for p in PRECISIONS},
            f"racing + precision {PRECISE} (first {FIRST}), stride 2":
                (Config(stride=2), Precision(PRECISE, FIRST)),
        }
        seeded: dict[str, list[Evaluation]] = {}
        for n, (name, (config, precision)) in enumerate(configs.items()):
            seeded[name] = [ev for i, rec in enumerate(recordings)
                            for ev in _replays(rec, root, f"c{n}-{i}", select(Store(rec)),
                                               config, options, precision=precision)]
        spec = root / "live.toml"
        spec.write_text(SPEC)
        lives: dict[str, tuple[Any, float, Evaluation]] = {}
        for name, config, precision in (
                ("racing, stride 2", Config(stride=2), None),
                ("FAST, stride 2", Config(FAST, stride=2), None),
                (f"FAST + precision {PRECISE} (first {FIRST}), stride 2",
                 Config(FAST, stride=2), Precision(PRECISE, FIRST))):
            start = time.monotonic()
            lrun = live(spec, root / f"live-{len(lives)}", find_mpi(), config,
                        precision=precision)
            lives[name] = (lrun, time.monotonic() - start,
                           evaluate(recorded, lrun.selection, exhaustive, lrun.tally))
        simulated = _simulated(root)
    fast = seeded["FAST, stride 2"]
    precise = seeded[f"FAST + precision {PRECISE} (first {FIRST}), stride 2"]
    k = statistics.median(e.kernel_factor for e in precise)
    lines = [
        "## Adaptive tuning: measurement saved and regret",
        "",
        f"Command: `python benchmarks/run_all.py adaptive`. An exhaustive campaign (bcast and "
        f"allreduce, every Open MPI algorithm and the default, 1 B–1 MiB, 2 and 4 ranks — 4 "
        f"oversubscribed on 2 cores —, {REPS} repetitions, 200/20 iterations) is recorded "
        f"({launches_exh} launches, {wall_exh:.0f} s), then `collbench tune --adaptive` "
        "replays it: each repetition the adaptive run asks for is drawn, without "
        "replacement, from the recording, so both see the same data. Kernel time = "
        "(iterations + warm-up) × latency summed over the point repetitions measured. "
        "Regret at a size = exhaustive median latency of the algorithm the rules run there / "
        "exhaustive median of the fastest algorithm there (1 = no loss); relative regret = "
        "the adaptive rules' regret / the exhaustive rules' regret (the exhaustive median "
        "of the adaptive choice over that of the exhaustive rules' choice; the target is its "
        "median over sizes ≤ 1.03, docs/adaptive.md). Racing = the first strategy "
        f"(statistical drops only); FAST = `{FAST_FLAGS}` (screening, gap and futility "
        "drops). The p2p model of this machine is too far off (p95 error 163 %, "
        "docs/models.md) for model pruning here: with that error it prunes nothing.",
        "",
        f"Over {RECORDINGS} recordings × {len(SEEDS)} draw orders (`--seed` "
        f"{', '.join(map(str, SEEDS))}); exhaustive wall times "
        f"{', '.join(f'{w:.0f}' for w in walls)} s:",
        "",
        SEED_HEAD,
        SEED_RULE,
        *(_seeds(f"replay, {name}", evs) for name, evs in seeded.items()),
        "",
        "Recording 1, seed 1 in full, and the live runs (fresh measurements, judged on "
        "recording 1):",
        "",
        HEAD,
        RULE,
        *(_line(f"replay, {name}", evs[0]) for name, evs in seeded.items()),
        *(_line(f"live, {name}", ev) for name, (_, _, ev) in lives.items()),
        "",
        f"**Recorded target** (≥ 10× less kernel time at median relative regret ≤ 1.03, "
        f"for the median of {RECORDINGS} recordings × {len(SEEDS)} draw orders): FAST with "
        "precision-driven "
        f"repetitions (`{FAST_FLAGS} --precision {PRECISE} --min-iterations {FIRST}`) at "
        f"stride 2 saves {k:.1f}× [{min(e.kernel_factor for e in precise):.1f}–"
        f"{max(e.kernel_factor for e in precise):.1f}] at median relative regret "
        f"{max(statistics.median(e.relative()) for e in precise):.3f} (worst run) — "
        f"{_verdict(precise)}; its mean relative regret is "
        f"{statistics.median(statistics.mean(e.relative()) for e in precise):.3f} and "
        f"{statistics.median(sum(x > 1.03 for x in e.relative()) for e in precise):.0f} of "
        f"84 sizes lose more than 3 % (FAST alone: "
        f"{statistics.median(sum(x > 1.03 for x in e.relative()) for e in fast):.0f}). "
        f"FAST alone saves {statistics.median(e.kernel_factor for e in fast):.1f}× "
        f"({_verdict(fast)}): its floor is one full repetition of every algorithm at every "
        "coarse size. Precision lowers the cost of each repetition instead: the recording's "
        "200/20 iterations per repetition are far more than a race needs to rank "
        "algorithms, because the race's statistics work across repetitions, where most of "
        "the noise is (a repetition's median known to ±10 % is enough when the next "
        "repetition may move by more). FAST at stride 4 misses pockets (see its mean and "
        "sizes > 3 %): the median over sizes hides them.",
        "",
        *(f"Live {name}: {lrun.launches} launches in {lrun.tally.rounds} rounds, "
          f"{wall:.0f} s wall time, kernel time {lrun.tally.kernel_us / 1e6:.2f} s."
          for name, (lrun, wall, _) in lives.items()),
        f"Exhaustive: {launches_exh} launches, {wall_exh:.0f} s, kernel time "
        f"{recorded.kernel_us() / 1e6:.2f} s. Each round is one more mpirun start per "
        "process count: where start-up is expensive (1 s per launch here before the local "
        "backend skipped the ofi BTL, docs/spec.md) it eats the saving in wall time.",
        "",
        f"Regret per size, replay FAST + precision {PRECISE} with stride 2, recording 1, "
        "seed 1: adaptive / exhaustive rules (algorithms named where the two rules differ):",
        "",
        *_per_size(precise[0]),
        *simulated,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
