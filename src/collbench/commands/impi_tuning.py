"""The Intel MPI branches of `rules check --impi` and `tune validate --impi` (the options are
declared with the other ones in commands/rules.py and commands/tune.py)."""

from __future__ import annotations

import argparse

from collbench.commands import options
from collbench.errors import UserError


def cmd_check(args: argparse.Namespace) -> int:
    """`rules check --impi FILE [--mpi impi==V]`: exit 1 when Intel MPI would misread it."""
    from collbench.catalog.algorithms import Catalog
    from collbench.catalog.load import load_catalog
    from collbench.tune.impi_check import check, render

    catalog: Catalog | None
    try:
        catalog = load_catalog(options.mpi(args))
    except UserError:
        catalog = None
    if catalog is not None and catalog.implementation != "impi":
        catalog = None
    mpi = (f"Intel MPI {catalog.version}" if catalog is not None
           else "no Intel MPI (--mpi impi==VERSION checks the preset ids)")
    r = check(args.rules, catalog)
    options.emit(args, render(args.rules, r, mpi))
    return 0 if r.ok else 1


def cmd_validate(args: argparse.Namespace) -> int:
    """The command's --impi branch (commands/tune.py): exit 1 on a regression."""
    import sys

    from collbench.sizes import expand_sizes
    from collbench.tune import impi_check
    from collbench.tune.impi_validate import validate
    from collbench.tune.validate import render

    reading = impi_check.check(args.rules, None)
    if not reading.ok or not reading.entries:
        raise UserError(f"{args.rules}: Intel MPI would not read it as written; run "
                        f"`collbench rules check --impi {args.rules}`")
    if args.han is not None or placement_given(args):
        raise UserError("tune validate --impi: --han and host placement are Open MPI's; "
                        "valid: one node, without them")
    try:
        sizes = sorted(set(expand_sizes([x.strip() for x in args.sizes.split(",")
                                         if x.strip()])))
    except (ValueError, UserError) as e:
        raise UserError(f"--sizes {args.sizes!r}: {e}") from None
    out = args.output or args.rules.with_name(args.rules.name + ".validate")
    result = validate(reading, args.rules, out, args.nprocs, sizes, options.mpi(args),
                      repetitions=args.repetitions, seed=args.seed,
                      collectives=args.collective, iterations=args.iterations,
                      timeout=args.timeout)
    sys.stdout.write(render(result))
    return 1 if result.regressions else 0


def placement_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) for k in ("hostfile", "ssh_config", "ppn"))
