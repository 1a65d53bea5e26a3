"""Backends made the way collbench makes them (registry + BackendSetup), for unit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collbench.catalog.mpi import MpiInstall
from collbench.launch.base import Backend, BackendSetup, create
from collbench.spec import Spec, parse_spec
from collbench.store import Store

MINIMAL_SPEC = """\
[campaign]
name = "unit"

[measure]
collectives = ["bcast"]
sizes = [8]
nprocs = [2]
"""


def make_backend(name: str, mpi: MpiInstall, spec: Spec | None = None,
                 root: Path = Path("/nonexistent/collbench-results"), **setup: Any) -> Backend:
    """Backend `name` for `spec` (default: a minimal spec), results folder `root`."""
    spec = spec or parse_spec(MINIMAL_SPEC, "unit.toml")
    return create(name, BackendSetup(spec, mpi, "unit.toml", Store(root), **setup))
