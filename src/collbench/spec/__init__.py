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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    Tag,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from collbench.catalog.collectives import (
    COLLECTIVES,
    NONBLOCKING,
    OSU_LARGE_THRESHOLD,
    POINT_TO_POINT,
)
from collbench.errors import UserError, did_you_mean
from collbench.inputs import load_toml, read_text
from collbench.sizes import expand_sizes, format_size, parse_size
from collbench.spec.fields import (
    ALL,
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
    NProcs,
    PosInt,
    Precision,
    PrecisionIterations,
    PrecisionSeconds,
    Size,
    Timing,
    _any,
    _auto,
    _campaign_name,
    _enum,
    _listify,
    _name_or_id,
    _not_valid,
    _one_of,
    _or_single,
    _Problem,
    _unique,
    backend_name,
    mca_value,
)
from collbench.spec.hosts import MAX_SLOTS, HostsConfig
from collbench.spec.nonblocking import Nonblocking
from collbench.spec.simgrid import SimgridConfig
from collbench.spec.slurm import SlurmConfig
from collbench.spec.workload import Workload, param_text

_TOP_LEVEL: Final = ("zip", "exclude")
# Measure keys that only mean something for collectives (refused beside a [workload]).
COLLECTIVE_KEYS: Final = ("collectives", "algorithms", "sizes", "iterations", "warmup",
                          "validate", "samples", "nonblocking")


def _check_keys(cls: type[BaseModel], data: Any) -> None:
    if not isinstance(data, dict) or cls.model_config.get("extra") == "allow":
        return
    valid = [f.alias or name for name, f in cls.model_fields.items()]
    for key in data:
        if key in _TOP_LEVEL and cls is not Spec:
            # TOML puts keys written after a [table] header into that table.
            raise _Problem(f"{key!r} is a top-level key: write it before the first [table] "
                           f"header{' or as [[exclude]] tables' if key == 'exclude' else ''}",
                           key)
        if key not in valid:
            raise _Problem(f"unknown key {key!r}; valid: {', '.join(valid)}"
                           f"{did_you_mean(key, valid)}", key)


class _Table(BaseModel):
    """A TOML table: typed strictly, unknown keys rejected with did-you-mean."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        _check_keys(cls, data)
        return data


class Campaign(_Table):
    """What this campaign is called; results are stored under the name."""

    name: Annotated[str, AfterValidator(_campaign_name)] = Field(
        description="Campaign name: letters, digits, '_', '.', '-'.",
        json_schema_extra={"pattern": "^[A-Za-z0-9_.-]+$"})
    description: str = Field("", description="Free text, kept with the results.")


class AlgorithmChoice(_Table):
    """One algorithm: a name, an Open MPI id, "default", "all", or a table with
    segment sizes and fanouts to sweep (cartesian within the entry)."""

    name: Annotated[str | int, BeforeValidator(_name_or_id)] = Field(
        description='Algorithm name or id as the MPI spells it, "default" or "all".')
    segsize: Annotated[list[Size], _listify("a size", str, int)] = Field(
        default_factory=list, json_schema_extra=_or_single,
        description="Segment size(s) in bytes; 0 = unsegmented.")
    fanout: Annotated[list[PosInt], _listify("an integer", int)] = Field(
        default_factory=list, json_schema_extra=_or_single,
        description="Tree/chain fanout or k-nomial radix value(s).")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, str | int) and not isinstance(data, bool):
            return {"name": data}
        if not isinstance(data, dict):
            raise _Problem(f"expected an algorithm name, id or table "
                           f"{{name = ..., segsize = ..., fanout = ...}}, got {data!r}")
        _check_keys(cls, data)
        return data

    @model_validator(mode="after")
    def _named_for_params(self) -> AlgorithmChoice:
        if str(self.name).lower() == ALL and (self.segsize or self.fanout):
            raise _Problem("segsize and fanout need a named algorithm, not 'all'",
                           "segsize" if self.segsize else "fanout")
        return self

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "string"}, {"type": "integer"}, handler(schema)]}

    def is_all(self) -> bool:
        return isinstance(self.name, str) and self.name.strip().lower() == ALL


def _algorithm_list(value: Any) -> Any:
    return [value] if isinstance(value, str | int) and not isinstance(value, bool) else value


def _algorithms_shape(value: Any) -> str | None:
    if isinstance(value, list):
        return "<every>"
    return "<per>" if isinstance(value, dict) else None


def _algorithms_schema(schema: dict[str, Any]) -> None:
    every, per = schema.pop("oneOf")
    per["additionalProperties"] = {"anyOf": [every["items"], every]}
    schema["anyOf"] = [every["items"], every, per]


AlgorithmList = Annotated[list[AlgorithmChoice], BeforeValidator(_algorithm_list),
                          Field(min_length=1)]
Algorithms = Annotated[
    Annotated[AlgorithmList, Tag("<every>")]
    | Annotated[dict[str, AlgorithmList], Tag("<per>")],
    Discriminator(_algorithms_shape, custom_error_type="algorithms",
                  custom_error_message='expected "all", "default", a list of algorithms, '
                                       "or a table of them per collective"),
    BeforeValidator(_algorithm_list),
]


class Counts(_Table):
    """Iterations (or warm-up iterations) per point; 0 = OSU's default for that size."""

    small: NonNegInt = Field(0, description=f"For sizes up to {OSU_LARGE_THRESHOLD} B.")
    large: NonNegInt = Field(0, description=f"For sizes above {OSU_LARGE_THRESHOLD} B.")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, int) and not isinstance(data, bool):
            return {"small": data, "large": data}
        if not isinstance(data, dict):
            raise _Problem(f"expected an integer or a table {{small = ..., large = ...}}, "
                           f"got {data!r}")
        _check_keys(cls, data)
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "integer", "minimum": 0}, handler(schema)]}

    def at(self, size: int) -> int:
        """The count for this size; 0 means "use OSU's default"."""
        return self.large if size > OSU_LARGE_THRESHOLD else self.small


