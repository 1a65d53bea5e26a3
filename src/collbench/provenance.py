"""Where and with what a campaign ran: enough to reproduce or distrust a number."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collbench.catalog import ompi_info
from collbench.catalog.mpi import MpiInstall, launcher_env
from collbench.version import __version__

# Environment variables that change MPI behaviour or placement.
ENV_PREFIXES = ("OMPI_", "PMIX_", "PRTE_", "MPIR_CVAR_", "MPICH_", "HYDRA_", "I_MPI_", "UCX_",
                "SLURM_", "OMP_", "FI_", "COLLBENCH_")
ENV_NAMES = ("PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "HOSTNAME")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _sockets() -> int | None:
    ids = set()
    for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/topology/physical_package_id"):
        try:
            ids.add(p.read_text().strip())
        except OSError:
            continue
    return len(ids) or None


def mpi_info_dump(mpi: MpiInstall) -> str:
    """`ompi_info --all --parsable` (Open MPI), `mpichversion` (MPICH) or `impi_info -a`
    (Intel MPI), verbatim."""
    if mpi.info_tool is None:
        return ""
    if mpi.implementation == "openmpi":
        run = ompi_info.listing(mpi.info_tool)
        command = " ".join(run.argv)
        if run.error is not None:
            return f"# {command} failed: {run.error}\n"
        return f"# {command}\n{run.text}"
    # Intel MPI's impi_info needs its library path (launcher_env) and lists with -a
    args = [str(mpi.info_tool), *(["-a"] if mpi.implementation == "impi" else [])]
    try:
        out = subprocess.run(args, capture_output=True, text=True, errors="replace",
                             timeout=120, check=False, env=launcher_env(mpi))
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"# {' '.join(args)} failed: {e}\n"
    return f"# {' '.join(args)}\n{out.stdout}"


def collect(mpi: MpiInstall, kernel: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}
    warnings = []
    if os.environ.get("OMPI_MCA_mpi_yield_when_idle") not in (None, "0"):
        warnings.append("OMPI_MCA_mpi_yield_when_idle is set: ranks yield the CPU when idle, "
                        "which changes latencies; do not read these as tuned performance")
    return {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "collbench_version": __version__,
        "host": socket.gethostname(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "sockets": _sockets(),
        "mpi": mpi.as_dict(),
        "kernel": kernel,
        "environment": env,
        "warnings": warnings,
        "mpi_info_dump": mpi_info_dump(mpi),
    }
