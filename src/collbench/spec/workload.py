"""The `[workload]` table of a campaign spec: an MPI program measured instead of collectives.

    [workload]
    program = { build = ["mpicc", "-O2", "ring.c", "-o", "ring"],
                run = ["./ring", "iterations={iterations}"], metrics = "json" }
    params = { iterations = [100, 1000] }

or one of the built-in programs (the mini-apps of src/collbench/apps/*.c, and the PLogP
benchmark of `model loggp`), named without writing code:

    [workload]
    app = "jacobi"
    params = { L = 32, dims = [[2, 2, 1], [4, 1, 1]] }

`params` are swept like launch dimensions (cartesian with nprocs, map_by, bind_to and
mca.sweep; `zip` and `exclude` name them too). A `{name}` in a `run` argument is replaced by
the launch's value of param `name` (or by `{nprocs}`); each argument stays one argument and
nothing goes through a shell. A list value (`dims = [[4, 3, 2]]`) is written "4,3,2".
Problems raise the spec's _Problem: `<file>: workload.<key>: <problem>; valid: ...`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from collbench.errors import did_you_mean
from collbench.sizes import parse_size
from collbench.spec.fields import EXCLUDE_KEYS, _not_valid, _Problem, reject_unknown_keys


@dataclass(frozen=True)
class SizeLines:
    """A program printing one JSON line per message size of OSU's range from its `min` to
    its `max` argument (sizes.expand_sizes): a planned point, and a row, per size."""

    low: int  # min when not given
    high: int  # max when not given
    limit: int  # the largest max it accepts


@dataclass(frozen=True)
class BuiltinApp:
    """A program shipped with collbench: its C source, keys and what avg_us holds."""

    source: str  # file name in `package`
    keys: tuple[str, ...]  # its key=value arguments
    primary: str  # the metric stored in avg_us
    dims: bool = False  # has a `dims=PX,PY,PZ` process grid (product = nprocs)
    package: str = "collbench.apps"
    flags: tuple[str, ...] = ()  # compiler flags besides -O2
    sizes: tuple[str, ...] = ()  # keys given in bytes ("4K" allowed)
    # the keys of the rows' iterations and warmup, and their values when not given
    counts: tuple[str, str] = ("iterations", "warmup")
    count_defaults: tuple[int, int] = (0, 0)
    lines: SizeLines | None = None  # one row per size (else one row per launch)


APPS: Final = {
    "ring": BuiltinApp("ring.c", ("size", "iterations", "warmup"), "avg_us", sizes=("size",)),
    "matrix": BuiltinApp("matrix.c", ("shape", "dims", "iterations", "warmup"), "total_us",
                         dims=True),
    "jacobi": BuiltinApp("jacobi.c", ("L", "dims", "iterations", "warmup"), "time_us",
                         dims=True),
    # `model loggp`'s benchmark (kernel/plogp.c): RTT, o_s, o_r and g per size at 2 ranks
    "plogp": BuiltinApp("plogp.c", ("min", "max", "reps", "warmup", "nmin", "nmax"),
                        "rtt_us", package="collbench.kernel", flags=("-std=c11",),
                        sizes=("min", "max"), counts=("reps", "warmup"),
                        count_defaults=(20, 5), lines=SizeLines(0, 1 << 20, 1 << 26)),
}
JSON: Final = "json"
# Placeholders a run argument may use besides the params.
BUILTIN_PLACEHOLDERS: Final = ("nprocs",)
# Names a param cannot take: the other launch dimensions and exclude keys.
RESERVED_PARAMS: Final = (*EXCLUDE_KEYS, "map_by", "bind_to")
_PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_ARGS: Final = 4096
MAX_PARAM_VALUES: Final = 10_000


def placeholders(arg: str) -> list[str]:
    """The `{name}` placeholders in one argument."""
    return _PLACEHOLDER.findall(arg)


def substitute(arg: str, values: dict[str, str]) -> str:
    """`arg` with every `{name}` replaced by values[name] (one argument stays one)."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], arg)


