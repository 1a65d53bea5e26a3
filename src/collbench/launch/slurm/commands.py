"""The command one launch runs inside the allocation: srun (direct launch) or mpirun.

Placement follows the spec's map_by / bind_to: mpirun gets them verbatim (as in a local
run; inside an allocation it takes the nodes and slots from Slurm), srun gets the
equivalent --distribution / --cpu-bind and a node count. Every rank first records the
node it runs on (PROBE) and then execs the kernel, so the launch's node list is what
really happened, not what was asked for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.launch.base import Call
from collbench.launch.local import mpirun_command
from collbench.plan import Launch
from collbench.spec.slurm import SlurmConfig

# $0 is the launch's work directory; the rank variable comes from PMIx (Open MPI, srun
# --mpi=pmix) or PMI (MPICH, pmi2); the pid keeps names unique if neither is set.
PROBE: Final = 'uname -n >"$0/hosts/${PMIX_RANK:-${PMI_RANK:-x}}.$$"; exec "$@"'
HOSTS_DIR: Final = "hosts"

# --map-by -> srun --distribution (node level : socket level)
DISTRIBUTION: Final = {
    "core": "block:block", "hwthread": "block:block", "slot": "block:block",
    "socket": "block:cyclic", "numa": "block:cyclic", "node": "cyclic:block",
}
# --bind-to -> srun --cpu-bind
CPU_BIND: Final = {"core": "cores", "hwthread": "threads", "socket": "sockets",
                   "numa": "ldoms", "none": "none"}


@dataclass(frozen=True)
class Shape:
    """The allocation every job asks for."""

    nodes: int
    tasks_per_node: int

    @property
    def slots(self) -> int:
        return self.nodes * self.tasks_per_node


def shape_of(cfg: SlurmConfig, nprocs: list[int]) -> Shape:
    tpn = cfg.tasks_per_node or math.ceil(max(nprocs) / cfg.nodes)
    return Shape(cfg.nodes, tpn)


def check_fits(launches: list[Launch], shape: Shape, source: str) -> None:
    for launch in launches:
        if launch.nprocs > shape.slots and not launch.oversubscribe:
            raise UserError(
                f"{source}: measure.nprocs: {launch.nprocs} processes do not fit in "
                f"run.slurm.nodes × tasks_per_node = {shape.nodes} × {shape.tasks_per_node}; "
                "raise those, or set run.oversubscribe = true")


def nodes_used(launch: Launch, shape: Shape) -> int:
    """Nodes the ranks land on: round-robin for map_by node, else filling nodes in order."""
    if launch.mapping == "node":
        return max(1, min(shape.nodes, launch.nprocs))
    return max(1, min(shape.nodes, math.ceil(launch.nprocs / shape.tasks_per_node)))


def srun_mpi(cfg: SlurmConfig, mpi: MpiInstall, available: list[str] | None) -> str:
    """The --mpi plugin; `available` is `srun --mpi=list` (None: srun not here to ask)."""
    want = cfg.srun_mpi
    if want == "auto":
        want = "pmi2" if mpi.implementation == "mpich" else "pmix"
        if available is not None and want not in available:
            raise UserError(
                f"run.slurm.srun_mpi: srun here has no {want} plugin (srun --mpi=list: "
                f"{', '.join(available) or 'nothing'}), which {mpi.implementation} needs to "
                "start as one job under srun; valid: launcher = \"mpirun\", or srun_mpi = "
                f"{', '.join(available) or 'none'}")
    return want


def _probed(work: Path, kernel_argv: list[str]) -> list[str]:
    return ["sh", "-c", PROBE, str(work), *kernel_argv]


def impi_startup(mpi: MpiInstall, launch: Launch) -> tuple[tuple[str, str], ...]:
    """Intel MPI's mpirun inside an allocation: the fabrics the local backend sets."""
    if mpi.implementation != "impi":
        return ()
    from collbench.catalog import impi

    return impi.startup_env(dict(launch.env))


def impi_problem(cfg: SlurmConfig, mpi: MpiInstall, launches: Sequence[Launch],
                 source: str) -> str | None:
    """Why Intel MPI cannot run these launches under Slurm as collbench would label them
    (None: it can)."""
    if why := impi_launcher_problem(cfg, mpi, source):
        return why
    for la in launches:
        if why := impi_placement_problem(mpi, la):
            return f"{source}: measure.map_by: \"node\" (or a ppn) {why}"
    return None


def impi_launcher_problem(cfg: SlurmConfig, mpi: MpiInstall, source: str) -> str | None:
    """srun as Intel MPI's launcher needs Slurm's PMI library as I_MPI_PMI_LIBRARY: untested
    (the Debian Slurm here ships PMIx only)."""
    if mpi.implementation != "impi" or cfg.launcher != "srun":
        return None
    return (f"{source}: run.slurm.launcher: \"srun\" with Intel MPI: collbench starts "
            "it with its own mpirun inside the allocation (srun bootstraps Hydra's "
            "proxies); valid: launcher = \"mpirun\"")


def impi_placement_problem(mpi: MpiInstall, launch: Launch) -> str | None:
    """Intel MPI's Hydra inside an allocation places ranks as Slurm lays the tasks out
    (filling each node in turn) and ignores -ppn, also with
    I_MPI_JOB_RESPECT_PROCESS_PLACEMENT=0 and I_MPI_PERHOST=1 (2021.18.1 on the test
    cluster: -ppn 1 still ran n1 n1 n2 n2). A row saying map_by node would be a lie."""
    if mpi.implementation != "impi" or not (launch.mapping == "node" or launch.ppn):
        return None
    return ("with Intel MPI under Slurm: its mpirun places ranks as Slurm lays out the "
            "tasks and ignores -ppn; valid: map_by = \"core\" (fill each node in turn)")


def launch_command(cfg: SlurmConfig, mpi: MpiInstall, launch: Launch, call: Call,
                   shape: Shape, mpi_plugin: str,
                   guard: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """(argv, extra environment) that run this launch inside the allocation. `guard`: what
    runs each rank's command (launch/guard.py), after the probe."""
    work = call.work
    kernel = call.argv(launch)
    env = dict(launch.env)
    ranked = [*guard, *kernel]
    if cfg.launcher == "mpirun":
        argv = mpirun_command(mpi, launch, call, startup=impi_startup(mpi, launch))
        return argv[:len(argv) - len(kernel)] + _probed(work, ranked), env
    # srun takes no --mca: Open MPI reads the same settings from OMPI_MCA_* variables.
    env.update({f"OMPI_MCA_{k}": v for k, v in launch.mca})
    argv = ["srun", f"--mpi={mpi_plugin}", "--kill-on-bad-exit=1",
            "-n", str(launch.nprocs), "-N", str(nodes_used(launch, shape)),
            f"--distribution={DISTRIBUTION[launch.mapping]}",
            f"--cpu-bind={CPU_BIND[launch.binding]}"]
    if launch.oversubscribe:
        argv.append("--overcommit")
    return argv + _probed(work, ranked), env


def job_environment(cfg: SlurmConfig, mpi: MpiInstall) -> dict[str, str]:
    """Variables the whole job needs."""
    if cfg.launcher == "srun" and (mpi.bindir / "ompirun_wrapper").exists():
        # The Open MPI wheel is built for another prefix; its mpirun wrapper sets
        # OPAL_PREFIX, but srun starts the kernel directly (else help texts go missing).
        return {"OPAL_PREFIX": str(mpi.bindir.parent)}
    return {}
