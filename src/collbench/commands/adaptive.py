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
from typing import TYPE_CHECKING

from collbench.catalog.mpi import find_mpi
from collbench.commands import options
from collbench.errors import UserError
from collbench.store import Store

if TYPE_CHECKING:  # imported when used: they pull in the models and numpy (0.3 s)
    from collbench.tune.adaptive import Config, Precision, PruneModel
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
    g.add_argument("--max-reps", type=options.count(2, 100_000),
                   help="at most this many repetitions per point (default: the spec's "
                        "run.repetitions, or the recording's)")
    g.add_argument("--screen", type=_screen, metavar="F",
                   help="drop an algorithm from its first repetition on when its fastest "
                        "repetition is F times slower than the leader's slowest (e.g. 1.3)")
    g.add_argument("--drop-gap", type=options.fraction, metavar="G",
                   help="from --min-reps on, drop an algorithm whose median is more than G "
                        "above the leader's (e.g. 0.05)")
    g.add_argument("--futile", type=options.fraction, metavar="D",
                   help="from --min-reps on, drop an algorithm whose median is not at least "
                        "D below the default's: switching would gain less (e.g. 0.05)")
    g.add_argument("--prune-model", type=Path, metavar="P2P",
                   help="a .p2p.toml model (collbench model p2p): do not race algorithms "
                        "it predicts slower beyond its error (--prune-error)")
    g.add_argument("--prune-error", type=_error, default=0.035, metavar="E",
                   help="relative error bound of the model's predictions, e.g. its p95 error "
                        "from compare --against (default: %(default)s, SimGrid's)")
    g.add_argument("--precision", type=_precision, metavar="F",
                   help="precision-driven repetitions: time each repetition of a point only "
                        "until the 95%% interval of its median is within +-F (e.g. 0.1), "
                        "never beyond the spec's iterations; replay needs recorded samples")
    g.add_argument("--min-iterations", type=options.count(1, 100_000), metavar="N",
                   help="with --precision: the first batch of timed iterations (default: "
                        "the spec's measure.min_iterations, 20)")
    g.add_argument("--seed", type=options.count(0, options.MAX_COUNT), default=0,
                   help="replay: order in which stored repetitions are drawn")
    g.add_argument("--backend", help="live: override the spec's run.backend")


# argparse types of the adaptive options (bounded before anything uses them)
_screen = options.number(lambda v: 1 < v <= 100, "above 1, at most 100")
_error = options.number(lambda v: 0 <= v < 1,
                        "0 to below 1 (an error of 100 % or more prunes nothing)")
_precision = options.number(lambda v: 1e-4 <= v <= 1,
                            "0.0001 to 1 (a relative half-width, e.g. 0.1)")


def _precise(args: argparse.Namespace, spec_first: int | None) -> Precision | None:
    from collbench.tune.adaptive import Precision

    if args.precision is None:
        if args.min_iterations is not None:
            raise UserError(f"--min-iterations {args.min_iterations}: only with --precision "
                            "(the first batch of a precision-driven repetition)")
        return None
    first = args.min_iterations or spec_first
    return Precision(args.precision, first) if first else Precision(args.precision)


def _config(args: argparse.Namespace) -> Config:
    from collbench.tune.adaptive import Config, RaceConfig

    if args.stride < 1 or args.min_reps < 2 or not 0 < args.drop_alpha < 1:
        raise UserError(f"--stride {args.stride} / --min-reps {args.min_reps} / --drop-alpha "
                        f"{args.drop_alpha}: not valid; valid: stride >= 1, min-reps >= 2, "
                        "drop-alpha in (0, 1)")
    return Config(RaceConfig(min_reps=args.min_reps, alpha_drop=args.drop_alpha,
                             screen=args.screen, gap=args.drop_gap, futile=args.futile),
                  stride=args.stride, max_reps=args.max_reps)


def _prune(args: argparse.Namespace) -> PruneModel | None:
    from collbench.tune.adaptive import PruneModel

    if args.prune_model is None:
        return None
    if not args.prune_model.is_file():
        raise UserError(f"--prune-model {args.prune_model}: no such file; give a .p2p.toml "
                        "(collbench model p2p RESULTS -o FILE.p2p.toml)")
    return PruneModel(args.prune_model, args.prune_error)


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


def _spec_first(spec: Path) -> int | None:
    """The spec's measure.min_iterations when it sets one (live --precision's first batch)."""
    from collbench.campaign import SpecSource

    measure = SpecSource.from_file(spec).spec.measure
    return measure.min_iterations if "min_iterations" in measure.model_fields_set else None


def _pruned(n: int) -> str:
    return f", {n} algorithm races pruned by the model" if n else ""


def selection(args: argparse.Namespace, options: Options) -> tuple[Selection, Path]:
    """(selection, results folder of what was measured) for `tune --adaptive`."""
    from collbench.tune import adaptive

    config = _config(args)
    prune = _prune(args)
    out = args.adaptive_results or args.output.with_name(args.output.name + ".adaptive")
    source: Path = args.results
    if source.is_dir():
        _replay_folder(out)
        run, recorded = adaptive.replay(source, out, config, options, seed=args.seed,
                                        prune=prune, precision=_precise(args, None))
        total, total_k = recorded.points(), recorded.kernel_us()
        print(f"adaptive replay of {source}: {run.tally.measured} of {total} point "
              f"repetitions ({run.tally.measured / max(1, total):.0%}), "
              f"{run.tally.kernel_us / max(total_k, 1e-9):.0%} of the kernel time, "
              f"{run.tally.rounds} rounds{_pruned(run.tally.pruned)}; drawn repetitions in "
              f"{out}", file=sys.stderr)
        return run.selection, out
    if not source.exists():
        raise UserError(f"{source}: no such file or folder; give a campaign spec (live) or a "
                        "results folder (replay)")
    mpi = find_mpi(args.mpi, args.mpi_from_path)
    try:
        run = adaptive.live(source, out, mpi, config, options, resume=args.resume,
                            backend_name=args.backend, prune=prune,
                            precision=_precise(args, _spec_first(source)))
    except adaptive.Interrupted:
        raise UserError(f"{out}: interrupted; finished launches are stored; continue with the "
                        "same command and --resume") from None
    print(f"adaptive run: {run.tally.measured} point repetitions in {run.launches} launches, "
          f"{run.tally.rounds} rounds{_pruned(run.tally.pruned)}, kernel time "
          f"{run.tally.kernel_us / 1e6:.2f} s; "
          f"measurements in {out}", file=sys.stderr)
    return run.selection, out
