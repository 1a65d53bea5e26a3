"""Write the small TOML documents a study generates (each stage's campaign spec).

Only what campaign specs contain: tables of strings, numbers, booleans and lists of them,
with inline tables for table values inside a table (such as `iterations = {small = ...}`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dumps(doc: Mapping[str, Any], header: str = "") -> str:
    """TOML text for `doc`; top-level keys that are tables become [table] sections."""
    lines = [f"# {line}" for line in header.splitlines()]
    plain = {k: v for k, v in doc.items() if not _is_section(v)}
    for key, value in plain.items():
        lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in doc.items():
        if isinstance(value, Mapping):
            lines += ["", f"[{_key(key)}]"]
            lines += [f"{_key(k)} = {_value(v)}" for k, v in value.items()]
        elif _is_section(value):
            for item in value:
                lines += ["", f"[[{_key(key)}]]"]
                lines += [f"{_key(k)} = {_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def _is_section(value: Any) -> bool:
    return isinstance(value, Mapping) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value))


def _key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")
