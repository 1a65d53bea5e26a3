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
    from collbench import provenance
    from collbench.catalog.algorithms import DEFAULT, load_catalog
    from collbench.kernel.build import build_kernel
    from collbench.launch.base import get_backend
    from collbench.plan import make_plan
    from collbench.runner import RowContext
    from collbench.spec import load_spec, parse_spec
    from collbench.tune.adaptive.live import LiveMeasurer, contexts

    options = options or Options()
    spec = load_spec(spec_path)
    config = _fit(config or Config(), options, spec.run.repetitions,
                  f"{spec_path}: run.repetitions")
    catalog = load_catalog(mpi)
    one = spec.model_copy(update={"run": spec.run.model_copy(update={"repetitions": 1,
                                                                      "order": "sequential"})})
    templates = make_plan(one, catalog, source=str(spec_path))
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
    store = Store(out)
    if store.exists():
        if not resume:
            raise UserError(f"{out}: already holds campaign {store.campaign().get('name')!r}; "
                            "add --resume to continue it, or choose another folder")
        stored = parse_spec(store.spec_text(), str(out / "spec.toml"))
        if stored.model_dump(mode="json") != spec.model_dump(mode="json"):
            raise UserError(f"{spec_path}: differs from the spec stored in {out}; resume "
                            "needs the same spec")
        meta = store.campaign()
        if meta.get("adaptive") != _settings(config):
            raise UserError(f"{out}: was started with adaptive settings {meta.get('adaptive')};"
                            " resume with the same ones")
        seed = int(meta.get("seed", 0))
    else:
        seed = spec.run.seed if spec.run.seed is not None else secrets.randbits(31)
    backend = get_backend(backend_name or spec.run.backend, mpi)
    kernel = build_kernel(mpi.mpicc)
    if not store.exists():
        prov = provenance.collect(mpi, {"path": str(kernel.path),
                                        "fingerprint": kernel.fingerprint,
                                        "compile_command": kernel.compile_command})
        store.create({"name": spec.campaign.name, "seed": seed, "backend": backend.name,
                      "spec_source": str(spec_path),
                      "adaptive": _settings(config)},
                     spec_path.read_text(), replace(templates, launches=()).to_json(), prov)
    templates = replace(templates, seed=seed)
    measurer = LiveMeasurer(templates, store, backend, kernel.path,
                            RowContext(spec.campaign.name, backend.name, mpi.implementation,
                                       mpi.version), seed, options.stat, progress_stream)
    tuners, tally = run(ctxs, measurer, config)
    return AdaptiveRun(select(store, options), tuners, tally, out, measurer.launches)
