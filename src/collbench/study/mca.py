"""Open MPI's MCA parameters as `ompi_info --all --parsable` lists them, and value checks.

Open MPI accepts an unknown `--mca` name or a malformed value with at most a warning and
runs with its default, so a study that is not checked first can measure one setting many
times and report it as several. Each parameter is checked here for existence, type,
enumerated values, integer range and the "(must be >= N)" bound its help text states.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from collbench.catalog.ompi_info import listing
from collbench.errors import UserError, did_you_mean
from collbench.sizes import parse_size

_LINE: Final = re.compile(r"^mca:[^:]+:[^:]+:param:([A-Za-z0-9_]+):(.*)$")
_AT_LEAST: Final = re.compile(r"must be >= (-?\d+)")
# Integer types and their ranges (two's complement, as Open MPI stores them).
_INT_RANGES: Final = {
    "int": (-(2**31), 2**31 - 1), "int32_t": (-(2**31), 2**31 - 1),
    "unsigned_int": (0, 2**32 - 1), "uint32_t": (0, 2**32 - 1),
    "long": (-(2**63), 2**63 - 1), "int64_t": (-(2**63), 2**63 - 1),
    "unsigned_long": (0, 2**64 - 1), "unsigned_long_long": (0, 2**64 - 1),
    "uint64_t": (0, 2**64 - 1), "size_t": (0, 2**64 - 1),
}
_BOOL_WORDS: Final = {"true": "true", "false": "false", "1": "true", "0": "false",
                      "yes": "true", "no": "false", "enabled": "true", "disabled": "false"}
# Names that moved from Open MPI to its launcher (PRRTE) in 5.0: ompi_info no longer lists
# them and mpirun ignores them silently, so say what to use instead.
MOVED_TO_LAUNCHER: Final = {
    "hwloc_base_binding_policy": "bind_to",
    "rmaps_base_mapping_policy": "map_by",
}


@dataclass
class McaParam:
    name: str
    type: str = "string"
    value: str = ""  # the current (default) value as ompi_info reports it
    enumerators: dict[str, str] = field(default_factory=dict)  # name -> number, as listed
    synonym_of: str | None = None
    at_least: int | None = None  # from the help text's "(must be >= N)"
    disabled: bool = False
    # A framework's selection parameter (btl, pml, coll, ...): its components by every name
    # they answer to (an old name such as vader, from its parameters' synonyms) -> the name.
    components: dict[str, str] = field(default_factory=dict)


def parse_params(text: str) -> dict[str, McaParam]:
    """Every MCA parameter of `ompi_info --all --parsable` output, by name."""
    params: dict[str, McaParam] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        name, rest = m.groups()
        p = params.setdefault(name, McaParam(name))
        key, _, value = rest.partition(":")
        if key == "value":
            p.value = value
        elif key == "type":
            p.type = value
        elif key == "enumerator":  # enumerator:value:<number>:<name>
            number, _, label = value.removeprefix("value:").partition(":")
            p.enumerators[label] = number
        elif key == "synonym_of":
            p.synonym_of = value.removeprefix("name:")
        elif key == "disabled":
            p.disabled = value == "true"
        elif key == "help" and (bound := _AT_LEAST.search(value)):
            p.at_least = int(bound.group(1))
    for framework, names in _components(text, params).items():
        if framework in params:
            params[framework].components = names
    return params


_COMPONENT: Final = re.compile(r"^mca:([a-z0-9_]+):([a-z0-9_]+):version:")


def _components(text: str, params: dict[str, McaParam]) -> dict[str, dict[str, str]]:
    """framework -> {name or old name: component}. Open MPI 5 still takes a renamed
    component's old name (btl vader is sm); ompi_info says so only through the synonyms
    of its parameters (btl_vader_eager_limit -> btl_sm_eager_limit)."""
    found: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        m = _COMPONENT.match(line.strip())
        if m and m.group(2) != "base":
            found.setdefault(m.group(1), {})[m.group(2)] = m.group(2)
    for name, p in params.items():
        target = p.synonym_of or ""
        framework = target.split("_", 1)[0]
        names = found.get(framework, {})
        for comp in list(names.values()):
            prefix = f"{framework}_{comp}_"
            rest = target.removeprefix(prefix)
            if rest != target and name.startswith(f"{framework}_") and name.endswith(f"_{rest}"):
                old = name[len(framework) + 1:len(name) - len(rest) - 1]
                if old and "_" not in old and old not in names:
                    names[old] = comp
    return found


def component_set(p: McaParam, value: str) -> tuple[bool, frozenset[str]]:
    """(excluded, components) a framework selection value names ("^a,b": all but a and b),
    old names replaced by the current ones."""
    excluded = value.strip().startswith("^")
    items = value.strip().removeprefix("^").split(",")
    return excluded, frozenset(p.components.get(c.strip(), c.strip()) for c in items
                               if c.strip())


def query_params(ompi_info: Path) -> dict[str, McaParam]:
    """The parameters of the Open MPI whose ompi_info this is; UserError when it fails."""
    done = listing(ompi_info)
    if done.error is not None:
        raise UserError(f"{ompi_info} --all --parsable failed: {done.error}")
    params = parse_params(done.text)
    if not params:
        raise UserError(f"{ompi_info} --all --parsable listed no MCA parameter "
                        f"(exit status {done.returncode})")
    return params


def canonical(params: dict[str, McaParam], name: str) -> str:
    """The name a synonym stands for (btl_vader_eager_limit -> btl_sm_eager_limit)."""
    p = params.get(name)
    return p.synonym_of if p is not None and p.synonym_of in params else name


def check_name(params: dict[str, McaParam], name: str, where: str, mpi: str) -> McaParam:
    """The parameter called `name`; UserError naming `where` when Open MPI has none."""
    p = params.get(name)
    if p is not None and not p.disabled:
        return p
    if p is not None:
        raise UserError(f"{where}: {name!r} is disabled in {mpi} (ompi_info); a setting "
                        "would have no effect")
    if name in MOVED_TO_LAUNCHER:
        alt = MOVED_TO_LAUNCHER[name]
        raise UserError(f"{where}: {name!r} is not an MCA parameter of {mpi} (ompi_info "
                        f"--all); the launcher sets this since Open MPI 5 and ignores the "
                        f"MCA name silently: use name = {alt!r} (mpirun --{alt.replace('_', '-')})")
    raise UserError(f"{where}: {name!r} is not an MCA parameter of {mpi} (ompi_info --all); "
                    f"Open MPI would ignore it{did_you_mean(name, params)}")


def check_value(p: McaParam, value: str, where: str) -> str:
    """The value as it goes on the command line; UserError when Open MPI would reject it.

    Sizes like "8K" are accepted for integer parameters and written out in bytes.
    """
    if p.type == "bool":
        if value.lower() not in _BOOL_WORDS:
            raise UserError(f"{where}: {value!r} is not a value of {p.name} (bool); valid: "
                            "true, false")
        return _BOOL_WORDS[value.lower()]
    if p.enumerators:
        for label, number in p.enumerators.items():
            if value.lower() in (label.lower(), number):
                return value
        choices = [f"{label} ({number})" for label, number in p.enumerators.items()]
        raise UserError(f"{where}: {value!r} is not a value of {p.name}; valid: "
                        f"{', '.join(choices)}{did_you_mean(value, p.enumerators)}")
    if p.components:
        _check_components(p, value, where)
        return value
    if p.type in _INT_RANGES:
        return str(_check_int(p, value, where))
    if p.type == "double":
        try:
            float(value)
        except ValueError:
            raise UserError(f"{where}: {value!r} is not a number ({p.name} is a double)") from None
    return value


def _check_int(p: McaParam, value: str, where: str) -> int:
    try:
        number = int(value) if re.fullmatch(r"-?\d+", value.strip()) else parse_size(value)
    except ValueError:
        raise UserError(f"{where}: {value!r} is not an integer ({p.name} is {p.type}; "
                        "sizes like 8K are accepted)") from None
    low, high = _INT_RANGES[p.type]
    if p.at_least is not None:
        low = max(low, p.at_least)
    if not low <= number <= high:
        raise UserError(f"{where}: {value} is out of range for {p.name} ({p.type}); "
                        f"valid: {low} to {high}")
    return number


def _check_components(p: McaParam, value: str, where: str) -> None:
    """Every component a selection value names is one of this MPI's (or an old name of
    one): Open MPI would otherwise run without it, or fail at MPI_Init."""
    items = [c.strip() for c in value.strip().removeprefix("^").split(",")]
    for c in filter(None, items):  # empty: every component
        if c not in p.components:
            valid = sorted(set(p.components.values()))
            raise UserError(f"{where}: {c!r} is not a {p.name} component of this MPI "
                            f"(ompi_info); valid: {', '.join(valid)}"
                            f"{did_you_mean(c, valid)}")
