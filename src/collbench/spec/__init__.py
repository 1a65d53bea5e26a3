"""The campaign spec: a TOML file saying what to measure, validated with pydantic.

Every problem is reported as one line, `<file>: <key.path>: <problem>; valid: ...`.
Values are normalised while validating (a bare value becomes a one-item list, sizes become
byte counts, iteration counts become a {small, large} table), so `Spec.model_dump(by_alias=
True)` is itself a valid spec. Checks that need the MPI's algorithm table happen in
`collbench.plan.make_plan`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from collbench.errors import UserError, did_you_mean
from collbench.inputs import load_toml, read_text
from collbench.sizes import format_size, parse_size
from collbench.spec.fields import (
    BACKENDS,
    EXCLUDE_KEYS,
    MAX_REPETITIONS,
    MAX_TIMEOUT_S,
    ORDERS,
    SELECTIONS,
    BindTo,
    CollectiveName,
    MapBy,
    McaName,
    McaValue,
    NonNegInt,
    Size,
    _any,
    _auto,
    _campaign_name,
    _enum,
    _listify,
    _name_or_id,
    _not_valid,
    _one_of,
    _Problem,
    _unique,
    backend_name,
    mca_value,
)
from collbench.spec.hosts import HostsConfig
from collbench.spec.measure import AlgorithmChoice, Counts, Measure
from collbench.spec.messages import format_validation_error
from collbench.spec.simgrid import SimgridConfig
from collbench.spec.slurm import SlurmConfig
from collbench.spec.table import Table
from collbench.spec.workload import Workload, param_text

__all__ = ["COLLECTIVE_KEYS", "AlgorithmChoice", "Campaign", "Counts", "ExcludeEntry", "Mca",
           "Measure", "Run", "Spec", "format_validation_error", "load_spec", "parse_spec",
           "spec_from_dict", "spec_json_schema", "spec_json_schema_text"]

# Measure keys that only mean something for collectives (refused beside a [workload]).
COLLECTIVE_KEYS: Final = ("collectives", "algorithms", "sizes", "iterations", "warmup",
                          "validate", "samples", "nonblocking")


class Campaign(Table):
    """What this campaign is called; results are stored under the name."""

    name: Annotated[str, AfterValidator(_campaign_name)] = Field(
        description="Campaign name: letters, digits, '_', '.', '-'.",
        json_schema_extra={"pattern": "^[A-Za-z0-9_.-]+$"})
    description: str = Field("", description="Free text, kept with the results.")


class Mca(Table):
    """Open MPI MCA parameters: fixed ones, and swept ones (one launch per value)."""

    fixed: dict[McaName, McaValue] = Field(
        default_factory=dict, description="Passed to every launch (--mca NAME VALUE).")
    sweep: dict[McaName, Annotated[list[McaValue], Field(min_length=1),
                                   AfterValidator(_unique)]] = Field(
        default_factory=dict, description="Each key: a list of values, one launch each "
                                          "(cartesian with the other launch dimensions).")

    @model_validator(mode="after")
    def _disjoint(self) -> Mca:
        for key in self.sweep:
            if key in self.fixed:
                raise _Problem(f"{key!r} is also in mca.fixed; keep one", "sweep", key)
        return self


class Run(Table):
    """How to run: backend, repetitions, timeout, order, oversubscription, forcing."""

    backend: Annotated[str, AfterValidator(backend_name), _enum(BACKENDS)] = Field(
        "local", description="Where launches run.")
    repetitions: Annotated[int, Field(ge=1, le=MAX_REPETITIONS)] = Field(
        1, description="Separate launches of everything.")
    timeout: float = Field(600.0, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False,
                           description="Seconds allowed per launch (at most a week).")
    order: Annotated[str, AfterValidator(_one_of(ORDERS)), _enum(ORDERS)] = Field(
        "random", description="random: shuffle launches and blocks inside them (seeded).")
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = Field(
        None, description="Random seed; chosen and recorded "
                                                     "in the plan when absent.")
    oversubscribe: Annotated[Literal["auto"] | bool, BeforeValidator(_auto)] = Field(
        "auto", description="auto: when nprocs exceeds the cores of this machine.")
    selection: Annotated[str, AfterValidator(_one_of(SELECTIONS)), _enum(SELECTIONS)] = Field(
        "auto", description="How algorithms are forced: mpit (switched inside a launch), "
                            "launch (one launch per algorithm), auto (mpit where possible).")
    slurm: SlurmConfig = Field(default_factory=SlurmConfig,
                               description="Scheduler settings for backend = \"slurm\".")
    simgrid: SimgridConfig = Field(default_factory=SimgridConfig,
                                   description="Platform and options for backend = "
                                               "\"simgrid\" (SimGrid SMPI).")
    hosts: HostsConfig = Field(default_factory=HostsConfig,
                               description="Hosts and ssh for backend = \"hosts\" (mpirun "
                                           "--hostfile; docs/hosts.md).")
    monitoring: bool = Field(False, description="Open MPI only: count each point's messages "
                                                "and bytes per level with pml/monitoring "
                                                "(docs/models.md, Why: --explain).")

    @model_validator(mode="after")
    def _monitoring_needs_open_mpi(self) -> Run:
        if self.monitoring and self.backend in ("simgrid", "fake"):
            raise _Problem(f"backend {self.backend!r} has no Open MPI pml/monitoring; valid: "
                           "local, hosts or slurm with Open MPI, or monitoring = false",
                           "monitoring")
        return self


class ExcludeEntry(Table):
    """Drop the points (and launches) that match every key given; a list matches any."""

    # Extra keys are mca.sweep keys, checked by Spec (they depend on the sweep).
    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": {
        "type": ["string", "integer", "number", "boolean", "array"]}})

    collective: Annotated[list[CollectiveName], _listify("a collective", str)] | None = _any()
    algorithm: Annotated[list[Annotated[str | int, BeforeValidator(_name_or_id)]],
                         _listify("an algorithm name or id", str, int)] | None = _any()
    segsize: Annotated[list[Size], _listify("a size", str, int)] | None = _any()
    fanout: Annotated[list[int], _listify("an integer", int)] | None = _any()
    size: Annotated[list[Size], _listify("a size", str, int)] | None = _any()
    nprocs: Annotated[list[int], _listify("a process count", int)] | None = _any()
    map_by: Annotated[list[MapBy], _listify("a mapping", str)] | None = _any()
    bind_to: Annotated[list[BindTo], _listify("a binding", str)] | None = _any()
    repetition: Annotated[list[NonNegInt], _listify("a repetition index", int)] | None = _any()
    mpi: Annotated[list[str], _listify("an MPI (openmpi-4.1.8)", str)] | None = _any()

    def criteria(self) -> dict[str, list[Any]]:
        """Every key given, with its values normalised (sizes in bytes, MCA values as text)."""
        extra = self.model_extra or {}
        out: dict[str, list[Any]] = self.model_dump(exclude_none=True, exclude=set(extra))
        for key, value in extra.items():
            out[key] = [mca_value(v) for v in (value if isinstance(value, list) else [value])]
        return out


class Spec(Table):
    """A collbench campaign: what to measure and how to run it."""

    model_config = ConfigDict(title="collbench campaign spec")
    top_level: ClassVar[bool] = True

    campaign: Campaign
    measure: Measure
    mca: Mca = Field(default_factory=Mca)
    run: Run = Field(default_factory=Run)
    workload: Workload | None = Field(
        None, description="An MPI program (or built-in mini-app) measured instead of "
                          "collectives (docs/workloads.md).")
    zip: list[list[str]] = Field(
        default_factory=list, description="Groups of launch dimensions (nprocs, map_by, "
                                          "bind_to, mca.sweep keys) that vary together.")
    exclude: list[ExcludeEntry] = Field(
        default_factory=list, description="Points or launches to leave out.")

    @model_validator(mode="after")
    def _cross_checks(self) -> Spec:
        self._check_workload()
        self._check_zip()
        if self.measure.ppn and not self.run.hosts.given():
            raise _Problem("ranks per node place ranks on the hosts of [run.hosts]; add that "
                           "table (run.backend = \"hosts\", docs/hosts.md) or remove ppn",
                           "measure", "ppn")
        for i, entry in enumerate(self.exclude):
            self._check_exclude(i, entry)
        return self

    def launch_dimensions(self) -> dict[str, list[Any]]:
        """Values of every launch dimension except repetition, in a fixed order."""
        m = self.measure
        return {"nprocs": list(m.nprocs), "map_by": list(m.map_by), "bind_to": list(m.bind_to),
                **({"ppn": list(m.ppn)} if m.ppn else {}),
                **({"component": list(m.components)} if m.components else {}),
                **{k: list(v) for k, v in self.mca.sweep.items()},
                **(self.workload.dimensions() if self.workload else {})}


    def _check_workload(self) -> None:
        """A spec measures collectives or one workload, never both (docs/workloads.md)."""
        if self.workload is None:
            if not self.measure.collectives:
                raise _Problem("required key is missing (or give a [workload] table)",
                               "measure", "collectives")
            return
        given = {f.alias or n for n, f in Measure.model_fields.items()
                 if n in self.measure.model_fields_set}
        for key in COLLECTIVE_KEYS:
            if key in given:
                raise _Problem(f"a spec with [workload] measures the program, not "
                               f"collectives; remove {key} (measure collectives in a spec of "
                               "their own)", "measure", key)
        clash = sorted(set(self.workload.params) & set(self.mca.sweep))
        if clash:
            raise _Problem(f"{clash[0]!r} is both a workload param and an mca.sweep key; "
                           "rename the param", "workload", "params", clash[0])

    def _check_zip(self) -> None:
        dims = self.launch_dimensions()
        seen: set[str] = set()
        for i, group in enumerate(self.zip):
            if len(group) < 2:
                raise _Problem("a zip group needs at least two dimensions", "zip", i)
            for j, name in enumerate(group):
                if name not in dims:
                    raise _Problem(_not_valid(name, list(dims)), "zip", i, j)
                if name in seen:
                    raise _Problem(f"{name!r} is zipped twice", "zip", i, j)
                seen.add(name)
            first = group[0]
            for name in group[1:]:
                if len(dims[name]) != len(dims[first]):
                    raise _Problem(
                        f"{first} has {len(dims[first])} values but {name} has "
                        f"{len(dims[name])}; zipped dimensions need the same number", "zip", i)

    def _check_exclude(self, i: int, entry: ExcludeEntry) -> None:
        m, sweep = self.measure, dict(self.mca.sweep)
        if self.workload is not None:  # params are matched as the text the program gets
            sweep.update({k: [param_text(v) for v in vs]
                          for k, vs in self.workload.params.items() if k != "size"})
        valid_keys = [*EXCLUDE_KEYS, *sweep]
        for key, value in (entry.model_extra or {}).items():
            if key not in sweep:
                raise _Problem(f"unknown key {key!r}; valid: {', '.join(valid_keys)}"
                               f"{did_you_mean(key, valid_keys)}", "exclude", i, key)
            for v in value if isinstance(value, list) else [value]:
                try:
                    mca_value(v)
                except _Problem as e:
                    raise _Problem(str(e), "exclude", i, key) from None
        sizes = [*m.sizes, *([0] if "barrier" in m.collectives else [])]
        if self.workload is not None:  # a program's size is its param "size"
            sizes = [parse_size(t) for t in (param_text(v) for v in
                                             self.workload.params.get("size", []))
                     if re.fullmatch(r"\d+\s*[A-Za-z]*", t)]
        allowed: dict[str, list[Any]] = {
            "collective": list(m.collectives), "nprocs": list(m.nprocs),
            "map_by": list(m.map_by), "bind_to": list(m.bind_to), "size": sizes,
            "repetition": list(range(self.run.repetitions)),
            **{k: list(v) for k, v in sweep.items()},
        }
        given = entry.criteria()
        if not given:
            raise _Problem("an empty entry would exclude everything", "exclude", i)
        for key, values in given.items():
            show: Callable[[Any], str] = format_size if key == "size" else str
            for v in values:
                if key in allowed and v not in allowed[key]:
                    choices = [show(x) for x in allowed[key]]
                    hint = did_you_mean(v, choices) if isinstance(v, str) else ""
                    raise _Problem(f"{show(v)} is not measured; valid: {', '.join(choices)}"
                                   f"{hint}", "exclude", i, key)


# --- loading ----------------------------------------------------------------------------


def parse_spec(text: str, source: str) -> Spec:
    """A validated Spec from TOML text; `source` names the file in error messages."""
    return spec_from_dict(load_toml(text, source), source)


def spec_from_dict(data: dict[str, Any], source: str) -> Spec:
    """A validated Spec from already-parsed data (TOML, or JSON as stored with results)."""
    try:
        return Spec.model_validate(data)
    except ValidationError as e:
        raise UserError(format_validation_error(e, source)) from None


def load_spec(path: Path) -> Spec:
    return parse_spec(read_text(path, "spec"), str(path))


def spec_json_schema() -> dict[str, Any]:
    """JSON schema of the TOML spec (for editors; docs/spec.schema.json is this)."""
    schema = Spec.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def spec_json_schema_text() -> str:
    return json.dumps(spec_json_schema(), indent=2) + "\n"

