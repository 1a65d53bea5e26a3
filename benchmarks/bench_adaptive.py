"""Adaptive tuning against an exhaustive sweep: measurement saved and regret per size.

One exhaustive campaign is recorded (bcast + allreduce, every algorithm, 1 B–1 MiB, 2 and
4 ranks, REPS repetitions). The adaptive procedure then replays it — drawing repetitions
from the recording instead of measuring — at two coarse-grid strides, and runs once live
on the same spec. Regret at a size = exhaustive median latency of the algorithm the rules
choose / exhaustive median of the fastest algorithm there.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import run_campaign

from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError
from collbench.sizes import format_size
from collbench.store import Store
from collbench.tune.adaptive import Config, live, replay
from collbench.tune.adaptive.evaluate import Evaluation, evaluate
from collbench.tune.adaptive.replay import load
from collbench.tune.select import Options, Selection, select

REPS = 8
STRIDES = (2, 4)
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
[run]
repetitions = {REPS}
timeout = 600
seed = 11
"""


def _line(name: str, ev: Evaluation, extra: str = "") -> str:
    r = ev.regrets()
    ex = [s.exhaustive_regret for s in ev.sizes]
    return (f"| {name} | {ev.adaptive_points} / {ev.exhaustive_points} | "
            f"{ev.points_saved:.0%} | {ev.kernel_saved:.0%} | {ev.agreement:.0%} | "
            f"{statistics.median(r):.3f} / {max(r):.2f} | {statistics.median(ex):.3f} / "
            f"{max(ex):.2f} |{extra}")


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


def _simulated(root: Path) -> list[str]:
    """The same comparison on a SimGrid campaign (deterministic: no significance tests)."""
    try:
        from collbench.launch.simgrid import find_smpi

        find_smpi()
    except (UserError, ImportError) as e:
        return [f"No simulated campaign: {e}"]
    exh = root / "simulated"
    wall = _run_allowing_failed_points(SIM_SPEC, exh)
    options = Options(significance=False)
    exhaustive = select(Store(exh), options)
    evs = {}
    for stride in STRIDES:
        run, rec = replay(exh, root / f"sim-replay{stride}", Config(stride=stride), options)
        evs[stride] = evaluate(rec, run.selection, exhaustive, run.tally)
    return [
        "",
        "### Simulated campaign (SimGrid)",
        "",
        f"The same sweep simulated with SMPI on the built-in `jupiter` platform at 4 and 16 "
        f"ranks (one launch per algorithm, as SMPI has no MPI_T; 2 repetitions; {wall:.0f} s; "
        "SMPI's algorithms that abort are left out). A simulation is deterministic — its "
        "repetitions are identical — so both rules take the fastest algorithm per size "
        "untested (`--no-significance`), and racing drops an algorithm as soon as its two "
        "repetitions lie above the leader's.",
        "",
        "| run | point repetitions (adaptive / exhaustive) | points saved | kernel time saved "
        "| same choice as exhaustive rules | regret median / max | exhaustive rules' regret "
        "median / max |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(_line(f"simulated replay, stride {s}", evs[s]) for s in STRIDES),
    ]


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        exh = root / "exhaustive"
        wall_exh = run_campaign(SPEC, exh)
        exhaustive: Selection = select(Store(exh))
        recorded = load(Store(exh))
        launches_exh = len(list((exh / "launches").glob("*.jsonl")))
        evals: dict[int, Evaluation] = {}
        for stride in STRIDES:
            run, rec = replay(exh, root / f"replay{stride}", Config(stride=stride), seed=1)
            evals[stride] = evaluate(rec, run.selection, exhaustive, run.tally)
        spec = root / "live.toml"
        spec.write_text(SPEC)
        start = time.monotonic()
        lrun = live(spec, root / "live", find_mpi(), Config(stride=STRIDES[0]))
        wall_live = time.monotonic() - start
        live_ev = evaluate(recorded, lrun.selection, exhaustive, lrun.tally)
        simulated = _simulated(root)
    default = STRIDES[0]
    lines = [
        "## Adaptive tuning: measurement saved and regret",
        "",
        f"Command: `python benchmarks/run_all.py adaptive`. An exhaustive campaign (bcast and "
        f"allreduce, every Open MPI algorithm and the default, 1 B–1 MiB, 2 and 4 ranks — 4 "
        f"oversubscribed on 2 cores —, {REPS} repetitions, 200/20 iterations) is recorded "
        f"({launches_exh} launches, {wall_exh:.0f} s), then `collbench tune --adaptive` "
        "replays it: each repetition the adaptive run asks for is drawn, without "
        "replacement, from the recording, so both see the same data. Regret at a size = "
        "exhaustive median latency of the algorithm the rules run there / exhaustive median "
        "of the fastest algorithm there (1 = no loss), for the adaptive rules and, as the "
        "yardstick, for the rules from the full exhaustive data (which keep the default "
        "wherever the fastest is not significantly faster). Method: docs/adaptive.md.",
        "",
        "| run | point repetitions (adaptive / exhaustive) | points saved | kernel time saved "
        "| same choice as exhaustive rules | regret median / max | exhaustive rules' regret "
        "median / max |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for stride in STRIDES:
        lines.append(_line(f"replay, stride {stride}" + (" (default)" if stride == default
                                                          else ""), evals[stride]))
    lines.append(_line(f"live, stride {default} (fresh measurements)", live_ev))
    ev = evals[default]
    r, ex = ev.regrets(), [s.exhaustive_regret for s in ev.sizes]
    lines += [
        "",
        f"**Summary** (replay, stride {default}): {ev.kernel_saved:.0%} of the kernel time and "
        f"{ev.points_saved:.0%} of the point repetitions saved; regret median "
        f"{statistics.median(r):.3f}, max {max(r):.2f} (rules from the exhaustive data: "
        f"{statistics.median(ex):.3f}, {max(ex):.2f}); the same algorithm as the exhaustive "
        f"rules at {ev.agreement:.0%} of the {len(ev.sizes)} sizes.",
        "",
        f"Live run: {lrun.launches} launches in {lrun.tally.rounds} rounds, {wall_live:.0f} s "
        f"wall time, against {launches_exh} launches and {wall_exh:.0f} s for the exhaustive "
        "campaign. Kernel time is what adaptive saves; each round is one more mpirun start "
        "per process count, so on a sweep this small, where one MPI_T launch per repetition "
        "measures everything, start-up can eat the saving in wall time.",
        "",
        f"Regret per size, replay with stride {default}: adaptive / exhaustive rules "
        "(algorithms named where the two rules differ):",
        "",
        *_per_size(evals[default]),
        *simulated,
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
