"""`collbench algorithms [COLLECTIVE]`: the algorithms of each collective for that MPI
(with --backend simgrid: what a simulation runs for each, a port of Open MPI's or SMPI's
own, and SMPI's nearest algorithm; with --components: Open MPI's coll components, their
priorities and their knobs for the collective)."""

from __future__ import annotations

import argparse

from collbench.catalog import components, mpich
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import MpiInstall
from collbench.catalog.ompi_decisions import ALGORITHMS
from collbench.catalog.ompi_info import listing
from collbench.catalog.simgrid import mapping_rows, simgrid_catalog
from collbench.commands import options
from collbench.errors import UserError, choice_error
from collbench.plan import han_levels
from collbench.tables import render


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("algorithms", help="algorithms of each collective for that MPI")
    s.add_argument("collective", nargs="?",
                   help="only this collective (default: every one)")
    options.add_format(s)
    s.add_argument("--backend", choices=("simgrid",),
                   help="simgrid: what a simulation runs for each algorithm (a port of Open "
                        "MPI's, or SMPI's own) and SMPI's nearest algorithm")
    s.add_argument("--ompi-version", metavar="SERIES",
                   help="with --backend simgrid: the Open MPI series simulated (as "
                        "run.simgrid.ompi_version; default 5.0)")
    s.add_argument("--components", action="store_true",
                   help="Open MPI's coll components with their priorities (who serves a "
                        "communicator) and, for COLLECTIVE, their knobs (coll_han_bcast_"
                        "low_module, ...): docs/components.md")
    options.add_mpi(s)
    options.add_table_output(s)
    s.set_defaults(func=cmd_algorithms)


def _collectives(name: str | None) -> list[str]:
    if name is None:
        return list(COLLECTIVES)
    if name not in COLLECTIVES:
        raise choice_error("collbench algorithms", "collective", name, list(COLLECTIVES))
    return [name]


def cmd_algorithms(args: argparse.Namespace) -> int:
    if args.components:
        return _components(args)
    catalog = load_catalog(options.mpi(args))
    colls = _collectives(args.collective)
    if args.ompi_version and not args.backend:
        raise UserError("--ompi-version: only with --backend simgrid")
    if args.backend:  # the one choice: SimGrid
        try:
            sim = simgrid_catalog(catalog, args.ompi_version)
        except UserError as e:
            raise UserError(f"--ompi-version: {e}") from None
        mapped = [r for r in mapping_rows(sim) if r["collective"] in colls]
        if sim.ompi_version:
            head = (f"# SimGrid: Open MPI {sim.ompi_version} names; runs = port: collbench's "
                    "port of the coll/tuned algorithm (proven message for message); smpi = "
                    "SMPI's nearest algorithm, selectable as smpi:<name> (--cfg=smpi/"
                    "<collective>:<name>); relation: how close it is (port: SMPI ported Open "
                    "MPI's code)")
        else:
            head = (f"# SimGrid: {sim.implementation} {sim.version} names run SMPI's "
                    "algorithms (runs); also selectable: smpi:<name>; '-' = not in SMPI")
        table = render(mapped, ["collective", "algorithm", "id", "runs", "smpi", "relation",
                                "note"], args.format)
        options.emit(args, f"{head}\n{table}" if args.format == "table" else table)
        return 0
    rows: list[dict[str, object]] = []
    for c in colls:
        for a in (catalog.default(c), *catalog.of(c)):
            rows.append({"collective": c, "id": a.id, "algorithm": a.name,
                         "switch": "mpit" if a.runtime_switchable else "launch",
                         "layout": _layout(catalog.implementation, a.name)})
    head = f"# {catalog.implementation} {catalog.version} — from {catalog.source}"
    table = render(rows, ["collective", "id", "algorithm", "switch", "layout"], args.format)
    # JSON and CSV stay machine-readable: the header line goes only with the text table
    options.emit(args, f"{head}\n{table}" if args.format == "table" else table)
    return 0


