"""Run a study stage by stage; each stage is a campaign folder, so a killed study resumes.

Layout of a study folder:
    study.toml              the study as written (resume needs the same text's meaning)
    study.json              name, seed, the parameters as resolved against the MPI
    stages/NN-<param>/      an ordinary results folder (spec.toml is the stage's campaign)
    stages/NN-<param>/decision.json   written once the stage is decided (its existence
                            means "done"; later stages are built from it)
"""

from __future__ import annotations

import json
import os
import secrets
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from collbench.campaign import Prepared, Request, SpecSource, open_campaign, prepare
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.store import Store, hold
from collbench.storefiles import atomic_write
from collbench.study import toml
from collbench.study.decide import Decision, decide
from collbench.study.mca import McaParam
from collbench.study.placement import check_placements
from collbench.study.spec import (
    Parameter,
    Study,
    parameters_from_json,
    parameters_json,
    resolve,
    stage_spec,
)

STUDY_FORMAT: Final = 1


@dataclass
class StudyRun:
    decisions: list[Decision] = field(default_factory=list)
    interrupted: bool = False
    failed_points: int = 0


def stage_dir(out: Path, param: Parameter, index: int) -> Path:
    return out / "stages" / param.stage_name(index)


def read_meta(out: Path) -> dict[str, Any]:
    path = out / "study.json"
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise UserError(f"{out}: not a study folder (no study.json)") from None
    except ValueError as e:
        raise UserError(f"{path}: unreadable: {e}") from None
    if not isinstance(data, dict) or data.get("format") != STUDY_FORMAT:
        raise UserError(f"{path}: format {data.get('format') if isinstance(data, dict) else None!r}"
                        f" is not supported; valid: {STUDY_FORMAT}")
    return data


def read_decisions(out: Path, params: tuple[Parameter, ...]) -> list[Decision]:
    """The decisions of the stages done so far, in order."""
    done = []
    for i, p in enumerate(params):
        path = stage_dir(out, p, i) / "decision.json"
        if not path.exists():
            break
        done.append(Decision.from_json(json.loads(path.read_text())))
    return done


def _open(study: Study, out: Path, params: tuple[Parameter, ...], mpi: MpiInstall,
          resume: bool) -> dict[str, Any]:
    """study.json of a new or resumed study folder (held by this process from now on)."""
    hold(out)
    if (out / "study.json").exists():
        if not resume:
            raise UserError(f"{out}: already holds study {read_meta(out).get('name')!r}; add "
                            "--resume to continue it, or choose another -o folder")
        stored = read_meta(out)
        if tomllib.loads((out / "study.toml").read_text()) != tomllib.loads(study.text):
            raise UserError(f"{study.source}: differs from the study stored in {out}; resume "
                            "needs the same study (use another -o folder for a new one)")
        if parameters_from_json(stored["parameters"]) != params:
            raise UserError(f"{out}: the parameters resolve differently against {mpi.version} "
                            "than when the study started; use another -o folder")
        return stored
    # study.toml alone is what an interrupted creation leaves: it is written again.
    if [n for n in os.listdir(out) if not n.startswith(".") and n != "study.toml"]:
        raise UserError(f"{out}: folder is not empty; choose another -o folder")
    seed = study.spec.run.seed if study.spec.run.seed is not None else secrets.randbits(31)
    meta = {"format": STUDY_FORMAT, "name": study.name, "source": study.source, "seed": seed,
            "statistic": study.table.statistic, "column": study.column,
            "confidence": study.table.confidence, "min_gain": study.table.min_gain,
            "repetitions": study.spec.run.repetitions,
            "mpi": f"{mpi.implementation} {mpi.version}", "mpirun": str(mpi.mpirun),
            "parameters": parameters_json(params)}
    atomic_write(out / "study.toml", study.text.encode())
    atomic_write(out / "study.json", (json.dumps(meta, indent=2) + "\n").encode())
    return meta


def preflight(study: Study, params: tuple[Parameter, ...], mpi: MpiInstall, seed: int,
              out: Path, backend: str | None = None) -> list[Prepared]:
    """Every stage planned for its backend, as if each stage kept its baseline: a spec
    problem in a late stage is reported before the first stage runs."""
    kept = {p.name: p.baseline for p in params}
    stages = []
    for i, p in enumerate(params):
        text = toml.dumps(stage_spec(study, params, i, kept, seed + i))
        where = f"{study.source} (stage {i + 1}, {p.name})"
        stages.append(prepare(SpecSource.from_text(text, where), mpi,
                              Request(stage_dir(out, p, i), backend=backend),
                              check_placement=False))  # check_placements names the parameter
    return stages


def run_study(study: Study, out: Path, mpi: MpiInstall, mca: dict[str, McaParam],
              resume: bool = False, backend_name: str | None = None,
              stream: TextIO | None = None,
              say: Callable[[str], None] = lambda _: None) -> StudyRun:
    """Run (or continue) every stage in order; stop early when interrupted."""
    params = resolve(study, mca, f"{mpi.implementation} {mpi.version}")
    stages = preflight(study, params, mpi, study.spec.run.seed or 0, out, backend_name)
    check_placements(study, params, stages)
    meta = _open(study, out, params, mpi, resume)
    result = StudyRun(read_decisions(out, params))
    kept = {d.parameter: d.kept for d in result.decisions}
    for i in range(len(result.decisions), len(params)):
        p = params[i]
        folder = stage_dir(out, p, i)
        text = toml.dumps(stage_spec(study, params, i, kept, int(meta["seed"]) + i),
                          header=f"Stage {i + 1} of study {study.name} ({study.source}): "
                                 f"{p.name}, baseline {p.baseline}.\nWritten by collbench "
                                 "study; `collbench run` on this file repeats the stage.")
        source = SpecSource.from_text(text, str(Store(folder).spec_file))
        camp = open_campaign(source, mpi, Request(folder, resume=True, backend=backend_name,
                                                  meta={"study": study.name}))
        say(f"stage {i + 1}/{len(params)}: {p.name} = {p.baseline} (baseline) vs "
            f"{', '.join(p.candidates)}; {len(camp.plan.launches)} launches")
        summary = camp.run(progress=stream)
        result.failed_points += sum(n for s, n in summary.points.items() if s != "ok")
        if summary.interrupted:
            result.interrupted = True
            return result
        decision = decide(camp.store, p, study.column, study.table.confidence,
                          study.table.min_gain, source.spec.run.repetitions)
        atomic_write(folder / "decision.json",
                     (json.dumps(decision.to_json(), indent=2) + "\n").encode())
        say(f"stage {i + 1}/{len(params)}: {p.name}: kept {decision.kept} ({decision.reason})")
        result.decisions.append(decision)
        kept[p.name] = decision.kept
    return result
