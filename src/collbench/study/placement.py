"""Ask mpirun itself whether each placement a study will use is accepted, before running.

Open MPI 5 refuses a binding above the mapping object (`--map-by core --bind-to socket`
exits 77), and such rules differ between versions and launchers; a trial start of `true`
with the exact placement flags of the stage's launches is the one check that cannot be
out of date. Only the local backend starts mpirun on this machine, so only it is checked.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from collbench.catalog.mpi import MpiInstall, launcher_env
from collbench.errors import UserError
from collbench.launch.base import KernelCall
from collbench.launch.local import LocalBackend
from collbench.plan import Launch, Plan
from collbench.study.spec import Parameter, Study

TRIAL_TIMEOUT_S = 60


def _trial(backend: LocalBackend, launch: Launch) -> str | None:
    """mpirun's complaint about this launch's placement, or None when it starts."""
    with tempfile.TemporaryDirectory() as tmp:
        call = KernelCall(Path("true"), Path(tmp) / "jobs", Path(tmp) / "out")
        argv = backend.command(launch, call)
        argv = [*argv[:len(argv) - len(call.argv(launch))], "true"]
        try:
            done = subprocess.run(argv, env=launcher_env(backend.mpi), capture_output=True,
                                  text=True, timeout=TRIAL_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{type(e).__name__}: {e}"
    if done.returncode == 0:
        return None
    text = " ".join(line.strip() for line in (done.stderr + done.stdout).splitlines()
                    if line.strip() and not set(line.strip()) <= {"-"})
    return f"exit status {done.returncode}: {text[:400].strip()}"


def check_placements(study: Study, params: Sequence[Parameter], plans: Sequence[Plan],
                     mpi: MpiInstall, backend_name: str) -> None:
    """UserError naming the study parameter whose placement mpirun refuses."""
    if backend_name != "local":
        return
    backend = LocalBackend(mpi)
    seen: set[tuple[object, ...]] = set()
    for i, (p, plan) in enumerate(zip(params, plans, strict=True)):
        for launch in plan.launches:
            key = (launch.nprocs, launch.mapping, launch.binding, launch.oversubscribe)
            if key in seen:
                continue
            seen.add(key)
            problem = _trial(backend, launch)
            if problem:
                raise UserError(
                    f"{study.source}: study.parameters[{i}] ({p.name}): mpirun refuses -np "
                    f"{launch.nprocs} --map-by {launch.mapping} --bind-to {launch.binding}; "
                    f"{problem}")
