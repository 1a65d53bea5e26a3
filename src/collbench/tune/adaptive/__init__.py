"""Adaptive tuning: the rules of an exhaustive sweep for a fraction of its measurements.

Three ideas (docs/adaptive.md): race the algorithms at a size and stop repeating those
clearly slower than the leader (race.py); start from a coarse size grid and bisect only
between sizes whose answers differ, measuring only the algorithms not dominated at the
neighbouring sizes (engine.py); decide with tune's own selection over what was measured,
so the rules come out of the same code as `collbench tune` (tune/select.py). Measurement
cutters, each optional (docs/adaptive.md): screening, gap and futility drops (race.py), one
repetition on exact (simulated) data, a repetition cap, and model-guided pruning
(prune.py).

    live(spec, out, mpi, ...)    measure with the real runner into results folder `out`
    replay(results, out, ...)    sample a recorded exhaustive campaign instead (replay.py)
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collbench.analyse.stability import SIMULATED
from collbench.errors import UserError
from collbench.models.predict import Shape
from collbench.store import Store
from collbench.tune.adaptive.engine import Config, Context, ContextTuner, Request, Tally, run
from collbench.tune.adaptive.live import Interrupted
from collbench.tune.adaptive.precise import Precision
from collbench.tune.adaptive.prune import ModelPruner, from_rows
from collbench.tune.adaptive.race import RaceConfig
from collbench.tune.adaptive.replay import Recorded, ReplayMeasurer, load, write_served
from collbench.tune.select import Options, Selection, select

__all__ = ["AdaptiveRun", "Config", "Interrupted", "Precision", "PruneModel", "RaceConfig",
           "live", "replay"]


@dataclass(frozen=True)
class AdaptiveRun:
    selection: Selection
    tuners: dict[Context, ContextTuner]
    tally: Tally
    results: Path  # the results folder holding what was measured
    launches: int = 0  # launches run (live mode)


@dataclass(frozen=True)
class PruneModel:
    """Model-guided pruning (prune.py): a p2p model file and its relative error bound."""

    p2p: Path
    error: float


def _fit(config: Config, options: Options, max_reps: int, where: str,
         exact: bool = False) -> Config:
    """The config with the data's repetition count and tune's statistical options.

    Exact (simulated) figures need one repetition and no test: the fastest wins."""
    if exact:
        race = replace(config.race, max_reps=1, min_reps=1, significance=False,
                       confidence=options.confidence)
        return replace(config, race=race)
    if config.max_reps is not None:
        max_reps = min(max_reps, config.max_reps)
    if max_reps < 2:
        raise UserError(f"{where}: {max_reps} repetition(s) per point; adaptive tuning needs "
                        "at least 2 (6 or more for significant switches; docs/adaptive.md)")
    race = replace(config.race, max_reps=max_reps, min_reps=min(config.race.min_reps, max_reps),
                   confidence=options.confidence, significance=options.significance)
    return replace(config, race=race)


def _pruner(prune: PruneModel, store: Store, exact: bool,
            rows: Mapping[Request, Sequence[Mapping[str, Any]]]) -> ModelPruner:
    from collbench.analyse.modeldata import machine_shape
    from collbench.models.p2pfile import read_p2p

    if not 0 <= prune.error < 1:
        raise UserError(f"--prune-error {prune.error}: not valid; valid: 0 <= error < 1")
    try:
        shape = machine_shape(store)
    except UserError:
        shape = Shape()
    try:
        return from_rows(read_p2p(prune.p2p, required_levels=()), shape, prune.error, exact,
                         rows)
    except UserError as e:
        raise UserError(f"--prune-model {prune.p2p}: {e}") from None


def _settings(config: Config, prune: PruneModel | None,
              precision: Precision | None) -> dict[str, Any]:
    r = config.race
    return {"min_reps": r.min_reps, "max_reps": r.max_reps, "alpha_drop": r.alpha_drop,
            "confidence": r.confidence, "stride": config.stride, "screen": r.screen,
            "drop_gap": r.gap, "futile": r.futile,
            "prune_model": str(prune.p2p) if prune else None,
            "prune_error": prune.error if prune else None,
            "precision": precision.target if precision else None,
            "precision_first": precision.first if precision else None}


def replay(source: Path, out: Path, config: Config | None = None,
           options: Options | None = None, seed: int = 0,
           prune: PruneModel | None = None,
           precision: Precision | None = None) -> tuple[AdaptiveRun, Recorded]:
    """Adaptive tuning against the recorded campaign `source`; what it sampled goes to `out`.

    max_reps is the campaign's repetition count, so the adaptive run can never see more
    than the exhaustive one did. With `precision`, each drawn repetition is cut to the
    iterations a precision run would have timed (precise.py; needs recorded samples)."""
    options = options or Options()
    store = Store(source)
    recorded = load(store, options.stat, options.collectives, samples=precision is not None)
    config = _fit(config or Config(), options, recorded.repetitions(), str(source),
                  recorded.exact)
    pruner = _pruner(prune, store, recorded.exact, recorded.rows) if prune else None
    if pruner is not None:
        config = replace(config, prune=pruner)
    measurer = ReplayMeasurer(recorded, seed, precision)
    tuners, tally = run(recorded.contexts(), measurer, config)
    tally.pruned = pruner.pruned if pruner else 0
    served = write_served(measurer, store, out)
    return AdaptiveRun(select(served, options), tuners, tally, out), recorded


def live(spec_path: Path, out: Path, mpi: Any, config: Config | None = None,
         options: Options | None = None, resume: bool = False,
         backend_name: str | None = None, progress_stream: Any = None,
         prune: PruneModel | None = None,
         precision: Precision | None = None) -> AdaptiveRun:
    """Adaptive tuning with real launches; `run.repetitions` of the spec is max_reps (one
    on a simulator: its figures are exact). With `precision`, every blocking point runs in
    the kernel's precision mode, capped at the spec's iteration count (live.precise)."""
    from collbench.campaign import Request, SpecSource, open_campaign, prepare
    from collbench.catalog.algorithms import DEFAULT
    from collbench.tune.adaptive.live import LiveMeasurer, contexts, precise, template_rows

    options = options or Options()
    source = SpecSource.from_file(spec_path)
    spec = source.spec
    exact = (backend_name or spec.run.backend) in SIMULATED
    config = _fit(config or Config(), options, spec.run.repetitions,
                  f"{spec_path}: run.repetitions", exact)
    one = spec.model_copy(update={"run": spec.run.model_copy(update={"repetitions": 1,
                                                                      "order": "sequential"})})
    if precision is not None and exact:
        precision = None  # a simulated point repeats exactly: one iteration says it all
    # Launch templates: every point once, planned for the backend that will run them.
    templates = prepare(SpecSource(one, source.text, source.origin), mpi,
                        Request(out, backend=backend_name)).plan
    if precision is not None:
        templates = precise(templates, precision, spec.measure.max_seconds)
    ctxs = {k: v for k, v in contexts(templates).items()
            if not options.collectives or k[0] in options.collectives}
    if not ctxs:
        raise UserError(f"{spec_path}: measures none of --collective "
                        f"{', '.join(options.collectives)}; nothing to tune")
    for (coll, nprocs), (_, labels) in ctxs.items():
        if DEFAULT not in labels:
            raise UserError(f"{spec_path}: measure.algorithms: {coll} np={nprocs} does not "
                            "measure 'default'; tuning switches away from the default only "
                            "where it is beaten, so measure it too (e.g. algorithms = \"all\")")
    seed = spec.run.seed if spec.run.seed is not None else secrets.randbits(31)
    camp = open_campaign(source, mpi, Request(out, resume=resume, backend=backend_name,
                                              meta={"adaptive": _settings(config, prune,
                                                                            precision)}),
                         plan=replace(templates, seed=seed, launches=()))
    templates = replace(templates, seed=camp.plan.seed)  # a resumed run keeps its seed
    pruner = _pruner(prune, camp.store, exact, template_rows(templates)) if prune else None
    if pruner is not None:
        config = replace(config, prune=pruner)
    measurer = LiveMeasurer(templates, camp, camp.plan.seed, options.stat, progress_stream)
    tuners, tally = run(ctxs, measurer, config)
    tally.pruned = pruner.pruned if pruner else 0
    return AdaptiveRun(select(camp.store, options), tuners, tally, out, measurer.launches)