def param_text(value: Any) -> str:
    """A param value as it goes into an argument: 100, 0.5, text, [4, 3, 2] -> "4,3,2"."""
    if isinstance(value, list):
        return ",".join(param_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _text(value: Any, *path: str | int) -> str:
    if not isinstance(value, str):
        raise _Problem(f"expected a string, got {value!r}", *path)
    if not value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise _Problem(f"{value!r} must be non-empty printable text (one argument)", *path)
    return value


def _argv(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise _Problem(f"expected a non-empty list of arguments, got {value!r}")
    if len(value) > MAX_ARGS:
        raise _Problem(f"{len(value)} arguments; at most {MAX_ARGS}")
    return [_text(v, i) for i, v in enumerate(value)]


def _metrics(value: Any) -> str | dict[str, str]:
    if value == JSON:
        return JSON
    if not isinstance(value, dict) or not value:
        raise _Problem(f"expected \"json\" or a table {{name = \"regex\", ...}}, got {value!r}")
    out: dict[str, str] = {}
    for name, regex in value.items():
        if not _NAME.fullmatch(name):
            raise _Problem(f"{name!r} is not a metric name (letters, digits, '_')", name)
        try:
            compiled = re.compile(_text(regex, name))
        except re.error as e:
            raise _Problem(f"{regex!r} is not a regular expression: {e}", name) from None
        if compiled.groups > 1:
            raise _Problem(f"{regex!r} has {compiled.groups} groups; the value is the first "
                           "group (or the whole match): use (?:...) for the others", name)
        out[name] = regex
    return out


def _param_values(value: Any) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise _Problem("must not be empty")
    if len(values) > MAX_PARAM_VALUES:
        raise _Problem(f"{len(values)} values; at most {MAX_PARAM_VALUES}")
    seen: list[str] = []
    for i, v in enumerate(values):
        items = v if isinstance(v, list) else [v]
        if not items or not all(isinstance(x, str | int | float) and not isinstance(x, bool)
                                for x in items):
            raise _Problem(f"expected a number, a string or a list of them, got {v!r}", i)
        for x in items:
            if isinstance(x, float) and not math.isfinite(x):
                raise _Problem(f"{x!r} is not a finite number", i)
            if isinstance(x, str):
                _text(x, i)
        if param_text(v) in seen:
            raise _Problem(f"{param_text(v)!r} is listed twice", i)
        seen.append(param_text(v))
    return values


class Program(BaseModel):
    """A user's MPI program: how to build it (optional), run it, and read its metrics."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    build: Annotated[list[str], BeforeValidator(_argv)] | None = Field(
        None, description="Build command (argument list, run in a private folder; 'mpicc' "
                          "is the MPI's own compiler, smpicc under SimGrid). Absent: run[0] "
                          "must already be an executable.")
    run: Annotated[list[str], BeforeValidator(_argv)] = Field(
        description="Command line of every rank: the executable (relative to the spec's "
                    "folder, or the build's product) and its arguments; {name} is a param.")
    metrics: Annotated[str | dict[str, str], BeforeValidator(_metrics)] = Field(
        JSON, description='"json": a JSON object line on stdout (the last one); or a table '
                          '{name = "regex"} (the first group, or the match, of the last '
                          "matching line).")
    primary: str | None = Field(
        None, description="The metric stored as avg_us (µs; a name ending in _s is "
                          "converted); default: avg_us, time_us, total_us or elapsed_us.")
    name: str | None = Field(None, description="The program's name in the collective "
                                               "column; default: the executable's file name.")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Problem(f"expected a table {{build = [...], run = [...], metrics = ...}}, "
                           f"got {data!r}")
        return reject_unknown_keys(cls, data)

    def label(self) -> str:
        return self.name or PurePosixPath(self.run[0]).name


class Workload(BaseModel):
    """An MPI program measured instead of collectives: a built-in mini-app or a program."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    app: str | None = Field(None, description="A built-in program: "
                                              f"{', '.join(APPS)}.",
                            json_schema_extra={"enum": list(APPS)})
    program: Program | None = Field(None, description="A program: {build, run, metrics}.")
    params: dict[str, Annotated[list[Any], BeforeValidator(_param_values)]] = Field(
        default_factory=dict, description="Values swept like launch dimensions, {name} in "
                                          "program.run; for an app, its key=value arguments.",
        json_schema_extra={"additionalProperties": {}})
    simulate_compute: bool = Field(
        True, description="SimGrid backend: time the program's CPU bursts and simulate them "
                          "(true); false: only communication takes simulated time, so runs "
                          "are deterministic (for communication-bound programs, e.g. ring).")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise _Problem(f"expected a table, got {data!r}")
        return reject_unknown_keys(cls, data)

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if (self.app is None) == (self.program is None):
            raise _Problem("give exactly one of app (a built-in mini-app) and program")
        for name in self.params:
            if not _NAME.fullmatch(name):
                raise _Problem(f"{name!r} is not a param name (letters, digits, '_')",
                               "params", name)
            if name in RESERVED_PARAMS or name in BUILTIN_PLACEHOLDERS:
                ok = name == "size" and (self.app == "ring" or self.program is not None)
                if not ok:
                    raise _Problem(f"{name!r} is a launch dimension or exclude key of its "
                                   "own; rename the param", "params", name)
        if self.app is not None:
            self._check_app(self.app)
        elif self.program is not None:
            self._check_program(self.program)
        return self

    def _check_app(self, app: str) -> None:
        if app not in APPS:
            raise _Problem(_not_valid(app, tuple(APPS)), "app")
        keys, sizes = APPS[app].keys, APPS[app].sizes
        for name, values in self.params.items():
            if name not in keys:
                raise _Problem(f"{app} has no argument {name!r}; valid: {', '.join(keys)}"
                               f"{did_you_mean(name, keys)}", "params", name)
            width = 3 if name in ("dims", "shape") else 1
            for i, v in enumerate(values):
                items = v if isinstance(v, list) else [v]
                if isinstance(v, str):
                    items = v.split(",")
                try:
                    numbers = [parse_size(x) if name in sizes else int(x) for x in items]
                except (TypeError, ValueError):
                    numbers = []
                if len(numbers) != width or min(numbers) < 0:
                    what = ("3 non-negative integers, e.g. [[4, 3, 2]] or \"4,3,2\""
                            if width == 3 else "a non-negative integer")
                    raise _Problem(f"{param_text(v)!r} is not valid; valid: {what}",
                                   "params", name, i)

    def _check_program(self, program: Program) -> None:
        known = [*self.params, *BUILTIN_PLACEHOLDERS]
        used: set[str] = set()
        for i, arg in enumerate(program.run):
            for name in placeholders(arg):
                if name not in known:
                    raise _Problem(f"{{{name}}} is not a param; valid: "
                                   f"{', '.join('{' + k + '}' for k in known)}"
                                   f"{did_you_mean(name, known)}", "program", "run", i)
                used.add(name)
        for name in self.params:
            if name not in used:
                raise _Problem(f"param {name!r} is not used: put {{{name}}} into an argument "
                               "of program.run", "params", name)
        if not _NAME.fullmatch(program.label().replace(".", "_").replace("-", "_")):
            raise _Problem(f"{program.label()!r} cannot name the program in results; give "
                           "program.name (letters, digits, '_', '.', '-')", "program", "name")

    # --- what the plan and the runner need -------------------------------------------
    def label(self) -> str:
        """The name rows carry in their collective column."""
        return self.app if self.app is not None else self.program.label()  # type: ignore[union-attr]

    def dimensions(self) -> dict[str, list[Any]]:
        return {k: list(v) for k, v in self.params.items()}

    def arguments(self, values: dict[str, str], nprocs: int) -> list[str]:
        """The arguments after the executable for one launch (params as text)."""
        if self.app is not None:
            app = APPS[self.app]
            return [f"{k}={parse_size(values[k]) if k in app.sizes else values[k]}"
                    for k in app.keys if k in values]
        assert self.program is not None
        env = {**values, "nprocs": str(nprocs)}
        return [substitute(a, env) for a in self.program.run[1:]]

    def metric_patterns(self) -> dict[str, str]:
        """{} for a JSON line, else the named regexes."""
        metrics = JSON if self.program is None else self.program.metrics
        return {} if metrics == JSON else dict(metrics)  # type: ignore[arg-type]

    def primary(self) -> str | None:
        if self.app is not None:
            return APPS[self.app].primary
        assert self.program is not None
        return self.program.primary


def grid_problem(dims: str, nprocs: int) -> str | None:
    """Why a process grid "PX,PY,PZ" (0 = MPI_Dims_create chooses) cannot hold nprocs."""
    try:
        numbers = [int(x) for x in dims.split(",")]
    except ValueError:
        return f"{dims!r} is not 3 integers"
    fixed = math.prod(n for n in numbers if n > 0)
    if 0 in numbers:
        return None if fixed and nprocs % fixed == 0 else \
            f"{dims} cannot be completed to {nprocs} processes ({fixed} does not divide it)"
    return None if fixed == nprocs else \
        f"{dims.replace(',', 'x')} = {fixed} processes, not nprocs = {nprocs}"
