"""Adaptive tuning: the rules of an exhaustive sweep for a fraction of its measurements.

Three ideas (docs/adaptive.md): race the algorithms at a size and stop repeating those
clearly slower than the leader (race.py); start from a coarse size grid and bisect only
between sizes whose answers differ, measuring only the algorithms not dominated at the
neighbouring sizes (engine.py); decide with tune's own selection over what was measured,
so the rules come out of the same code as `collbench tune` (tune/select.py).

    live(spec, out, mpi, ...)    measure with the real runner into results folder `out`
    replay(results, out, ...)    sample a recorded exhaustive campaign instead (replay.py)
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collbench.errors import UserError
from collbench.store import Store
from collbench.tune.adaptive.engine import Config, Context, ContextTuner, Tally, run
from collbench.tune.adaptive.live import Interrupted
from collbench.tune.adaptive.race import RaceConfig
from collbench.tune.adaptive.replay import Recorded, ReplayMeasurer, load, write_served
from collbench.tune.select import Options, Selection, select

__all__ = ["AdaptiveRun", "Config", "Interrupted", "RaceConfig", "live", "replay"]


@dataclass(frozen=True)
class AdaptiveRun:
    selection: Selection
    tuners: dict[Context, ContextTuner]
    tally: Tally
    results: Path  # the results folder holding what was measured
    launches: int = 0  # launches run (live mode)


def _fit(config: Config, options: Options, max_reps: int, where: str) -> Config:
    """The config with the data's repetition count and tune's statistical options."""
    if max_reps < 2:
        raise UserError(f"{where}: {max_reps} repetition(s) per point; adaptive tuning needs "
                        "at least 2 (6 or more for significant switches; docs/adaptive.md)")
    race = replace(config.race, max_reps=max_reps, min_reps=min(config.race.min_reps, max_reps),
                   confidence=options.confidence, significance=options.significance)
    return replace(config, race=race)


def _settings(config: Config) -> dict[str, Any]:
    r = config.race
    return {"min_reps": r.min_reps, "max_reps": r.max_reps, "alpha_drop": r.alpha_drop,
            "confidence": r.confidence, "stride": config.stride}


def replay(source: Path, out: Path, config: Config | None = None,
           options: Options | None = None, seed: int = 0) -> tuple[AdaptiveRun, Recorded]:
    """Adaptive tuning against the recorded campaign `source`; what it sampled goes to `out`.

    max_reps is the campaign's repetition count, so the adaptive run can never see more
    than the exhaustive one did."""
    options = options or Options()
    store = Store(source)
    recorded = load(store, options.stat, options.collectives)
    config = _fit(config or Config(), options, recorded.repetitions(), str(source))
    measurer = ReplayMeasurer(recorded, seed)
    tuners, tally = run(recorded.contexts(), measurer, config)
    served = write_served(measurer, store, out)
    return AdaptiveRun(select(served, options), tuners, tally, out), recorded


def live(spec_path: Path, out: Path, mpi: Any, config: Config | None = None,
         options: Options | None = None, resume: bool = False,
         backend_name: str | None = None, progress_stream: Any = None) -> AdaptiveRun:
    """Adaptive tuning with real launches; `run.repetitions` of the spec is max_reps."""
    from collbench.campaign import Request, SpecSource, open_campaign, prepare
    from collbench.catalog.algorithms import DEFAULT
    from collbench.tune.adaptive.live import LiveMeasurer, contexts

    options = options or Options()
    source = SpecSource.from_file(spec_path)
    spec = source.spec
    config = _fit(config or Config(), options, spec.run.repetitions,
                  f"{spec_path}: run.repetitions")
    one = spec.model_copy(update={"run": spec.run.model_copy(update={"repetitions": 1,
                                                                      "order": "sequential"})})
    # Launch templates: every point once, planned for the backend that will run them.
    templates = prepare(SpecSource(one, source.text, source.origin), mpi,
                        Request(out, backend=backend_name)).plan
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
                                              meta={"adaptive": _settings(config)}),
                         plan=replace(templates, seed=seed, launches=()))
    templates = replace(templates, seed=camp.plan.seed)  # a resumed run keeps its seed
    measurer = LiveMeasurer(templates, camp, camp.plan.seed, options.stat, progress_stream)
    tuners, tally = run(ctxs, measurer, config)
    return AdaptiveRun(select(camp.store, options), tuners, tally, out, measurer.launches)
