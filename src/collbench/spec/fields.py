"""Field types and validators shared by the campaign spec and the backends' spec tables.

Every problem raises _Problem(message, *key path), which collbench.spec turns into one line
`<file>: <key.path>: <problem>; valid: ...`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BeforeValidator, Field, WithJsonSchema

from collbench import registry
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.components import COMPONENTS
from collbench.catalog.components import DEFAULT as DEFAULT_COMPONENT
from collbench.errors import did_you_mean
from collbench.sizes import parse_size

ALL: Final = "all"
MAP_BY: Final = ("core", "socket", "numa", "node", "slot", "hwthread")
BIND_TO: Final = ("core", "socket", "numa", "none", "hwthread")
# The registry names the backends without importing them (they sit above the spec).
BACKENDS: Final = registry.names()
ORDERS: Final = ("random", "sequential")
SELECTIONS: Final = ("auto", "mpit", "launch")
# [measure] timing: OSU's figures only, or also the synchronised-start completion time
# (kernel timing=completion; docs/statistics.md, "Completion time").
TIMINGS: Final = ("osu", "completion")
# Keys of an `exclude` entry (besides mca.sweep keys).
EXCLUDE_KEYS: Final = ("collective", "algorithm", "segsize", "fanout", "size",
                       "nprocs", "map_by", "bind_to", "repetition")


class _Problem(ValueError):
    """A validation problem that knows where it is below the key being validated."""

    def __init__(self, message: str, *path: str | int) -> None:
        super().__init__(message)
        self.path = path


def _not_valid(value: object, choices: Sequence[str]) -> str:
    return (f"{value!r} is not valid; valid: {', '.join(choices)}"
            f"{did_you_mean(str(value), choices)}")


def _one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in choices:
            raise _Problem(_not_valid(value, choices))
        return value
    return check


def backend_name(value: str) -> str:
    """A registered backend's name (asked at validation time: plugins may add names)."""
    return _one_of(registry.names())(value)


def one_of(choices: Sequence[str]) -> AfterValidator:
    """A field validator accepting only `choices` (with did-you-mean)."""
    return AfterValidator(_one_of(choices))


def reject_unknown_keys(cls: type[Any], data: Any) -> Any:
    """For a `model_validator(mode="before")`: one line naming a bad key and the valid ones."""
    if isinstance(data, dict):
        valid = list(cls.model_fields)
        for key in data:
            if key not in valid:
                raise _Problem(f"unknown key {key!r}; valid: {', '.join(valid)}"
                               f"{did_you_mean(key, valid)}", key)
    return data


def _listify(what: str, *scalar: type) -> BeforeValidator:
    """Accept one bare value where a list is expected."""
    def wrap(value: Any) -> Any:
        if isinstance(value, list):
            return value
        if isinstance(value, scalar) and not (isinstance(value, bool) and bool not in scalar):
            return [value]
        raise _Problem(f"expected {what} or a list of them, got {value!r}")
    return BeforeValidator(wrap)


def _unique(values: list[Any]) -> list[Any]:
    for i, v in enumerate(values):
        if v in values[:i]:
            raise _Problem(f"{v!r} is listed twice", i)
    return values


def _or_single(schema: dict[str, Any]) -> None:
    """JSON schema of a list field that also accepts one bare item."""
    if "anyOf" in schema:  # an optional list: [array, null]
        array = next(b for b in schema.pop("anyOf") if b.get("type") == "array")
    else:
        array = {k: schema.pop(k) for k in ("type", "items", "minItems") if k in schema}
    schema["anyOf"] = [array["items"], array]
    if "default" in schema and schema["default"] is None:  # "absent" needs no default shown
        del schema["default"]


def _any() -> Any:
    """An exclude key left out matches everything; given, it may be one value or a list."""
    return Field(None, json_schema_extra=_or_single)


def _enum(choices: Sequence[str]) -> WithJsonSchema:
    return WithJsonSchema({"type": "string", "enum": list(choices)})


def mca_value(value: Any) -> str:
    """An MCA value as it goes on the command line: true/false, 4096, 0.5, text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise _Problem(f"{value!r} contains a control character; an MCA value is one line "
                       "of printable text")
    if isinstance(value, str | int | float):
        return str(value)
    raise _Problem(f"expected a string, number or true/false, got {value!r}")


def _campaign_name(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", value):
        raise _Problem(f"{value!r} is not a valid name; use letters, digits, '_', '.' and '-'")
    return value


def _mca_name(value: str) -> str:
    if value.upper().startswith("OMPI_MCA_"):
        raise _Problem(f"{value!r}: write the parameter name without OMPI_MCA_")
    if not re.fullmatch(r"[A-Za-z0-9_]+", value):
        raise _Problem(f"{value!r} is not an MCA parameter name (letters, digits, '_')")
    if value in EXCLUDE_KEYS:
        raise _Problem(f"{value!r} clashes with the exclude/zip key of the same name")
    return value


def _name_or_id(value: Any) -> str | int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _Problem(f"expected an algorithm name or id, got {value!r}")
    return value


def _auto(value: Any) -> Any:
    if value == "auto" or isinstance(value, bool):
        return value
    raise _Problem(f"expected \"auto\", true or false, got {value!r}")


CollectiveName = Annotated[str, AfterValidator(_one_of(tuple(COLLECTIVES))), _enum(COLLECTIVES)]
MapBy = Annotated[str, AfterValidator(_one_of(MAP_BY)), _enum(MAP_BY)]
# [measure] components: "default" (Open MPI's own choice) or a coll component to ask for.
COMPONENT_CHOICES: Final = (DEFAULT_COMPONENT, *COMPONENTS)
ComponentName = Annotated[str, AfterValidator(_one_of(COMPONENT_CHOICES)),
                          _enum(COMPONENT_CHOICES)]
Timing = Annotated[str, AfterValidator(_one_of(TIMINGS)), _enum(TIMINGS)]
# [measure] precision: iterate each blocking collective point until the 95% CI of its
# median is within +-precision of it (kernel precision=; docs/statistics.md), bounded by
# min_iterations (the first batch), max_iterations and max_seconds. The kernel's limits.
MAX_PRECISION_ITERATIONS: Final = 1_000_000
MAX_PRECISION_SECONDS: Final = 3600.0
Precision = Annotated[float, Field(gt=0, le=1)]
PrecisionIterations = Annotated[int, Field(ge=1, le=MAX_PRECISION_ITERATIONS)]
PrecisionSeconds = Annotated[float, Field(gt=0, le=MAX_PRECISION_SECONDS)]
BindTo = Annotated[str, AfterValidator(_one_of(BIND_TO)), _enum(BIND_TO)]
# Bounds: every count is stored as a 32-bit INTEGER and must be runnable.
INT32_MAX: Final = 2**31 - 1
MAX_NPROCS: Final = 2**20
MAX_REPETITIONS: Final = 100_000
MAX_TIMEOUT_S: Final = 7 * 24 * 3600.0
PosInt = Annotated[int, Field(ge=1, le=INT32_MAX)]
NonNegInt = Annotated[int, Field(ge=0, le=INT32_MAX)]
NProcs = Annotated[int, Field(ge=1, le=MAX_NPROCS)]
Size = Annotated[int, BeforeValidator(parse_size),
                 WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0},
                                           {"type": "string"}]})]
McaName = Annotated[str, AfterValidator(_mca_name)]
McaValue = Annotated[str, BeforeValidator(mca_value),
                     WithJsonSchema({"type": ["string", "integer", "number", "boolean"]})]
