"""Hosts backend: `mpirun --hostfile` over ssh on the hosts of `[run.hosts]` (docs/hosts.md).

mpirun starts its own daemons on the hosts through ssh (Open MPI 4.1's ORTE plm_rsh, 5.0's
PRRTE plm_ssh, MPICH's Hydra ssh launcher); collbench writes each launch's hostfile in
its work folder, names the ssh agent, and checks before anything runs that every host
answers over ssh and sees the MPI and the kernel at this machine's paths (a shared file
system). A timeout or a kill ends mpirun's process group as for the local backend; the
remote daemons lose their connection to mpirun and end with their ranks, which the ssh
sessions then close (tests/launch/test_hosts.py checks that nothing survives).
"""

from __future__ import annotations

import fcntl
import math
import os
import shlex
import shutil
import socket
import struct
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from collbench.catalog import impi
from collbench.catalog.algorithms import Catalog
from collbench.errors import UserError
from collbench.inputs import read_text
from collbench.kernel.build import KernelBinary
from collbench.launch import guard
from collbench.launch.allocation import Allocation
from collbench.launch.base import BackendSetup, Call, LaunchBackend, LaunchOutcome, Planning
from collbench.launch.local import major, mpirun_command, refuse_environment_forcing, run_mpirun
from collbench.plan import Launch
from collbench.spec.hosts import Host, HostsConfig, parse_host, parse_hostfile
from collbench.spec.workload import Workload

PREFLIGHT_TIMEOUT_S: Final = 30
PREFLIGHT_PARALLEL: Final = 16
HOSTFILE: Final = "hostfile"
SSH_WRAPPER: Final = "ssh-launcher.sh"  # Hydra's -launcher-exec takes one program, no options
LOOPBACK: Final = ("localhost", "127.0.0.1")


def _beside(ref: str, source: str) -> Path:
    """A path from the spec: relative ones from the spec's folder."""
    path = Path(ref).expanduser()
    return path if path.is_absolute() else Path(source).parent / path


def load_hosts(cfg: HostsConfig, source: str) -> tuple[Host, ...]:
    """The hosts of `[run.hosts]`: its list, or its hostfile read (bounded) and parsed."""
    if cfg.hosts is not None:
        return tuple(parse_host(h) for h in cfg.hosts)
    if cfg.hostfile is None:
        raise UserError(f"{source}: run.hosts: backend \"hosts\" needs hostfile = \"FILE\" or "
                        "hosts = [\"n1:16\", \"n2:16\"]")
    path = _beside(cfg.hostfile, source)
    try:
        return parse_hostfile(read_text(path, "hostfile"), str(path))
    except ValueError as e:
        raise UserError(f"{source}: run.hosts.hostfile: {e}") from None


def is_local(name: str) -> bool:
    """mpirun starts ranks on this machine itself, without ssh."""
    here = socket.gethostname()
    return name in LOOPBACK or name in (here, here.split(".")[0], os.uname().nodename)


def listing(hosts: tuple[Host, ...], most: int = 4) -> str:
    shown = ", ".join(f"{h.name}:{h.slots}" for h in hosts[:most])
    return shown + (f", … ({len(hosts)} hosts)" if len(hosts) > most else "")


@dataclass(frozen=True)
class Answer:
    """What one host said to the pre-flight check."""

    host: str
    unreachable: str | None = None  # why ssh failed
    missing: str | None = None  # the first path the host does not have
    contact: str | None = None  # this machine's address as the host sees it


