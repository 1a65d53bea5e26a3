"""SimGrid SMPI backend: the kernel, built with smpicc, runs on a simulated cluster.

Everything a simulation cannot do is rejected before anything runs: MPI_T switching, MCA
parameters, segment sizes and fanouts (SMPI's ports choose their own), algorithms SMPI
does not implement, placements other than core/socket/node, more ranks than the platform
has cores. The results folder gets the cluster description (platform.toml) and the
SimGrid file generated from it (platform.xml); rows say backend "simgrid", mpi "smpi".

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
from typing import Any, Final

from collbench.catalog.algorithms import Catalog
from collbench.catalog.load import load_catalog
from collbench.catalog.simgrid import check_algorithm, selector, simgrid_catalog, smpi_algorithm
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary, build_kernel
from collbench.launch.base import (
    BackendSetup,
    Identity,
    KernelCall,
    LaunchBackend,
    LaunchOutcome,
    Planning,
)
from collbench.launch.process import run_group
from collbench.plan import LAUNCH, Launch
from collbench.platforms.loader import platform_args
from collbench.platforms.model import Cluster, builtin_names, load_cluster, parse_cluster
from collbench.platforms.placement import MAPPINGS, check_placement, hostfile, nodes_used, place
from collbench.platforms.simgrid_xml import node_id, platform_xml
from collbench.spec import Spec

PLATFORM_TOML: Final = "platform.toml"
PLATFORM_XML: Final = "platform.xml"
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


def check_spec(spec: Spec, base: Catalog, source: str) -> None:
    """Reject what SMPI cannot simulate, naming the spec key and the valid choices."""
    if spec.run.selection == "mpit":
        raise UserError(f"{source}: run.selection: 'mpit' needs MPI_T, which SimGrid SMPI does "
                        "not have; valid: auto, launch")
    if spec.mca.fixed or spec.mca.sweep:
        raise UserError(f"{source}: mca: SimGrid SMPI has no MCA parameters; remove the [mca] "
                        "table (SimGrid options go in run.simgrid.cfg)")
    for i, mapping in enumerate(spec.measure.map_by):
        if mapping not in MAPPINGS:
            raise UserError(f"{source}: measure.map_by[{i}]: {mapping!r} is not simulated; "
                            f"valid: {', '.join(MAPPINGS)}")
    chosen = spec.measure.algorithms
    for coll in spec.measure.collectives:
        entries = chosen.get(coll, []) if isinstance(chosen, dict) else chosen
        prefix = f"measure.algorithms.{coll}" if isinstance(chosen, dict) else \
            "measure.algorithms"
        for i, entry in enumerate(entries):
            where = f"{source}: {prefix}[{i}]"
            if entry.segsize or entry.fanout:
                raise UserError(f"{where}.{'segsize' if entry.segsize else 'fanout'}: SMPI's "
                                "algorithms choose their own segment sizes and fanouts; "
                                "remove it (see docs/simgrid.md)")
            check_algorithm(base, coll, entry.name, where)


def platform_ref(spec: Spec, source: str, given: str | None) -> str | Path:
    """The --platform given, else run.simgrid.platform (relative: from the spec's folder)."""
    ref = given or spec.run.simgrid.platform
    if ref is None:
        raise UserError(f"{source}: run.simgrid.platform: no platform given; add it or "
                        f"--platform NAME; valid: {', '.join(builtin_names())} or a path to "
                        "a cluster TOML")
    if ref not in builtin_names() and not Path(ref).is_absolute():
        beside = Path(source).parent / ref
        if beside.is_file():
            return beside
    return str(ref)


class SimgridBackend(LaunchBackend):
    name = "simgrid"

    def __init__(self, setup: BackendSetup) -> None:
        super().__init__(setup)
        self.tools = find_smpi()
        # What SMPI cannot simulate is said before anything else (even a missing platform).
        self.base = load_catalog(self.mpi)
        check_spec(self.spec, self.base, setup.source)
        store = setup.store
        self.platform_path = Path()
        if setup.resume:  # the platform the campaign was simulated on
            self.cluster, self.platform_text = self._stored_cluster()
            if setup.platform:
                _, given, _ = load_cluster(platform_ref(setup.spec, setup.source,
                                                        setup.platform))
                if given != self.platform_text:
                    raise UserError(f"--platform {setup.platform}: differs from the platform "
                                    f"stored in {store.root} ({PLATFORM_TOML}); resume with "
                                    "the same platform")
        else:
            self.cluster, self.platform_text, self.platform_path = load_cluster(
                platform_ref(setup.spec, setup.source, setup.platform))
        shared = self.spec.run.simgrid.shared_malloc
        if shared is True and self.spec.measure.check_results:
            raise UserError("run.simgrid.shared_malloc: true cannot go with measure.validate = "
                            "true (ranks sharing buffers cannot check their data); use "
                            "\"auto\"")
        self.settings = SimSettings(
            self.tools, self.cluster, store.backend_file(PLATFORM_XML).resolve(),
            self.mpi.implementation, selector(self.mpi.implementation),
            tuple(self.spec.run.simgrid.cfg),
            shared_malloc=bool(shared) and not self.spec.measure.check_results)

    def _stored_cluster(self) -> tuple[Cluster, str]:
        store = self.setup.store
        path = store.backend_file(PLATFORM_TOML)
        if path.exists():
            text = path.read_text()
        else:  # killed between creating the folder and writing the platform
            text = str(store.provenance().get("simgrid", {}).get("platform_toml", ""))
            if not text:
                raise UserError(f"{store.root}: no {PLATFORM_TOML} and no platform in its "
                                "provenance; this folder cannot be resumed")
            store.write_backend_file(PLATFORM_TOML, text)
        return parse_cluster(text, str(path)), text

    # --- planning, building, describing ----------------------------------------------
    def planning(self, base: Catalog) -> Planning:
        source = self.setup.source
        for i, n in enumerate(self.spec.measure.nprocs):
            for mapping in self.spec.measure.map_by:
                check_placement(self.cluster, n, mapping, f"{source}: measure.nprocs[{i}]")
        return Planning(simgrid_catalog(base), self.cluster.cores)

    def build_kernel(self) -> KernelBinary:
        return build_smpi_kernel(self.tools)

    def identity(self) -> Identity:
        return Identity("smpi", self.tools.version, str(self.tools.smpicc))

    def campaign_meta(self) -> dict[str, Any]:
        return {"platform": self.cluster.name}

    def provenance(self, kernel: KernelBinary) -> dict[str, Any]:
        prov = super().provenance(kernel)
        prov.pop("mpi_info_dump", None)  # the library only lends its algorithm names here
        tools, settings, c = self.tools, self.settings, self.cluster
        prov["mpi"] = {"implementation": "smpi", "version": tools.version,
                       "mpicc": str(tools.smpicc), "mpirun": str(tools.smpirun),
                       "algorithm_names": f"{self.mpi.implementation} {self.mpi.version} "
                                          f"({self.base.source})",
                       "default": f"SMPI's {settings.selector} selector"}
        xml = platform_xml(c)
        prov["simgrid"] = {
            "version": tools.version, "platform": c.name,
            "platform_source": str(self.platform_path), "platform_summary": c.summary(),
            "platform_toml": self.platform_text,
            "platform_xml_sha256": hashlib.sha256(xml.encode()).hexdigest(),
            "cfg": [*settings.base_cfg(), *settings.cfg],
            "shared_malloc": settings.shared_malloc, "privatization": "dlopen",
        }
        prov["warnings"].append(
            f"simulated with SimGrid SMPI {tools.version} on platform {c.name} "
            f"({c.summary()}): numbers are model predictions, not measurements")
        return prov

    def created(self, store: Any) -> None:
        store.write_backend_file(PLATFORM_TOML, self.platform_text)

    def ready(self, store: Any) -> None:
        if not self.settings.platform_xml.exists():
            store.write_backend_file(PLATFORM_XML, platform_xml(self.cluster))

    def describe(self) -> str:
        return (f"simulating on {self.cluster.name}: {self.cluster.summary()} "
                f"(SimGrid {self.tools.version})")

    # --- launching --------------------------------------------------------------------
    def forced_cfg(self, launch: Launch) -> list[str]:
        """`smpi/<collective>:<algorithm>` for a launch that forces one algorithm."""
        if launch.selection != LAUNCH:
            return []
        point = launch.points[0]
        alg = smpi_algorithm(self.settings.implementation, point.collective, point.algorithm)
        if alg is None:  # make_plan only plans algorithms SMPI has; a stale plan might not
            raise UserError(f"launch {launch.launch_id}: {point.collective} algorithm "
                            f"{point.algorithm!r} has no SMPI counterpart")
        return [f"smpi/{point.collective}:{alg.smpi}"]

    @staticmethod
    def hostfile_path(call: KernelCall) -> Path:
        return call.jobfile.parent / "hostfile.txt"

    def command(self, launch: Launch, call: KernelCall) -> list[str]:
        s = self.settings
        cfg = [*s.base_cfg(), *self.forced_cfg(launch), *s.cfg]
        platform, env = platform_args(s.cluster, s.platform_xml, s.tools.version)
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return [*prefix, str(s.tools.smpirun), "-np", str(launch.nprocs), *platform,
                "-hostfile", str(self.hostfile_path(call)), *(f"--cfg={c}" for c in cfg),
                *LOG_OPTIONS, *call.argv(launch)]

    def environment(self, launch: Launch) -> list[tuple[str, str]]:
        return []  # SMPI forces algorithms with --cfg, never through the environment

    def run(self, launch: Launch, call: KernelCall,
            interrupted: Callable[[], bool]) -> LaunchOutcome:
        s = self.settings
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
        return nodes_used(self.cluster, launch.nprocs, launch.mapping)
