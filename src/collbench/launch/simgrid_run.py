"""`collbench run` with backend "simgrid": plan checks, platform files, provenance, run.

Everything a simulation cannot do is rejected before anything runs: MPI_T switching, MCA
parameters, segment sizes and fanouts (SMPI's ports choose their own), algorithms SMPI
does not implement, placements other than core/socket/node, more ranks than the platform
has cores. The results folder gets the cluster description (platform.toml) and the
SimGrid file generated from it (platform.xml); rows say backend "simgrid", mpi "smpi".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from collbench.catalog.algorithms import Catalog
from collbench.catalog.simgrid import check_algorithm, selector, simgrid_catalog
from collbench.errors import UserError
from collbench.launch.base import KernelCall
from collbench.launch.simgrid import (
    SimgridBackend,
    SimSettings,
    SmpiTools,
    build_smpi_kernel,
    find_smpi,
)
from collbench.platforms.model import Cluster, builtin_names, load_cluster, parse_cluster
from collbench.platforms.placement import MAPPINGS, check_placement
from collbench.platforms.simgrid_xml import platform_xml
from collbench.spec import Spec, load_spec
from collbench.store import Store, atomic_write

PLATFORM_TOML = "platform.toml"
PLATFORM_XML = "platform.xml"


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


def platform_ref(args: argparse.Namespace, spec: Spec) -> str | Path:
    """--platform, else run.simgrid.platform (a relative path: from the spec's folder)."""
    ref = getattr(args, "platform", None) or spec.run.simgrid.platform
    if ref is None:
        raise UserError(f"{args.spec}: run.simgrid.platform: no platform given; add it or "
                        f"--platform NAME; valid: {', '.join(builtin_names())} or a path to "
                        "a cluster TOML")
    if ref not in builtin_names() and not Path(ref).is_absolute():
        beside = Path(args.spec).parent / ref
        if beside.is_file():
            return beside
    return str(ref)


def check_placements(spec: Spec, cluster: Cluster, source: str) -> None:
    for i, n in enumerate(spec.measure.nprocs):
        for mapping in spec.measure.map_by:
            check_placement(cluster, n, mapping, f"{source}: measure.nprocs[{i}]")


def for_simgrid(spec: Spec, base: Catalog, args: argparse.Namespace) -> tuple[Catalog, int]:
    """(catalog, cores) a simgrid plan is made with: SMPI's subset, the platform's cores."""
    source = str(args.spec)
    check_spec(spec, base, source)
    cluster, _, _ = load_cluster(platform_ref(args, spec))
    check_placements(spec, cluster, source)
    return simgrid_catalog(base), cluster.cores


def _settings(tools: SmpiTools, cluster: Cluster, xml: Path, spec: Spec,
              implementation: str) -> SimSettings:
    shared = spec.run.simgrid.shared_malloc
    if shared is True and spec.measure.check_results:
        raise UserError("run.simgrid.shared_malloc: true cannot go with measure.validate = "
                        "true (ranks sharing buffers cannot check their data); use \"auto\"")
    return SimSettings(tools, cluster, xml, implementation, selector(implementation),
                       tuple(spec.run.simgrid.cfg),
                       shared_malloc=bool(shared) and not spec.measure.check_results)


def _provenance(mpi: Any, kernel: Any, tools: SmpiTools, settings: SimSettings,
                platform_text: str, platform_path: Path, xml_text: str,
                catalog_source: str) -> dict[str, Any]:
    from collbench import provenance

    prov = provenance.collect(mpi, {"path": str(kernel.path), "fingerprint": kernel.fingerprint,
                                    "compile_command": kernel.compile_command})
    prov.pop("mpi_info_dump", None)  # the library only lends its algorithm names here
    prov["mpi"] = {"implementation": "smpi", "version": tools.version,
                   "mpicc": str(tools.smpicc), "mpirun": str(tools.smpirun),
                   "algorithm_names": f"{mpi.implementation} {mpi.version} ({catalog_source})",
                   "default": f"SMPI's {settings.selector} selector"}
    c = settings.cluster
    prov["simgrid"] = {
        "version": tools.version, "platform": c.name, "platform_source": str(platform_path),
        "platform_summary": c.summary(), "platform_toml": platform_text,
        "platform_xml_sha256": hashlib.sha256(xml_text.encode()).hexdigest(),
        "cfg": [*settings.base_cfg(), *settings.cfg],
        "shared_malloc": settings.shared_malloc, "privatization": "dlopen",
    }
    prov["warnings"].append(
        f"simulated with SimGrid SMPI {tools.version} on platform {c.name} ({c.summary()}): "
        "numbers are model predictions, not measurements")
    return prov


def _stored_cluster(store: Store) -> tuple[Cluster, str]:
    path = store.root / PLATFORM_TOML
    if path.exists():
        text = path.read_text()
    else:  # killed between creating the folder and writing the platform: provenance has it
        prov = json.loads((store.root / "provenance.json").read_text())
        text = prov["simgrid"]["platform_toml"]
        atomic_write(path, text.encode())
    return parse_cluster(text, str(path)), text


def _resume(args: argparse.Namespace, spec: Spec, store: Store, tools: SmpiTools) -> Cluster:
    from collbench.spec import parse_spec

    if not args.resume:
        raise UserError(f"{args.output}: already holds campaign {store.campaign().get('name')!r}"
                        "; add --resume to continue it, or choose another -o folder")
    stored = parse_spec(store.spec_text(), str(store.root / "spec.toml"))
    if stored.model_dump(mode="json") != spec.model_dump(mode="json"):
        raise UserError(f"{args.spec}: differs from the spec stored in {args.output}; resume "
                        "needs the same spec (use another -o folder for a new one)")
    cluster, text = _stored_cluster(store)
    if getattr(args, "platform", None):
        _, given, _ = load_cluster(platform_ref(args, spec))
        if given != text:
            raise UserError(f"--platform {args.platform}: differs from the platform stored in "
                            f"{args.output} ({PLATFORM_TOML}); resume with the same platform")
    prov = json.loads((store.root / "provenance.json").read_text())
    was = prov.get("simgrid", {}).get("version")
    if was != tools.version:
        raise UserError(f"{args.output}: simulated with SimGrid {was}, this is {tools.version}; "
                        "resuming would mix two simulators' numbers (use another -o folder)")
    return cluster


def _dry_run(args: argparse.Namespace, spec: Spec, plan: Any, mpi: Any,
             tools: SmpiTools) -> int:
    cluster, _, _ = load_cluster(platform_ref(args, spec))
    root = (args.output or Path("results") / plan.campaign).resolve()
    kernel = build_smpi_kernel(tools).path
    backend = SimgridBackend(mpi)
    backend.configure(_settings(tools, cluster, root / PLATFORM_XML, spec, mpi.implementation))
    for la in plan.launches:
        work = root / "work" / la.launch_id
        call = KernelCall(kernel, work / "jobs.txt", work / "kernel.jsonl")
        print(f"# {la.launch_id}: {len(la.points)} points")
        print(shlex.join(backend.command(la, call)))
    return 0


def cmd_run_simgrid(args: argparse.Namespace) -> int:
    from collbench.cli import _load, _mpi
    from collbench.plan import Plan
    from collbench.runner import RowContext, run_campaign

    spec = load_spec(args.spec)
    tools = find_smpi()
    if args.dry_run:
        _, mpi, plan = _load(args)
        return _dry_run(args, spec, plan, mpi, tools)
    if args.output is None:
        raise UserError("collbench run: -o/--output is required (except with --dry-run)")
    store = Store(args.output)
    text: str | None = None  # set for a new campaign: the description to store
    platform_path = Path()
    if store.exists():
        cluster = _resume(args, spec, store, tools)
        mpi = _mpi(args)
        plan = Plan.from_json(store.plan())
        if args.retry_failed:
            store.forget(lid for lid, st in store.finished().items() if st != "ok")
    else:
        _, mpi, plan = _load(args)
        cluster, text, platform_path = load_cluster(platform_ref(args, spec))
    settings = _settings(tools, cluster, (store.root / PLATFORM_XML).resolve(), spec,
                         mpi.implementation)
    print(f"building the kernel with {tools.smpicc} ...", file=sys.stderr)
    kernel = build_smpi_kernel(tools)
    xml = platform_xml(cluster)
    if text is not None:
        from collbench.catalog.algorithms import load_catalog

        plan = replace(plan, backend="simgrid")
        prov = _provenance(mpi, kernel, tools, settings, text, platform_path, xml,
                           load_catalog(mpi).source)
        store.create({"name": plan.campaign, "seed": plan.seed, "backend": "simgrid",
                      "spec_source": str(args.spec), "platform": cluster.name},
                     args.spec.read_text(), plan.to_json(), prov)
        atomic_write(store.root / PLATFORM_TOML, text.encode())
    if not settings.platform_xml.exists():
        atomic_write(settings.platform_xml, xml.encode())
    backend = SimgridBackend(mpi)
    backend.configure(settings)
    print(f"simulating on {cluster.name}: {cluster.summary()} (SimGrid {tools.version})",
          file=sys.stderr)
    ctx = RowContext(plan.campaign, "simgrid", "smpi", tools.version)
    summary = run_campaign(store, plan, backend, kernel.path, ctx, spec=spec)
    print(f"{args.output}: {summary.launches} launches ({summary.skipped} already stored); "
          f"this run: {summary.by_status or 'nothing to do'}; points: {summary.points}")
    if summary.interrupted:
        return 130
    bad = {k: v for k, v in summary.points.items() if k != "ok"}
    if bad:
        print(f"warning: not every point simulated: {bad}; see `collbench show {args.output}`"
              " (SMPI's message is in each failed row)", file=sys.stderr)
        return 1
    return 0