MAX_MPIS: Final = 16  # MPIs in one campaign: each one builds a kernel and plans its launches


def _mpi_ref(value: str) -> str:
    """An MPI as the user names it: one line, bounded (resolved when the campaign opens)."""
    if not value.strip() or len(value) > 1024 or not value.isprintable():
        raise _Problem(f"{value[:80]!r}: expected openmpi==VERSION, mpich==VERSION or an MPI "
                       "prefix (one line, at most 1024 characters)")
    return value.strip()


class Measure(_Table):
    """What to measure: operations, algorithms, sizes, process counts and placement."""

    collectives: Annotated[list[CollectiveName], _listify("a collective", str),
                           AfterValidator(_unique)] = Field(
        default_factory=list, json_schema_extra=_or_single,
        description="Operations to measure (collectives, and latency/bw point-to-point); "
                    "required unless the spec has a [workload].")
    algorithms: Algorithms = Field(
        default_factory=lambda: [AlgorithmChoice(name=ALL)], json_schema_extra=_algorithms_schema,
        description='"all", "default", a list applied to every collective, or a table per '
                    'collective (collectives left out get "default").')
    sizes: Annotated[list[int], BeforeValidator(expand_sizes),
                     WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0},
                                               {"type": "string"},
                                               {"type": "array", "items": {
                                                   "type": ["integer", "string"]}}]})] = Field(
        default_factory=lambda: expand_sizes("1:1M"),
        description="Bytes per rank (OSU's count): 65536, '4K', 'MIN:MAX' or a list.")
    nprocs: Annotated[list[NProcs], _listify("a process count", int),
                      AfterValidator(_unique)] = Field(
        min_length=1, json_schema_extra=_or_single, description="Process counts (swept).")
    map_by: Annotated[list[MapBy], _listify("a mapping", str), AfterValidator(_unique)] = Field(
        default_factory=lambda: ["core"], min_length=1, json_schema_extra=_or_single,
        description="mpirun --map-by values (swept).")
    bind_to: Annotated[list[BindTo], _listify("a binding", str),
                       AfterValidator(_unique)] = Field(
        default_factory=lambda: ["core"], min_length=1, json_schema_extra=_or_single,
        description="mpirun --bind-to values (swept).")
    ppn: Annotated[list[Annotated[int, Field(ge=1, le=MAX_SLOTS)]],
                   _listify("a count of ranks per node", int),
                   AfterValidator(_unique)] | None = Field(
        None, json_schema_extra=_or_single,
        description="Ranks per node (swept; backend = \"hosts\": --map-by ppr:N:node, "
                    "-ppn N); absent: mpirun fills each host's slots in order.")
    iterations: Counts = Field(default_factory=Counts,
                               description="0 = OSU defaults; an integer; or {small, large}.")
    warmup: Counts = Field(default_factory=Counts,
                           description="0 = OSU defaults; an integer; or {small, large}.")
    check_results: bool = Field(False, alias="validate",
                                description="Check every result (kernel --validate).")
    samples: bool = Field(False, description="Keep per-iteration times (kernel --samples).")
    precision: Precision | None = Field(
        None, description="Relative half-width of the 95% CI of the median to reach per "
                          "blocking collective point (e.g. 0.02), measuring in batches; "
                          "absent: fixed iteration counts.")
    min_iterations: PrecisionIterations = Field(
        20, description="With precision: the first batch of timed iterations.")
    max_iterations: PrecisionIterations = Field(
        100_000, description="With precision: stop at this many timed iterations.")
    max_seconds: PrecisionSeconds = Field(
        10.0, description="With precision: stop after this long per point (seconds).")
    timing: Timing = Field(
        "osu", description='"osu": OSU\'s figures exactly; "completion": also the completion '
                           'time of blocking collectives from synchronised starts '
                           '(completion_us, docs/statistics.md).')
    nonblocking: Nonblocking | None = Field(
        None, description="Non-blocking collectives (ibcast, ...): MPI_Test calls, compute, "
                          "max-hideable-compute sweep (docs/nonblocking.md).")
    mpi: Annotated[list[Annotated[str, AfterValidator(_mpi_ref)]], _listify("an MPI", str),
                   AfterValidator(_unique),
                   Field(min_length=1, max_length=MAX_MPIS)] | None = Field(
        None, json_schema_extra=_or_single,
        description="MPIs measured side by side (a plan dimension): openmpi==VERSION, "
                    "mpich==VERSION (installed with `collbench mpi install`) or prefixes; "
                    "absent: --mpi or the Open MPI wheel beside collbench (docs/mpis.md).")

    @model_validator(mode="after")
    def _consistent(self) -> Measure:
        if self.min_iterations > self.max_iterations:
            raise _Problem(f"min_iterations ({self.min_iterations}) is above max_iterations "
                           f"({self.max_iterations})", "min_iterations")
        if self.nonblocking is not None and not set(self.collectives) & set(NONBLOCKING):
            raise _Problem(f"only blocking collectives are measured "
                           f"({', '.join(self.collectives)}); nonblocking settings need one "
                           f"of {', '.join(NONBLOCKING)}", "nonblocking")
        # A key for a collective not measured is allowed (collectives can be toggled
        # without editing the algorithm table), but it must name a collective.
        for coll in self.algorithms if isinstance(self.algorithms, dict) else ():
            if coll not in COLLECTIVES:
                raise _Problem(_not_valid(coll, tuple(COLLECTIVES)), "algorithms", coll)
        for coll in self.collectives:
            if coll in POINT_TO_POINT:
                for i, n in enumerate(self.nprocs):
                    if n < 2:
                        raise _Problem(f"{coll} needs at least 2 processes, got {n}",
                                       "nprocs", i)
        return self


