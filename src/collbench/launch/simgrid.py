"""SimGrid SMPI backend: the kernel, built with smpicc, runs on a simulated cluster.

One `smpirun` per launch: `-platform` (the XML collbench generated from the cluster
description), `-hostfile` (where --map-by puts each rank), and `--cfg` options:
- smpi/coll-selector:ompi (or mpich): the baseline that mimics the library's decisions;
- smpi/<collective>:<algorithm> for a launch forcing one algorithm (SMPI has no MPI_T:
  one launch per algorithm);
- determinism: smpi/simulate-computation:no (host CPU time never enters the simulated
  clock) and smpi/wtime:0 (MPI_Wtime costs no simulated time), so the same launch gives
  the same numbers on any machine;
- scale: smpi/auto-shared-malloc-thresh (ranks share buffers of 64 KiB and more) unless
  results are validated; globals are privatised with dlopen, SMPI's default (the kernel
  keeps its rank in globals, so privatisation cannot be switched off).
Timeouts and interruption kill the whole process group (launch.process).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

from collbench.catalog.simgrid import smpi_algorithm
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary, build_kernel
from collbench.launch.base import Backend, KernelCall, LaunchOutcome, register
from collbench.launch.process import run_group
from collbench.plan import LAUNCH, Launch
from collbench.platforms.loader import platform_args
from collbench.platforms.model import Cluster
from collbench.platforms.placement import hostfile, nodes_used, place
from collbench.platforms.simgrid_xml import node_id

INSTALL_HINT: Final = ("install SimGrid's SMPI (Debian/Ubuntu: apt-get install "
                       "libsimgrid-dev), or put smpicc and smpirun on PATH")
SHARED_MALLOC_THRESH: Final = 65536
# Quiet start-up chatter; SMPI's collective notices (fallbacks) and errors stay visible.
LOG_OPTIONS: Final = ("--log=xbt_cfg.thres:warning", "--log=smpi_config.thres:warning",
                      "--log=smpi_coll.thres:warning")


@dataclass(frozen=True)
class SmpiTools:
    smpicc: Path
    smpirun: Path
    version: str  # SimGrid version, e.g. "3.32"


def find_smpi() -> SmpiTools:
    """smpicc and smpirun from PATH, and the SimGrid version; UserError when missing."""
    found = {name: shutil.which(name) for name in ("smpicc", "smpirun")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise UserError(f"SimGrid backend: {' and '.join(missing)} not found on PATH; "
                        f"{INSTALL_HINT}")
    smpirun = Path(str(found["smpirun"]))
    try:
        out = subprocess.run([str(smpirun), "-version"], capture_output=True, text=True,
                             timeout=60, check=False)
        text = out.stdout + out.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"{smpirun} -version failed: {e}; {INSTALL_HINT}") from None
    m = re.search(r"SimGrid version (\S+)", text)
    if not m:
        raise UserError(f"{smpirun} -version: no SimGrid version in {text.strip()[:200]!r}")
    return SmpiTools(Path(str(found["smpicc"])), smpirun, m.group(1).rstrip("."))


def compat_header() -> Path:
    return Path(str(resources.files("collbench.kernel").joinpath("smpi_compat.h")))


def build_smpi_kernel(tools: SmpiTools, cache_dir: Path | None = None) -> KernelBinary:
    """The kernel compiled with smpicc; cached apart from MPI builds (smpicc's fingerprint).

    The compat header's hash rides along as a define, so a changed header gives a new
    binary even though build_kernel only hashes the kernel source and the flags.
    """
    header = compat_header()
    digest = hashlib.sha256(header.read_bytes()).hexdigest()[:12]
    return build_kernel(tools.smpicc, cache_dir,
                        ["-include", str(header), f"-DCOLLBENCH_SMPI_COMPAT={digest}"])


def _lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text(errors="replace").splitlines() if line.strip())
    except OSError:
        return 0


# What matters in SMPI's stderr: errors, deadlocks, algorithm fallbacks, the kernel's own
# messages. A deadlock also lists every blocked rank, which would bury the cause.
_WORTH_KEEPING: Final = re.compile(r"CRITICAL|ERROR|Deadlock|xception|smpi_colls|"
                                   r"collbench_kernel|Invalid|invalid|abort|Abort")


def smpi_messages(stderr: Path, limit: int = 1500) -> str:
    """The informative lines of a launch's stderr (deduplicated, at most `limit` chars)."""
    try:
        lines = stderr.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    kept = list(dict.fromkeys(re.sub(r"^\[[^\]]*\]\s*", "", line) for line in lines
                              if _WORTH_KEEPING.search(line)))
    return "\n".join(kept)[-limit:]


@dataclass(frozen=True)
class SimSettings:
    """Everything a simulated launch needs besides the launch itself."""

    tools: SmpiTools
    cluster: Cluster
    platform_xml: Path
    implementation: str  # whose algorithm names the plan uses: openmpi | mpich
    selector: str  # SMPI's coll-selector for the default: ompi | mpich
    cfg: tuple[str, ...] = ()  # the spec's run.simgrid.cfg, passed last
    shared_malloc: bool = True

    def base_cfg(self) -> list[str]:
        cfg = [f"smpi/coll-selector:{self.selector}", "smpi/simulate-computation:no",
               "smpi/wtime:0"]
        if self.shared_malloc:
            cfg.append(f"smpi/auto-shared-malloc-thresh:{SHARED_MALLOC_THRESH}")
        return cfg


@register
class SimgridBackend(Backend):
    name = "simgrid"
    settings: SimSettings | None = None

    def configure(self, settings: SimSettings) -> None:
        self.settings = settings

    def _settings(self) -> SimSettings:
        if self.settings is None:
            raise UserError("the simgrid backend needs a platform: run it through "
                            "`collbench run SPEC --backend simgrid --platform NAME`")
        return self.settings

    def forced_cfg(self, launch: Launch) -> list[str]:
        """`smpi/<collective>:<algorithm>` for a launch that forces one algorithm."""
        if launch.selection != LAUNCH:
            return []
        s, point = self._settings(), launch.points[0]
        alg = smpi_algorithm(s.implementation, point.collective, point.algorithm)
        if alg is None:  # make_plan only plans algorithms SMPI has; a stale plan might not
            raise UserError(f"launch {launch.launch_id}: {point.collective} algorithm "
                            f"{point.algorithm!r} has no SMPI counterpart")
        return [f"smpi/{point.collective}:{alg.smpi}"]

    @staticmethod
    def hostfile_path(call: KernelCall) -> Path:
        return call.jobfile.parent / "hostfile.txt"

    def _platform(self) -> tuple[list[str], dict[str, str]]:
        s = self._settings()
        return platform_args(s.cluster, s.platform_xml, s.tools.version)

    def command(self, launch: Launch, call: KernelCall) -> list[str]:
        s = self._settings()
        cfg = [*s.base_cfg(), *self.forced_cfg(launch), *s.cfg]
        platform, env = self._platform()
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return [*prefix, str(s.tools.smpirun), "-np", str(launch.nprocs), *platform,
                "-hostfile", str(self.hostfile_path(call)), *(f"--cfg={c}" for c in cfg),
                *LOG_OPTIONS, *call.argv(launch)]

    def run(
        self, launch: Launch, call: KernelCall, interrupted: Callable[[], bool]
    ) -> LaunchOutcome:
        s = self._settings()
        argv = self.command(launch, call)
        path = self.hostfile_path(call)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hostfile(s.cluster, launch.nprocs, launch.mapping))
        done = run_group(argv, dict(os.environ), launch.timeout_s, call.outfile.parent,
                         interrupted)
        status = ("interrupted" if done.interrupted else "timeout" if done.timed_out
                  else "ok" if done.returncode == 0 else "failed")
        if status == "ok" and _lines(call.outfile) < len(launch.points):
            status = "failed"  # SMPI exits 0 after reporting a deadlock
        used = sorted({node for node, _ in place(s.cluster, launch.nprocs, launch.mapping)})
        tail = smpi_messages(call.outfile.parent / "stderr.txt") or done.stderr_tail
        return LaunchOutcome(status, argv, done.returncode, done.wall_s, tail,  # type: ignore[arg-type]
                             [f"{s.cluster.name}:{node_id(n)}" for n in used])

    def nodes(self, launch: Launch) -> int:
        return nodes_used(self._settings().cluster, launch.nprocs, launch.mapping)