class HostsBackend(LaunchBackend):
    name = "hosts"

    def __init__(self, setup: BackendSetup) -> None:
        super().__init__(setup)
        cfg = self.spec.run.hosts
        self.hosts = load_hosts(cfg, setup.source)
        self.ssh_config = _beside(cfg.ssh_config, setup.source) if cfg.ssh_config else None
        if self.ssh_config is not None and not self.ssh_config.is_file():
            raise UserError(f"{setup.source}: run.hosts.ssh_config: {self.ssh_config} is not "
                            "a file")
        # This machine's address as the hosts see it: Hydra's proxies call back to it, and
        # its own name may resolve to a loopback address (set by the pre-flight check).
        self.contact: str | None = None

    # --- planning ---------------------------------------------------------------------
    def planning(self, base: Catalog) -> Planning:
        refuse_environment_forcing(self.mpi)
        self._check_slots()
        return Planning(base, sum(h.slots for h in self.hosts))

    def _shapes(self) -> list[tuple[int, int | None]]:
        """Every (nprocs, ppn) the plan may hold (paired when zipped together)."""
        m = self.spec.measure
        ppns: list[int | None] = list(m.ppn) if m.ppn else [None]
        if any({"nprocs", "ppn"} <= set(group) for group in self.spec.zip):
            return list(zip(m.nprocs, ppns, strict=True))
        return [(n, p) for n in m.nprocs for p in ppns]

    def _check_slots(self) -> None:
        """More ranks than the hosts have slots is refused before anything runs (unless
        run.oversubscribe = true), as is a ppn above a host's slots."""
        src, over = self.setup.source, self.spec.run.oversubscribe is True
        total = sum(h.slots for h in self.hosts)
        fix = "list more hosts or slots, or set run.oversubscribe = true"
        for nprocs, ppn in self._shapes():
            if ppn is None:
                if nprocs > total and not over:
                    raise UserError(f"{src}: measure.nprocs: {nprocs} ranks need {nprocs} "
                                    f"slots; run.hosts lists {total} ({listing(self.hosts)}); "
                                    f"{fix}")
                continue
            need = math.ceil(nprocs / ppn)
            if need > len(self.hosts):
                raise UserError(f"{src}: measure.ppn: {nprocs} ranks at {ppn} per node need "
                                f"{need} hosts; run.hosts lists {len(self.hosts)} "
                                f"({listing(self.hosts)}); list more hosts or raise ppn")
            short = [h for h in self.hosts[:need] if h.slots < min(ppn, nprocs)]
            if short and not over:
                h = short[0]
                raise UserError(f"{src}: measure.ppn: {ppn} ranks per node exceed the "
                                f"{h.slots} slots of host {h.name}; {fix}")

    def nodes(self, launch: Launch) -> int:
        return len(self.used(launch))

    def used(self, launch: Launch) -> list[str]:
        """The hosts this launch's ranks land on, in order."""
        names = [h.name for h in self.hosts]
        if launch.ppn:
            return names[:max(1, min(len(names), math.ceil(launch.nprocs / launch.ppn)))]
        # Hydra fills each host's slots in turn whatever -map-by says (it binds, not places);
        # Intel MPI's Hydra too, but mapping "node" is given to it as -ppn 1 (round robin).
        impl = self.mpi.implementation
        mapping = ("slot" if impl == "mpich" or (impl == "impi" and launch.mapping != "node")
                   else launch.mapping)
        alloc = Allocation("", tuple(names), tuple(h.slots for h in self.hosts))
        return names[:alloc.nodes_used(launch.nprocs, mapping)]

    # --- describing -------------------------------------------------------------------
    def describe(self) -> str:
        via = f" (ssh -F {self.ssh_config})" if self.ssh_config else ""
        return f"hosts: {listing(self.hosts)} over ssh{via}"

    def campaign_meta(self) -> dict[str, Any]:
        return {"hosts": [f"{h.name}:{h.slots}" for h in self.hosts]}

    # --- building, and the pre-flight check -------------------------------------------
    def build_kernel(self) -> KernelBinary:
        binary = super().build_kernel()
        self.preflight(binary.path, "the kernel")
        return binary

    def build_program(self, workload: Workload) -> KernelBinary:
        binary = super().build_program(workload)
        # each rank runs under the rank guard (launch/guard.py): the hosts need it too
        self.preflight(binary.path, f"the program {workload.label()}",
                       {guard.build(self.compiler()): "the rank guard"})
        return binary

    def ssh_base(self) -> list[str]:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise UserError(f"{self.setup.source}: run.hosts: no ssh on PATH; install an ssh "
                            "client (openssh-client)")
        return [ssh, *(["-F", str(self.ssh_config)] if self.ssh_config else []),
                "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]

    def preflight(self, binary: Path, what: str,
                  others: dict[Path, str] | None = None) -> None:
        """Every remote host answers over ssh and has the MPI's mpirun, `binary` and the
        files of `others` (path: what it is) at the same paths; else one line naming the
        first host at fault."""
        remote = [h.name for h in self.hosts if not is_local(h.name)]
        if not remote:
            return
        paths = {str(self.mpi.mpirun): "the MPI", str(binary): what,
                 **{str(p): label for p, label in (others or {}).items()}}
        for p in paths:
            if not p.isprintable():
                raise UserError(f"{p!r}: a path with control characters cannot be checked "
                                "over ssh")
        # The remote side always reads a shell command; every path is quoted for it.
        checks = " ".join(shlex.quote(p) for p in paths)
        command = (f'echo "collbench-contact $SSH_CONNECTION"; for f in {checks}; do '
                   f'[ -x "$f" ] || echo "collbench-missing $f"; done')
        base = self.ssh_base()
        with ThreadPoolExecutor(max_workers=min(PREFLIGHT_PARALLEL, len(remote))) as pool:
            answers = list(pool.map(lambda host: _ask(base, host, command), remote))
        bad = [a for a in answers if a.unreachable or a.missing]
        if bad:
            more = f" (and {len(bad) - 1} more host(s))" if len(bad) > 1 else ""
            first = bad[0]
            problem = first.unreachable or _missing(paths.get(first.missing or "", what),
                                                    first.missing or "")
            raise UserError(f"{self.setup.source}: run.hosts: host {first.host} {problem}"
                            f"{more}")
        self.contact = answers[0].contact

    # --- launching --------------------------------------------------------------------
    def host_options(self, work: Path) -> list[str]:
        """mpirun's options naming the hostfile and the ssh agent, per MPI."""
        hostfile = str(work.resolve() / HOSTFILE)
        if self.hydra():
            opts = ["-f", hostfile, "-launcher", "ssh"]
            if self.ssh_config is not None:
                opts += ["-launcher-exec", str(work.resolve() / SSH_WRAPPER)]
            if self.mpi.implementation == "impi":
                # Intel MPI's proxies call back to this machine's host name whatever
                # -localhost says; -iface makes it give the address the hosts reach
                iface = interface_of(self.contact) if self.contact else None
                return opts + (["-iface", iface] if iface else [])
            return opts + (["-localhost", self.contact] if self.contact else [])
        agent = " ".join(["ssh", *(["-F", str(self.ssh_config)] if self.ssh_config else [])])
        if major(self.mpi.version) >= 5:  # PRRTE takes its own parameters with --prtemca
            return ["--hostfile", hostfile, "--prtemca", "plm_ssh_agent", agent]
        return ["--hostfile", hostfile, "--mca", "plm_rsh_agent", agent]

    def hydra(self) -> bool:
        """MPICH's and Intel MPI's mpirun are Hydra: the same host options and hostfile."""
        return self.mpi.implementation in ("mpich", "impi")

    def command(self, launch: Launch, call: Call) -> list[str]:
        startup = impi.startup_env(dict(launch.env)) if self.mpi.implementation == "impi" \
            else ()
        return mpirun_command(self.mpi, launch, call, self.host_options(call.work),
                              startup=startup, guard=guard.argv(self.compiler(), launch))

    def write_files(self, work: Path) -> None:
        """The launch's hostfile (in its MPI's format) and, for Hydra with an ssh config,
        the one-program ssh agent."""
        work.mkdir(parents=True, exist_ok=True)
        mpich = self.hydra()
        lines = [f"{h.name}:{h.slots}" if mpich else f"{h.name} slots={h.slots}"
                 for h in self.hosts]
        (work / HOSTFILE).write_text("\n".join(lines) + "\n")
        if mpich and self.ssh_config is not None:
            wrapper = work / SSH_WRAPPER
            # The config path was checked to hold no whitespace or control characters;
            # quoted, and followed by "$@", it cannot end a line or add a command.
            wrapper.write_text("#!/bin/sh\n# written by collbench for Hydra's (MPICH, Intel MPI) "
                               "-launcher-exec\nexec ssh -F "
                               f"{shlex.quote(str(self.ssh_config))} \"$@\"\n")
            wrapper.chmod(0o755)

    def run(self, launch: Launch, call: Call,
            interrupted: Callable[[], bool]) -> LaunchOutcome:
        self.write_files(call.work)
        return run_mpirun(self.command(launch, call), self.mpi, launch, call, interrupted,
                          self.used(launch))


SIOCGIFADDR: Final = 0x8915  # Linux: an interface's IPv4 address


def interface_of(address: str) -> str | None:
    """The name of this machine's network interface that holds IPv4 `address` (None when
    none does, or the address is not IPv4)."""
    try:
        wanted = socket.inet_aton(address)
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _, name in socket.if_nameindex():
            try:
                got = fcntl.ioctl(sock.fileno(), SIOCGIFADDR,
                                  struct.pack("256s", name.encode()[:15]))
            except OSError:
                continue  # no IPv4 address on it
            if got[20:24] == wanted:
                return name
    return None


def _missing(label: str, path: str) -> str:
    if label == "the MPI":
        return (f"has no {path}: every host needs the MPI at the same path (install it "
                "there, or on a shared file system)")
    return (f"cannot see {label} at {path}: it must be on a file system every host shares "
            "(set COLLBENCH_CACHE to a shared folder for the kernel)")


def _ask(base: list[str], host: str, command: str) -> Answer:
    """One host's answer to the pre-flight command over ssh."""
    try:
        done = subprocess.run([*base, "--", host, command], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=PREFLIGHT_TIMEOUT_S,
                              check=False)
    except subprocess.TimeoutExpired:
        return Answer(host, f"did not answer over ssh within {PREFLIGHT_TIMEOUT_S} s")
    except OSError as e:
        return Answer(host, f"cannot be asked over ssh: {e}")
    lines = done.stdout.splitlines()
    if done.returncode != 0 or not any(ln.startswith("collbench-contact") for ln in lines):
        # The command itself always succeeds: a failure is ssh's (exit status 255).
        why = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
        return Answer(host, "is not reachable over ssh: "
                            f"{why[-1] if why else f'ssh exit status {done.returncode}'}")
    contact = next((ln.split()[1] for ln in lines
                    if ln.startswith("collbench-contact ") and len(ln.split()) > 1), None)
    missing = next((ln.removeprefix("collbench-missing ") for ln in lines
                    if ln.startswith("collbench-missing ")), None)
    return Answer(host, None, missing, contact)
