"""Which launch backends exist, by name: the one list the spec, the CLI and the runner use.

Built-in backends are named here as "module:Class" strings, so the spec can validate
`run.backend` without importing the backends (they sit above it). Another package adds a
backend through the entry-point group `collbench.backends`; a name may be taken only
once, whoever takes it.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import Any, Final

from collbench.errors import UserError, choice_error

GROUP: Final = "collbench.backends"
BUILTIN: Final[dict[str, str]] = {
    "local": "collbench.launch.local:LocalBackend",
    "slurm": "collbench.launch.slurm.backend:SlurmBackend",
    "simgrid": "collbench.launch.simgrid:SimgridBackend",
    "fake": "collbench.launch.fake:FakeBackend",  # a Python stand-in kernel, for tests
    "hosts": "collbench.launch.hosts:HostsBackend",  # mpirun --hostfile over ssh
}
_added: dict[str, type[Any]] = {}


class DuplicateBackend(ValueError):
    """Two backends claim one name."""


@cache
def _plugins() -> dict[str, str]:
    found: dict[str, str] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in BUILTIN or found.get(ep.name, ep.value) != ep.value:
            raise DuplicateBackend(f"backend name {ep.name!r} is claimed twice ({ep.value} "
                                   f"and {BUILTIN.get(ep.name) or found[ep.name]})")
        found[ep.name] = ep.value
    return found


def names() -> tuple[str, ...]:
    """Every backend name, built-in first."""
    return (*BUILTIN, *sorted(set(_plugins()) | set(_added)))


def register(cls: type[Any]) -> type[Any]:
    """Add a backend class at run time (its `name` attribute); a taken name is refused."""
    name = str(getattr(cls, "name", ""))
    if not name:
        raise ValueError(f"{cls.__qualname__}: a backend needs a name")
    if name in names():
        raise DuplicateBackend(f"backend name {name!r} is taken")
    _added[name] = cls
    return cls


def unregister(name: str) -> None:
    """Drop a backend added with register (tests)."""
    _added.pop(name, None)


def load(name: str, where: str = "--backend") -> type[Any]:
    """The class of backend `name`; a UserError listing the valid names."""
    if name in _added:
        return _added[name]
    target = BUILTIN.get(name) or _plugins().get(name)
    if target is None:
        raise choice_error(where, "backend", name, names())
    module, _, attr = target.partition(":")
    try:
        cls: type[Any] = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise UserError(f"backend {name!r}: cannot load {target}: {e}") from None
    if getattr(cls, "name", None) != name:
        raise DuplicateBackend(f"{target} calls itself {getattr(cls, 'name', None)!r}, "
                               f"registered as {name!r}")
    return cls
