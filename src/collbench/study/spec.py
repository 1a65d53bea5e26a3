"""The study spec: a campaign spec (what and how to measure) plus a [study] table.

    [study]                       # statistic, confidence, min_gain are optional
    [[study.parameters]]          # in the order they are studied
    name = "mpi_leave_pinned"     # an MCA parameter, or bind_to / map_by (mpirun options)
    values = ["true", "false"]    # settings to try against the baseline
    baseline = "auto"             # optional: Open MPI's default (ompi_info) / measure.bind_to

Each parameter becomes one stage: a campaign whose only launch dimension besides the
process count is that parameter (baseline first, then the candidates), with the settings
kept by earlier stages fixed. `stage_spec` writes that campaign as a spec of its own, so a
stage folder is an ordinary results folder. Checks against the MPI (`resolve`) come after
the structural ones (`load_study`), before anything runs.
"""

from __future__ import annotations

import copy
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from collbench.errors import UserError, did_you_mean
from collbench.inputs import load_toml, read_text
from collbench.points import COLUMN_STATS as STATS
from collbench.spec import Spec, format_validation_error, spec_from_dict
from collbench.spec.fields import BIND_TO, MAP_BY, mca_value
from collbench.study.mca import McaParam, canonical, check_name, check_value, component_set

STUDY_REPETITIONS: Final = 30  # the classic study's count; [run] repetitions overrides it
LAUNCHER: Final = {"bind_to": BIND_TO, "map_by": MAP_BY}  # parameters mpirun sets itself

Value = Annotated[str, BeforeValidator(mca_value)]


def _known_keys(model: type[BaseModel], data: Any) -> Any:
    if isinstance(data, dict):
        valid = list(model.model_fields)
        for key in data:
            if key not in valid:
                raise ValueError(f"unknown key {key!r}; valid: {', '.join(valid)}"
                                 f"{did_you_mean(key, valid)}")
    return data


def _name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_]+", value):
        raise ValueError(f"{value!r} is not a parameter name (letters, digits, '_')")
    if value.upper().startswith("OMPI_MCA_"):
        raise ValueError(f"{value!r}: write the parameter name without OMPI_MCA_")
    return value