def _components(args: argparse.Namespace) -> int:
    if args.backend:
        raise UserError("--components: not with --backend simgrid (SimGrid runs collbench's "
                        "ports of coll/tuned's algorithms); valid: --components alone")
    mpi = options.mpi(args)
    if mpi.implementation != "openmpi" or mpi.info_tool is None:
        raise UserError(f"--components: coll components are Open MPI's; this MPI is "
                        f"{mpi.implementation}; valid: an Open MPI (--mpi PREFIX)")
    name = _collectives(args.collective)[0] if args.collective else None
    run = listing(mpi.info_tool)
    rows = components.knobs(run.text, name) + (_han_variants(mpi, name) if name else [])
    if not rows:
        raise UserError(f"--components: {mpi.info_tool} listed no coll component "
                        f"({run.error or 'no mca:coll lines'}); valid: a working ompi_info")
    head = (f"# {mpi.implementation} {mpi.version}: coll components (the highest priority "
            "serves; docs/components.md)")
    table = render(rows, ["component", "knob", "value", "help"], args.format)
    options.emit(args, f"{head}\n{table}" if args.format == "table" else table)
    return 0


def _han_variants(mpi: MpiInstall, collective: str) -> list[dict[str, str]]:
    """coll/han's settings of `collective` as [measure] algorithms names them (variants of
    component han), each with the MCA settings its launches get."""
    han = load_catalog(mpi).han.get(collective, ())
    names = [a.name for a in han]
    if "intra" in names and collective in components.HAN_LEVELS:
        names += [f"intra+low={components.HAN_LOW[1]}", f"intra+up={components.HAN_UP[1]}"]
    rows = []
    for n in names:
        setting = components.parse_han_setting(n, collective, tuple(a.name for a in han))
        assert not isinstance(setting, str)
        rows.append({"component": "han", "knob": f"variant {n}@han",
                     "value": " ".join(f"{k}={v}" for k, v in setting.mca(collective, 0).items()),
                     "help": f'algorithms = ["{n}"] with components = ["han"]'
                             + ("; segsize: coll_han_" + collective + "_segsize"
                                if n == "intra" and collective in components.HAN_SEGMENTED
                                else "")})
    return rows + _per_level_example(collective, names)


def _per_level_example(collective: str, names: list[str]) -> list[dict[str, str]]:
    """One han setting with a coll/tuned algorithm forced per level (the grammar's
    example; the first of TUNED_LEVELS that han here has, simple preferred)."""
    heads = sorted((h for c, h in components.TUNED_LEVELS if c == collective and h in names),
                   key=lambda h: h != "simple")
    if not heads:
        return []
    levels = components.TUNED_LEVELS[(collective, heads[0])]
    picks = {lv: ALGORITHMS[coll][min(k, len(ALGORITHMS[coll]) - 1)]  # two differ
             for k, (lv, coll) in enumerate(sorted(levels.items()), start=1)}
    name = heads[0] + "".join(f"+{lv}=tuned:{alg}" for lv, alg in sorted(picks.items()))
    return [{"component": "han", "knob": f"variant {name}@han",
             "value": " ".join(f"{k}=..." for k in han_levels.MCA_KEYS),
             "help": f'algorithms = ["{name}"] with components = ["han"], ppn below nprocs: '
                     "any coll/tuned algorithm per level (a rules file keyed by the levels' "
                     "sizes; each level's algorithm is checked at run time)"}]


def _layout(implementation: str, name: str) -> str | None:
    """Where an algorithm can run at all (`plan` skips it elsewhere, with this reason)."""
    if implementation == "mpich" and name in mpich.NEEDS_NODES:
        return mpich.LAYOUT_NOTE
    if implementation == "openmpi" and name == "two_proc":
        return "np = 2 only (Open MPI's two_proc)"
    return None
