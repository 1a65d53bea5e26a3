"""`collbench algorithms [COLLECTIVE]`: the algorithms of each collective for that MPI
(with --backend simgrid: what a simulation runs for each, a port of Open MPI's or SMPI's
own, and SMPI's nearest algorithm)."""

from __future__ import annotations

import argparse

from collbench.catalog import mpich
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.load import load_catalog
from collbench.catalog.simgrid import mapping_rows, simgrid_catalog
from collbench.commands import options
from collbench.errors import UserError, choice_error
from collbench.tables import render


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("algorithms", help="algorithms of each collective for that MPI")
    s.add_argument("collective", nargs="?")
    options.add_format(s)
    s.add_argument("--backend", choices=("simgrid",),
                   help="simgrid: what a simulation runs for each algorithm (a port of Open "
                        "MPI's, or SMPI's own) and SMPI's nearest algorithm")
    s.add_argument("--ompi-version", metavar="SERIES",
                   help="with --backend simgrid: the Open MPI series simulated (as "
                        "run.simgrid.ompi_version; default 5.0)")
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


def _layout(implementation: str, name: str) -> str | None:
    """Where an algorithm can run at all (`plan` skips it elsewhere, with this reason)."""
    if implementation == "mpich" and name in mpich.NEEDS_NODES:
        return mpich.LAYOUT_NOTE
    if implementation == "openmpi" and name == "two_proc":
        return "np = 2 only (Open MPI's two_proc)"
    return None