def _listify(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def _unique(values: list[str]) -> list[str]:
    for v in values:
        if values.count(v) > 1:
            raise ValueError(f"{v!r} is listed twice")
    return values


class ParameterTable(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    name: Annotated[str, BeforeValidator(_name)]
    values: Annotated[list[Value], BeforeValidator(_listify)] = Field(min_length=1)
    baseline: Value | None = None

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return _known_keys(cls, data)

    @model_validator(mode="after")
    def _distinct(self) -> ParameterTable:
        _unique(list(self.values))
        return self


class StudyTable(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    parameters: list[ParameterTable] = Field(min_length=1)
    statistic: Literal["avg", "median", "min", "max"] = "avg"
    confidence: float = Field(0.95, gt=0, lt=1)
    min_gain: float = Field(0.0, ge=0, lt=1)

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return _known_keys(cls, data)


class _Document(BaseModel):
    study: StudyTable


@dataclass(frozen=True)
class Parameter:
    """One stage's parameter, resolved against the MPI."""

    name: str
    kind: str  # "mca" or "launcher"
    baseline: str
    candidates: tuple[str, ...]  # the values tried against the baseline, baseline excluded
    mpi_default: str  # what Open MPI uses when the parameter is not set

    def stage_name(self, index: int) -> str:
        return f"{index + 1:02d}-{self.name}"


@dataclass(frozen=True)
class Study:
    source: str
    text: str  # the study TOML, verbatim
    base: dict[str, Any]  # the campaign part, as written plus the study defaults
    spec: Spec  # the campaign part, validated
    table: StudyTable

    @property
    def name(self) -> str:
        return self.spec.campaign.name

    @property
    def column(self) -> str:
        return STATS[self.table.statistic]


def load_study(path: Path) -> Study:
    """The study at `path`, structurally valid; UserError `<file>: <key>: <problem>`."""
    return parse_study(read_text(path, "study"), str(path))


def parse_study(text: str, source: str) -> Study:
    data = load_toml(text, source)
    if "study" not in data:
        raise UserError(f"{source}: study: required table is missing (a campaign spec? run it "
                        "with collbench run)")
    try:
        table = _Document.model_validate({"study": data.pop("study")}).study
    except ValidationError as e:
        raise UserError(format_validation_error(e, source)) from None
    base = _with_defaults(data, source)
    return Study(source, text, base, spec_from_dict(copy.deepcopy(base), source), table)


def _with_defaults(data: dict[str, Any], source: str) -> dict[str, Any]:
    base = copy.deepcopy(data)
    if base.get("zip"):
        raise UserError(f"{source}: zip: a study varies one parameter at a time; remove zip")
    if (base.get("mca") or {}).get("sweep"):
        raise UserError(f"{source}: mca.sweep: a study varies parameters itself; list them "
                        "as [[study.parameters]] instead")
    measure = base.setdefault("measure", {})
    for key in LAUNCHER:
        if isinstance(measure.get(key), list) and len(measure[key]) > 1:
            raise UserError(f"{source}: measure.{key}: give one value (the baseline); vary it "
                            f"as a study parameter (name = {key!r})")
    if isinstance(measure, dict):
        measure.setdefault("algorithms", "default")
    run = base.setdefault("run", {})
    if isinstance(run, dict):
        run.setdefault("repetitions", STUDY_REPETITIONS)
    return base


def resolve(study: Study, params: dict[str, McaParam], mpi: str) -> tuple[Parameter, ...]:
    """Each study parameter checked against the MPI's own list (ompi_info); UserError if not.

    mca.fixed is checked too: Open MPI would silently ignore a misspelt name there.
    """
    src = study.source
    fixed = dict((study.spec.mca.fixed or {}).items())
    for name, value in fixed.items():
        check_value(check_name(params, name, f"{src}: mca.fixed.{name}", mpi), value,
                    f"{src}: mca.fixed.{name}")
    out: list[Parameter] = []
    seen: dict[str, int] = {}
    for i, t in enumerate(study.table.parameters):
        where = f"{src}: study.parameters[{i}]"
        if t.name in LAUNCHER:
            param = _launcher(study, t, where)
            key = t.name
        else:
            p = check_name(params, t.name, f"{where}.name", mpi)
            key = canonical(params, t.name)
            if key in {canonical(params, n) for n in fixed}:
                raise UserError(f"{where}.name: {t.name!r} is also set in mca.fixed; the "
                                "study sets it: remove it there")
            param = _mca(p, t, where, params)
        if key in seen:
            raise UserError(f"{where}.name: {t.name!r} is studied twice (also "
                            f"study.parameters[{seen[key]}])")
        seen[key] = i
        out.append(param)
    return tuple(out)


def _launcher(study: Study, t: ParameterTable, where: str) -> Parameter:
    choices = LAUNCHER[t.name]
    for j, v in enumerate([*t.values, *([t.baseline] if t.baseline else [])]):
        if v not in choices:
            key = f"values[{j}]" if j < len(t.values) else "baseline"
            raise UserError(f"{where}.{key}: {v!r} is not valid for mpirun --"
                            f"{t.name.replace('_', '-')}; valid: {', '.join(choices)}"
                            f"{did_you_mean(v, choices)}")
    measured = getattr(study.spec.measure, t.name)[0]
    baseline = t.baseline or measured
    return Parameter(t.name, "launcher", baseline,
                     tuple(v for v in t.values if v != baseline), measured)


def _mca(p: McaParam, t: ParameterTable, where: str, params: dict[str, McaParam]) -> Parameter:
    target = params.get(canonical(params, t.name), p)
    values = [check_value(target, v, f"{where}.values[{j}]") for j, v in enumerate(t.values)]
    if t.baseline is not None:
        baseline = check_value(target, t.baseline, f"{where}.baseline")
    elif target.value:
        baseline = check_value(target, target.value, f"{where}.baseline")
    else:
        raise UserError(f"{where}.baseline: {t.name} has an empty default in ompi_info; give "
                        "the baseline setting explicitly")
    candidates = tuple(v for v in values if not _same(target, v, baseline))
    for j, v in enumerate(values):
        for i, earlier in enumerate(values[:j]):
            if v in candidates and _same(target, v, earlier):
                raise UserError(f"{where}.values[{j}]: {v!r} is the same setting as "
                                f"values[{i}] {earlier!r} for {target.name}; measure it once")
    if not candidates:
        raise UserError(f"{where}.values: every value equals the baseline {baseline!r}; "
                        "nothing to compare")
    return Parameter(t.name, "mca", baseline, candidates, target.value)


def _same(p: McaParam, a: str, b: str) -> bool:
    """Whether two spellings mean one setting (an enumerator's name and its number; a
    component list naming a component by its old name: ^vader is ^sm in Open MPI 5)."""
    if p.components:
        return component_set(p, a) == component_set(p, b)

    def norm(v: str) -> str:
        return p.enumerators.get(v, p.enumerators.get(v.lower(), v.lower()))
    return norm(a) == norm(b)


def stage_spec(study: Study, params: tuple[Parameter, ...], index: int,
               kept: dict[str, str], seed: int) -> dict[str, Any]:
    """The campaign of stage `index`: its parameter swept (baseline first), earlier
    stages' kept settings fixed, the study's seed offset by the stage index."""
    spec = copy.deepcopy(study.base)
    p = params[index]
    spec["campaign"] = dict(spec.get("campaign", {}),
                            name=f"{study.name}-{p.stage_name(index)}",
                            description=f"stage {index + 1} of study {study.name}: {p.name}")
    mca = spec.setdefault("mca", {})
    mca["fixed"] = dict(mca.get("fixed", {}))
    for other in params[:index]:
        value = kept[other.name]
        if other.kind == "launcher":
            spec["measure"][other.name] = value
        else:
            mca["fixed"][other.name] = value
    values = [p.baseline, *p.candidates]
    if p.kind == "launcher":
        spec["measure"][p.name] = values
    else:
        mca["sweep"] = {p.name: values}
    if not mca["fixed"]:
        del mca["fixed"]
    spec["run"] = dict(spec.get("run", {}), seed=seed)
    return spec


def parameters_json(params: tuple[Parameter, ...]) -> list[dict[str, Any]]:
    return [asdict(p) for p in params]


def parameters_from_json(data: list[dict[str, Any]]) -> tuple[Parameter, ...]:
    return tuple(Parameter(str(d["name"]), str(d["kind"]), str(d["baseline"]),
                           tuple(str(c) for c in d["candidates"]), str(d["mpi_default"]))
                 for d in data)