class Mca(_Table):
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


class Run(_Table):
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


class ExcludeEntry(_Table):
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


class Spec(_Table):
    """A collbench campaign: what to measure and how to run it."""

    model_config = ConfigDict(title="collbench campaign spec")

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


# --- loading and error formatting -------------------------------------------------------

_MESSAGES: Final = {
    "missing": "required key is missing",
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "float_type": "expected a number",
    "bool_type": "expected true or false",
    "list_type": "expected a list",
    "dict_type": "expected a table",
    "model_type": "expected a table",
}


def _path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (part.startswith("<") or part == "[key]"):  # union tags, dict-key marker
            key = part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else json.dumps(part)
            out += f".{key}" if out else key
    return out


def _message(err: ErrorDetails) -> tuple[str, tuple[str | int, ...]]:
    """(problem, extra path below err['loc']) for one pydantic error."""
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, _Problem):
        return str(cause), cause.path
    if isinstance(cause, Exception):
        return str(cause), ()
    kind = err["type"]
    got = "" if kind == "missing" else f", got {err['input']!r}"
    if kind in _MESSAGES:
        return _MESSAGES[kind] + got, ()
    if kind == "too_short":
        return "must not be empty", ()
    bounds = {"greater_than_equal": ("at least", "ge"), "greater_than": ("greater than", "gt")}
    if kind in bounds:
        words, key = bounds[kind]
        bound = (err.get("ctx") or {}).get(key)
        return f"must be {words} {f'{bound:g}' if isinstance(bound, float) else bound}{got}", ()
    msg = err["msg"].replace("Input should be", "should be")
    return msg + got, ()


def format_validation_error(error: ValidationError, source: str) -> str:
    """The first problem as `<source>: <key.path>: <problem>`, one line."""
    errors = error.errors()
    first = errors[0]
    problem, below = _message(first)
    path = _path([*first["loc"], *below])
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source}: {path}: {problem}{more}" if path else f"{source}: {problem}{more}"


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

