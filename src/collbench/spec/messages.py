"""A pydantic validation error of the spec as one line: `<file>: <key.path>: <problem>`."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from collbench.spec.fields import _Problem

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
