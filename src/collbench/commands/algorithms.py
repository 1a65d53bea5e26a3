"""`collbench algorithms [COLLECTIVE]`: the algorithms of each collective for that MPI
(with --backend simgrid: what SMPI runs for each, and what it lacks)."""

from __future__ import annotations

import argparse

from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.load import load_catalog
from collbench.catalog.simgrid import mapping_rows
from collbench.commands import options
from collbench.errors import choice_error
from collbench.tables import render


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("algorithms", help="algorithms of each collective for that MPI")
    s.add_argument("collective", nargs="?")
    options.add_format(s)
    s.add_argument("--backend", choices=("simgrid",),
                   help="simgrid: what SMPI runs for each algorithm, and what it lacks")
    options.add_mpi(s)
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
    if args.backend:  # the one choice: SimGrid
        mapped = [r for r in mapping_rows(catalog) if r["collective"] in colls]
        print(f"# {catalog.implementation} {catalog.version} names -> SimGrid SMPI algorithms "
              "(--cfg=smpi/<collective>:<smpi>); '-' = not in SMPI, rejected before a run")
        print(render(mapped, ["collective", "algorithm", "smpi", "relation", "note"],
                     args.format))
        return 0
    rows: list[dict[str, object]] = []
    for c in colls:
        for a in (catalog.default(c), *catalog.of(c)):
            rows.append({"collective": c, "id": a.id, "algorithm": a.name,
                         "switch": "mpit" if a.runtime_switchable else "launch"})
    print(f"# {catalog.implementation} {catalog.version} — from {catalog.source}")
    print(render(rows, ["collective", "id", "algorithm", "switch"], args.format))
    return 0
