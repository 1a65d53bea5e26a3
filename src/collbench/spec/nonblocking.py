"""The `measure.nonblocking` table: how the non-blocking collectives (ibcast, ...) are timed.

```
nonblocking = { test_calls = [0, 1, 25, 100], compute = "auto", hide = 10 }
```

Every value becomes options of the kernel's job line (`test_calls=N compute=C
hide_steps=K`, see kernel/collbench_kernel.c): `test_calls` and `compute` are point
dimensions (one point per value, inside the same launch), `hide` applies to every point.
Problems read like every other spec error: `<file>: measure.nonblocking.<key>: ...`.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from collbench.spec.fields import _Problem, reject_unknown_keys

# The kernel's bounds (collbench_kernel.c parse_nb_options).
MAX_TEST_CALLS: Final = 1_000_000
MAX_COMPUTE_US: Final = 1e7
MAX_FACTOR: Final = 100.0
MIN_FACTOR: Final = 1e-3  # printed with 6 decimals: far from rounding to 0
MAX_HIDE_STEPS: Final = 100
DEFAULT_HIDE_STEPS: Final = 10  # hide = true
AUTO: Final = "auto"
_FIXED: Final = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:us|µs)\s*", re.IGNORECASE)
_FACTOR: Final = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*x\s*", re.IGNORECASE)


def decimal(value: float) -> str:
    """A plain decimal as the kernel reads it (no exponent): 2, 0.5, 12.25."""
    text = f"{value:.6f}".rstrip("0").rstrip(".")
    return text or "0"


def _factor(value: float, where: int | None) -> str:
    path = () if where is None else (where,)
    if not math.isfinite(value) or value <= 0:
        raise _Problem(f"compute factor {value:g} must be greater than 0 (a multiple of the "
                       "pure communication time)", *path)
    if value < MIN_FACTOR or value > MAX_FACTOR:
        raise _Problem(f"compute factor {value:g} is out of range; valid: {MIN_FACTOR:g} to "
                       f"{MAX_FACTOR:g}", *path)
    return f"{decimal(value)}x"


def compute_token(value: Any, where: int | None = None) -> str:
    """One compute setting as the kernel's `compute=` value: auto, <v>us or <v>x."""
    path = () if where is None else (where,)
    if isinstance(value, bool):
        raise _Problem(f'expected "auto", "<microseconds>us" or a factor, got {value!r}',
                       *path)
    if isinstance(value, int | float):
        return _factor(float(value), where)
    if isinstance(value, str):
        if value.strip().lower() == AUTO:
            return AUTO
        if m := _FIXED.fullmatch(value):
            us = float(m.group(1))
            if us > MAX_COMPUTE_US:
                raise _Problem(f"compute {value!r} is too long; valid: 0 to "
                               f"{MAX_COMPUTE_US:.0f} us", *path)
            return f"{decimal(us)}us"
        if m := _FACTOR.fullmatch(value):
            return _factor(float(m.group(1)), where)
        if value.strip().startswith("-"):
            raise _Problem(f"compute {value!r} must not be negative", *path)
    raise _Problem(f'compute {value!r} is not valid; valid: "auto", "<microseconds>us" '
                   '(e.g. "50us"), a factor of the pure time (2 or "2x") or a list of them',
                   *path)


def _computes(value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _Problem("must not be empty")
    out = [compute_token(v, i if isinstance(value, list) else None)
           for i, v in enumerate(values)]
    for i, token in enumerate(out):
        if token in out[:i]:
            raise _Problem(f"{token!r} is listed twice", i)
    return out


def _test_calls(value: Any) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _Problem("must not be empty")
    for i, v in enumerate(values):
        path = (i,) if isinstance(value, list) else ()
        if isinstance(v, bool) or not isinstance(v, int):
            raise _Problem(f"expected a whole number of MPI_Test calls, got {v!r}", *path)
        if v < 0:
            raise _Problem(f"{v} MPI_Test calls: must not be negative", *path)
        if v > MAX_TEST_CALLS:
            raise _Problem(f"{v} MPI_Test calls is too many; valid: 0 to {MAX_TEST_CALLS:,}",
                           *path)
        if v in values[:i]:
            raise _Problem(f"{v} is listed twice", *path)
    return list(values)


def _hide(value: Any) -> int:
    if value is False or (value == 0 and not isinstance(value, bool)):
        return 0  # 0 too: what the table dumps for false
    if value is True:
        return DEFAULT_HIDE_STEPS
    if isinstance(value, int) and 1 <= value <= MAX_HIDE_STEPS:
        return value
    raise _Problem(f"expected false, true ({DEFAULT_HIDE_STEPS} steps) or a number of steps "
                   f"from 0 (none) to {MAX_HIDE_STEPS}, got {value!r}")


class Nonblocking(BaseModel):
    """How non-blocking collectives are timed (OSU 7.4's osu_i<coll>): MPI_Test calls in
    the compute phase, the compute time, and the max-hideable-compute sweep."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test_calls: Annotated[list[int], BeforeValidator(_test_calls), WithJsonSchema({"anyOf": [
        {"type": "integer", "minimum": 0, "maximum": MAX_TEST_CALLS},
        {"type": "array", "items": {"type": "integer", "minimum": 0,
                                    "maximum": MAX_TEST_CALLS}}]})] = Field(
        default_factory=lambda: [0],
        description="MPI_Test calls interleaved with the compute (OSU -t); one point per "
                    "value.")
    compute: Annotated[list[str], BeforeValidator(_computes), WithJsonSchema({"anyOf": [
        {"type": "string"}, {"type": "number", "exclusiveMinimum": 0},
        {"type": "array", "items": {"type": ["string", "number"]}}]})] = Field(
        default_factory=lambda: [AUTO],
        description='Dummy compute of the overlapped run: "auto" (the pure time, as OSU), '
                    '"<v>us" (fixed), or factors of the pure time (2, "0.5x"); one point per '
                    "value.")
    hide: Annotated[int, BeforeValidator(_hide), WithJsonSchema({"anyOf": [
        {"type": "boolean"}, {"type": "integer", "minimum": 0,
                              "maximum": MAX_HIDE_STEPS}]})] = Field(
        0, description="Steps of the max-hideable-compute sweep (false: none; true: "
                       f"{DEFAULT_HIDE_STEPS}).")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Problem("expected a table { test_calls = [...], compute = ..., hide = ... }, "
                           f"got {data!r}")
        return reject_unknown_keys(cls, data)

    def variants(self) -> list[tuple[int, str]]:
        """(test_calls, compute) of every point per size, in spec order."""
        return [(t, c) for t in self.test_calls for c in self.compute]
