"""SimGrid SMPI backend: the kernel, built with smpicc, runs on a simulated cluster.

What runs (catalog.simgrid): Open MPI's algorithm names run collbench's ports of Open MPI's
coll/tuned algorithms, linked into the SMPI kernel (COLLBENCH_PORTS_TABLE), with Open MPI's
forced semantics (segment size 0 = unsegmented, default fanouts); "default" runs what the
fixed decision rules of the simulated series (`run.simgrid.ompi_version`, 5.0 unless said)
pick, from a table collbench writes per launch, and the row records what that was
(metrics resolved_algorithm). `smpi:<name>` runs SMPI's own algorithm instead, forced with
`--cfg=smpi/<collective>:<name>`; MPICH names always run SMPI's counterparts.

Everything a simulation cannot do is rejected before anything runs: MPI_T switching, MCA
parameters, algorithms with neither a port nor an SMPI counterpart, a segment size or
fanout on SMPI's own algorithms, placements other than core/socket/node, more ranks than
the platform has cores. The results folder gets the cluster description (platform.toml)
and the SimGrid file generated from it (platform.xml); rows say backend "simgrid", mpi
"smpi".

One `smpirun` per launch: `-platform` (the XML collbench generated from the cluster
description), `-hostfile` (where --map-by puts each rank), and `--cfg` options:
- smpi/coll-selector:ompi (or mpich): what SMPI's own collectives do when not forced (in
  launches that run SMPI's algorithms; a launch running the ports leaves SMPI's defaults,
  which then only serve SMPI itself, e.g. MPI_Comm_dup);
- smpi/<collective>:<algorithm> for a launch forcing one of SMPI's algorithms (SMPI has no
  MPI_T: one launch per algorithm; the ports are also forced one launch per algorithm);
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

from collbench.catalog import ompi_decisions
from collbench.catalog.algorithms import DEFAULT, Catalog
from collbench.catalog.load import load_catalog
from collbench.catalog.simgrid import (
    HAN_PORTS,
    SMPI_PREFIX,
    SimgridCatalog,
    default_decisions,
    han_lines,
    has_port,
    is_smpi,
    selector,
    simgrid_catalog,
    smpi_algorithm,
)
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary, build_kernel, port_sources
from collbench.launch.base import (
    BackendSetup,
    Call,
    Identity,
    LaunchBackend,
    LaunchOutcome,
    Planning,
)
from collbench.launch.process import run_group
from collbench.launch.simgrid_output import bound_times, nonblank_lines, smpi_messages
from collbench.plan import LAUNCH, Launch
from collbench.platforms.loader import platform_args
from collbench.platforms.model import Cluster, builtin_names, load_cluster, parse_cluster
from collbench.platforms.placement import MAPPINGS, check_placement, hostfile, nodes_used, place
from collbench.platforms.simgrid_xml import node_id, platform_xml
from collbench.spec import Spec

PLATFORM_TOML: Final = "platform.toml"
PLATFORM_XML: Final = "platform.xml"
PORTS_TABLE: Final = "ports.txt"  # a launch's ports table, beside its job file
PORTS_ENV: Final = "COLLBENCH_PORTS_TABLE"  # where the kernel finds it (collbench_kernel.c)
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
    """The kernel compiled with smpicc, with collbench's ports of Open MPI's algorithms
    linked in (COLLBENCH_PORTS: the kernel's ports table); cached apart from MPI builds
    (smpicc's fingerprint).

    The compat header's hash rides along as a define, so a changed header gives a new
    binary even though build_kernel only hashes the kernel source, the ports and the flags.
    """
    header = compat_header()
    digest = hashlib.sha256(header.read_bytes()).hexdigest()[:12]
    sources = port_sources()
    return build_kernel(tools.smpicc, cache_dir,
                        ["-include", str(header), f"-DCOLLBENCH_SMPI_COMPAT={digest}",
                         "-DCOLLBENCH_PORTS", "-I", str(sources[0].parent)],
                        extra_sources=sources)


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
    ompi_version: str | None = None  # the Open MPI series the ports simulate (None: MPICH)

    def base_cfg(self) -> list[str]:
        cfg = [f"smpi/coll-selector:{self.selector}", "smpi/simulate-computation:no",
               "smpi/wtime:0"]
        if self.shared_malloc:
            cfg.append(f"smpi/auto-shared-malloc-thresh:{SHARED_MALLOC_THRESH}")
        return cfg

    # --- workload programs (docs/workloads.md) ------------------------------------------
    def program_cfg(self, nprocs: int, compute: bool = True) -> list[str]:
        """A workload's program computes as well as communicates: its CPU bursts are timed
        and simulated at the platform's host speed (1 Gflop/s in simgrid_xml, so a burst
        takes its native time; workload.simulate_compute = false: no, deterministic runs),
        and its buffers are its own (no shared malloc: programs check their results). At
        one process SMPI 3.32's ompi selector aborts in MPI_Reduce (reduce__ompi_pipeline:
        "Actor pid=-1 is gone"); there every collective is a copy, so SMPI's default
        selector runs them."""
        chosen = self.selector if nprocs > 1 else "default"
        timed = ["smpi/simulate-computation:yes", "smpi/host-speed:1Gf"] if compute else \
            ["smpi/simulate-computation:no"]
        return [f"smpi/coll-selector:{chosen}", *timed, "smpi/wtime:0"]


def check_spec(spec: Spec, catalog: SimgridCatalog, source: str) -> None:
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
            if entry.is_all():
                continue
            alg = catalog.resolve(coll, entry.name, where)
            if (entry.segsize or entry.fanout) and is_smpi(alg.name):
                raise UserError(f"{where}.{'segsize' if entry.segsize else 'fanout'}: "
                                f"{alg.name} is SMPI's own algorithm, which chooses its own "
                                "segment size and fanout; they apply to the ports (Open "
                                "MPI's names, see docs/simgrid.md)")


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
        if self.spec.measure.mpi:  # it simulates: the algorithms' series is its own setting
            raise UserError(f"{setup.source}: measure.mpi: the simgrid backend simulates MPI "
                            "and runs no installed one; remove measure.mpi (choose the Open "
                            "MPI series with run.simgrid.ompi_version)")
        self.tools = find_smpi()
        # What SMPI cannot simulate is said before anything else (even a missing platform).
        self.base = load_catalog(self.mpi)
        try:
            self.catalog = simgrid_catalog(self.base, self.spec.run.simgrid.ompi_version)
        except UserError as e:
            raise UserError(f"{setup.source}: {e}") from None
        check_spec(self.spec, self.catalog, setup.source)
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
            shared_malloc=bool(shared) and not self.spec.measure.check_results,
            ompi_version=self.catalog.ompi_version)

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
        return Planning(self.catalog, self.cluster.cores)

    def build_kernel(self) -> KernelBinary:
        return build_smpi_kernel(self.tools)

    def compiler(self) -> Path:  # a workload's program is built with smpicc
        return self.tools.smpicc

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
                       "algorithm_names": f"{self.catalog.implementation} "
                                          f"{self.catalog.version} ({self.catalog.source})",
                       "default": self._default_description()}
        xml = platform_xml(c)
        prov["simgrid"] = {
            "version": tools.version, "platform": c.name,
            "platform_source": str(self.platform_path), "platform_summary": c.summary(),
            "platform_toml": self.platform_text,
            "platform_xml_sha256": hashlib.sha256(xml.encode()).hexdigest(),
            "cfg": [*settings.base_cfg(), *settings.cfg],
            "shared_malloc": settings.shared_malloc, "privatization": "dlopen",
            "ompi_version": settings.ompi_version,
            "collectives": self._collectives_description(),
        }
        prov["warnings"].append(
            f"simulated with SimGrid SMPI {tools.version} on platform {c.name} "
            f"({c.summary()}): numbers are model predictions, not measurements")
        return prov

    def _default_description(self) -> str:
        v = self.settings.ompi_version
        if v is None:
            return f"SMPI's {self.settings.selector} selector"
        han = (f" (5.0 on several nodes: {', '.join(HAN_PORTS)}, and the barrier between "
               "iterations, by coll/han's port)") if ompi_decisions.series(v) == "5.0" else ""
        return (f"Open MPI {v}'s fixed decision rules (coll/tuned; gatherv, scatterv: "
                f"coll/basic linear){han}, run by collbench's ports")

    def _collectives_description(self) -> str:
        v = self.settings.ompi_version
        if v is None:
            return (f"SMPI's own algorithms under {self.catalog.implementation}'s names "
                    "(no ports of them exist)")
        return (f"collbench's ports of Open MPI {v}'s coll/tuned algorithms (forced: "
                "unsegmented unless segsize, default fanouts; default: the fixed decision "
                f"rules); {SMPI_PREFIX}<name>: SMPI's own; non-blocking collectives: SMPI's")

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
        """`smpi/<collective>:<algorithm>` for a launch that forces one of SMPI's algorithms
        (`smpi:<name>`, or under MPICH names its counterpart); nothing for the ports."""
        if launch.selection != LAUNCH:
            return []
        point = launch.points[0]
        if is_smpi(point.algorithm):
            return [f"smpi/{point.collective}:{point.algorithm[len(SMPI_PREFIX):]}"]
        if self.catalog.runs_port(point.algorithm):
            return []
        alg = smpi_algorithm(self.settings.implementation, point.collective, point.algorithm)
        if alg is None:  # make_plan only plans algorithms SMPI has; a stale plan might not
            raise UserError(f"launch {launch.launch_id}: {point.collective} algorithm "
                            f"{point.algorithm!r} has no SMPI counterpart")
        return [f"smpi/{point.collective}:{alg.smpi}"]

    def ports_table(self, launch: Launch) -> str | None:
        """The kernel's ports table for this launch (None: it runs SMPI's collectives):
        what "default" runs for each of its default points, by the fixed decision rules of
        the simulated Open MPI at this process count, the barrier between iterations, and
        under 5.0 on several nodes the collectives coll/han's port runs (han_lines)."""
        version = self.settings.ompi_version
        if launch.program is not None or version is None or not all(
                self.catalog.runs_port(p.algorithm) for p in launch.points):
            return None  # (a workload's program has no ports table)
        n = launch.nprocs
        lines = [f"# Open MPI {version} fixed decision rules at {n} processes "
                 "(collbench.catalog.ompi_decisions): collective size_bytes algorithm_id "
                 "fanout name"]
        wanted = [("barrier", 0)] + [(p.collective, p.size_bytes) for p in launch.points
                                     if p.algorithm == DEFAULT and has_port(p.collective)]
        for coll, size in dict.fromkeys(wanted):
            alg, fanout, name = default_decisions(version, coll, n, size)
            lines.append(f"{coll} {size} {alg} {fanout} {name}")
        # coll/han on several nodes (5.0): rank r is on node (r // divisor) % modulus
        cluster = self.settings.cluster
        divisor = 1 if launch.mapping == "node" else cluster.cores_per_node
        lines += han_lines(version, [c for c, _ in wanted],
                           nodes_used(cluster, n, launch.mapping), divisor, cluster.nodes)
        return "\n".join(lines) + "\n"

    @staticmethod
    def ports_path(call: Call) -> Path:
        return call.work / PORTS_TABLE

    @staticmethod
    def hostfile_path(call: Call) -> Path:
        return call.work / "hostfile.txt"

    def command(self, launch: Launch, call: Call) -> list[str]:
        s = self.settings
        workload = self.spec.workload
        base = s.base_cfg() if launch.program is None or workload is None else \
            s.program_cfg(launch.nprocs, workload.simulate_compute)
        platform, env = platform_args(s.cluster, s.platform_xml, s.tools.version)
        if self.ports_table(launch) is not None:  # the kernel runs the ports
            env = {**env, PORTS_ENV: str(self.ports_path(call))}
            # SMPI's own collectives then only serve SMPI itself (MPI_Comm_dup) and the
            # non-blocking ones, which no selector drives: left to SMPI's defaults, as its
            # ompi selector makes MPI_Comm_dup take minutes at a thousand ranks.
            base = [c for c in base if not c.startswith("smpi/coll-selector:")]
        # SMPI charges simulated time for every MPI_Test (100 µs by default): a launch that
        # interleaves MPI_Test calls in its compute phase would measure SMPI's penalty.
        tests = ["smpi/test:0"] if any((p.test_calls or 0) > 0 for p in launch.points) else []
        cfg = [*base, *self.forced_cfg(launch), *tests, *s.cfg]
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        return [*prefix, str(s.tools.smpirun), "-np", str(launch.nprocs), *platform,
                "-hostfile", str(self.hostfile_path(call)), *(f"--cfg={c}" for c in cfg),
                *LOG_OPTIONS, *call.argv(launch)]

    def environment(self, launch: Launch) -> list[tuple[str, str]]:
        return []  # SMPI forces algorithms with --cfg, never through the environment

    def run(self, launch: Launch, call: Call,
            interrupted: Callable[[], bool]) -> LaunchOutcome:
        s = self.settings
        argv = self.command(launch, call)
        path = self.hostfile_path(call)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hostfile(s.cluster, launch.nprocs, launch.mapping))
        table = self.ports_table(launch)
        if table is not None:
            self.ports_path(call).write_text(table)
        # a TMPDIR of its own, removed even when collbench dies: SMPI copies the program
        # there once per rank (dlopen privatization) and a kill before it unlinks a copy
        # would leave it in the user's
        done = run_group(argv, dict(os.environ), launch.timeout_s, call.work, interrupted,
                         private_tmp=True)
        status = ("interrupted" if done.interrupted else "timeout" if done.timed_out
                  else "ok" if done.returncode == 0 else "failed")
        if status == "ok" and nonblank_lines(call.outfile) < len(launch.points):
            status = "failed"  # SMPI exits 0 after reporting a deadlock
        if launch.program is None:
            bound_times(call.outfile)
        used = sorted({node for node, _ in place(s.cluster, launch.nprocs, launch.mapping)})
        tail = smpi_messages(call.work / "stderr.txt") or done.stderr_tail
        return LaunchOutcome(status, argv, done.returncode, done.wall_s, tail,  # type: ignore[arg-type]
                             [f"{s.cluster.name}:{node_id(n)}" for n in used])

    def nodes(self, launch: Launch) -> int:
        return nodes_used(self.cluster, launch.nprocs, launch.mapping)
