"""`collbench tune --adaptive`: its options, and the Selection the rest of `tune` writes.

    collbench tune spec.toml --adaptive -o tuned.rules     measure live (spec = what may be
                                                           measured; run.repetitions = most)
    collbench tune results/x --adaptive -o tuned.rules     replay a recorded campaign: what
                                                           the adaptive run would have chosen
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from collbench.catalog.mpi import find_mpi
from collbench.commands import options
from collbench.errors import UserError
from collbench.store import Store
from collbench.tune.adaptive.engine import Config
from collbench.tune.adaptive.race import RaceConfig
from collbench.tune.select import Options, Selection


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "adaptive (docs/adaptive.md)",
        "With --adaptive, RESULTS may be a campaign spec: measure it adaptively, live. A "
        "results folder is replayed: repetitions are drawn from it instead of measured.")
    g.add_argument("--adaptive", action="store_true",
                   help="measure only what the rules need: race algorithms, refine only "
                        "around crossovers")
    g.add_argument("--adaptive-results", type=Path, metavar="DIR",
                   help="folder for what the adaptive run measures (default: OUTPUT.adaptive)")
    g.add_argument("--resume", action="store_true",
                   help="continue an interrupted live adaptive run stored there")
    g.add_argument("--stride", type=options.count(1, 1024), default=2,
                   help="coarse size grid: every STRIDE-th size (default: %(default)s)")
    g.add_argument("--min-reps", type=options.count(2, 100_000), default=3,
                   help="repetitions before an algorithm may be dropped (default: %(default)s)")
    g.add_argument("--drop-alpha", type=options.fraction, default=0.2,
                   help="chance, over all looks, of dropping an algorithm that is not slower "
                        "than the leader (default: %(default)s)")
    g.add_argument("--seed", type=options.count(0, options.MAX_COUNT), default=0,
                   help="replay: order in which stored repetitions are drawn")
    g.add_argument("--backend", help="live: override the spec's run.backend")


def _config(args: argparse.Namespace) -> Config:
    if args.stride < 1 or args.min_reps < 2 or not 0 < args.drop_alpha < 1:
        raise UserError(f"--stride {args.stride} / --min-reps {args.min_reps} / --drop-alpha "
                        f"{args.drop_alpha}: not valid; valid: stride >= 1, min-reps >= 2, "
                        "drop-alpha in (0, 1)")
    return Config(RaceConfig(min_reps=args.min_reps, alpha_drop=args.drop_alpha),
                  stride=args.stride)


def _replay_folder(out: Path) -> None:
    """Replay output is derived data: an earlier replay there is replaced, nothing else."""
    if not out.exists():
        return
    try:
        replayed = "replay_of" in Store(out).campaign()
    except UserError:
        replayed = False
    if not replayed:
        raise UserError(f"{out}: exists and is not an adaptive replay; choose another "
                        "--adaptive-results folder")
    shutil.rmtree(out)


def selection(args: argparse.Namespace, options: Options) -> tuple[Selection, Path]:
    """(selection, results folder of what was measured) for `tune --adaptive`."""
    from collbench.tune import adaptive

    config = _config(args)
    out = args.adaptive_results or args.output.with_name(args.output.name + ".adaptive")
    source: Path = args.results
    if source.is_dir():
        _replay_folder(out)
        run, recorded = adaptive.replay(source, out, config, options, seed=args.seed)
        total, total_k = recorded.points(), recorded.kernel_us()
        print(f"adaptive replay of {source}: {run.tally.measured} of {total} point "
              f"repetitions ({run.tally.measured / max(1, total):.0%}), "
              f"{run.tally.kernel_us / max(total_k, 1e-9):.0%} of the kernel time, "
              f"{run.tally.rounds} rounds; drawn repetitions in {out}", file=sys.stderr)
        return run.selection, out
    if not source.exists():
        raise UserError(f"{source}: no such file or folder; give a campaign spec (live) or a "
                        "results folder (replay)")
    mpi = find_mpi(args.mpi, args.mpi_from_path)
    try:
        run = adaptive.live(source, out, mpi, config, options, resume=args.resume,
                            backend_name=args.backend)
    except adaptive.Interrupted:
        raise UserError(f"{out}: interrupted; finished launches are stored; continue with the "
                        "same command and --resume") from None
    print(f"adaptive run: {run.tally.measured} point repetitions in {run.launches} launches, "
          f"{run.tally.rounds} rounds, kernel time {run.tally.kernel_us / 1e6:.2f} s; "
          f"measurements in {out}", file=sys.stderr)
    return run.selection, out
