"""The Intel MPI branches of `tune --impi`, `rules check --impi`, `rules verify --impi` and
`tune validate --impi` (the options are declared with the other ones in commands/rules.py
and commands/tune.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from collbench.commands import options
from collbench.errors import UserError


def cmd_build(args: argparse.Namespace, selection: Any) -> int:
    """`tune RESULTS --impi -o FILE`: where the default won, the preset that runs what the
    default runs there, found by tracing the campaign's Intel MPI (tune/impi_standin.py)."""
    from collbench.analyse.compare import compare
    from collbench.catalog.algorithms import DEFAULT
    from collbench.commands.tune_output import summary as _summary
    from collbench.commands.tune_output import write_file as _write
    from collbench.store import Store
    from collbench.tune import impi, impi_standin, writer

    counts = sorted({n for _, n in selection.tables})
    if counts and not args.extrapolate:
        raise UserError(f"tune --impi: measured at np {', '.join(map(str, counts))} on one "
                        f"node; an Intel MPI tuning file applies its np={counts[-1]} rules "
                        "to every larger communicator and every ppn, several nodes too (it "
                        "cannot hand a size back to Intel MPI's own tuning: its 0 is the "
                        "generic choice); valid: --extrapolate to write it so, or measure the "
                        "process counts and nodes the jobs use")
    store = Store(args.results, only_mpi=args.measured_mpi)
    points = [p for p in compare(store, baseline=DEFAULT, stat=args.stat,
                                 confidence=args.confidence).points
              if (args.map_by is None or p.mapping == args.map_by)
              and (args.bind_to is None or p.binding == args.bind_to)]
    measured = impi_standin.medians(points)
    resolved: tuple[str, ...] = ()
    wanted = impi_standin.default_sizes(selection, measured)
    if wanted:
        mpi = traced_mpi(args, selection.mpi_version)
        print(f"collbench: the default won at {sum(map(len, wanted.values()))} measured "
              f"size(s); tracing Intel MPI {mpi.version} there to write the preset that "
              "runs what the default runs", file=sys.stderr)
        traced = impi_standin.trace(mpi, wanted, measured)
        selection, resolved = impi_standin.resolve(selection, measured, traced)
    written = impi.build(selection, source=str(args.results))
    _write(args.output, written.text)
    _summary(selection, (*written.notes, *resolved))
    if any(impi_standin.SUBSTITUTE in n for n in resolved):
        print("collbench: warning: where no preset runs what the default runs, the file runs "
              "the fastest measured preset, slower than the default there (notes above); "
              "`tune validate --impi` measures the whole file, --collective leaves a "
              "collective to Intel MPI", file=sys.stderr)
    if counts:
        print(f"note: {writer.reach_note(selection, True, mpi='Intel MPI')} and to every "
              "ppn (an Intel MPI file cannot hand a size back to its own tuning)")
    print(f"wrote {args.output} (Intel MPI JSON tuning file: {len(written.tuned)} "
          "collectives tuned, the rest from Intel MPI's own tuning)")
    print("activate it with:")
    for k, v in impi.activation(args.output):
        print(f"  export {k}={v}")
    return 0


def traced_mpi(args: argparse.Namespace, version: str) -> Any:
    """The Intel MPI the campaign measured: --mpi, or impi==VERSION from the results."""
    from collbench.catalog.mpi_install import resolve_mpi

    if args.mpi is None and not args.mpi_from_path:
        return resolve_mpi(f"impi=={version}", "tune --impi (the default won somewhere: "
                           "its functions are traced)")
    mpi = options.mpi(args)
    if (mpi.implementation, mpi.version) != ("impi", version):
        raise UserError(f"--mpi: {mpi.implementation} {mpi.version}, but the results are of "
                        f"Intel MPI {version}, whose default is traced where it won; valid: "
                        f"--mpi impi=={version} or its prefix")
    return mpi


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


def cmd_verify(args: argparse.Namespace) -> int:
    """`rules verify --impi FILE -n N --mpi impi==V`: exit 1 on any mismatch."""
    import sys

    from collbench.catalog.load import load_catalog
    from collbench.tune.impi_check import check, render
    from collbench.tune.impi_verify import verify
    from collbench.tune.verify import render as render_verify

    if args.han is not None or args.method == "timing" or args.mca or placement_given(args):
        raise UserError("rules verify --impi: --han, --mca, --method timing and host "
                        "placement are Open MPI's; valid: one node, the trace method")
    mpi = options.mpi(args)
    catalog = load_catalog(mpi)
    reading = check(args.rules, catalog if catalog.implementation == "impi" else None)
    if not reading.ok or not reading.entries:
        sys.stdout.write(render(args.rules, reading, f"Intel MPI {mpi.version}") + "\n")
        return 1
    result = verify(reading, args.rules, args.nprocs, mpi, timeout=args.timeout,
                    keep=args.keep)
    sys.stdout.write(render_verify(result))
    return 1 if result.mismatches else 0


def cmd_validate(args: argparse.Namespace) -> int:
    """The command's --impi branch (commands/tune.py): exit 1 on a regression."""
    import sys

    from collbench.sizes import expand_sizes
    from collbench.tune import impi_check
    from collbench.tune.impi_validate import validate
    from collbench.tune.validate import render

    reading = impi_check.check(args.rules, None)
    if not reading.ok:
        raise UserError(f"{args.rules}: Intel MPI would not read it as written; run "
                        f"`collbench rules check --impi {args.rules}`")
    if not reading.entries:  # tune writes {} where Intel MPI's own choice won everywhere
        raise UserError(f"{args.rules}: the file tunes no collective (Intel MPI would run "
                        "its own choices with or without it): nothing to validate; valid: a "
                        "file with at least one rule")
    if args.han is not None or placement_given(args):
        raise UserError("tune validate --impi: --han and host placement are Open MPI's; "
                        "valid: one node, without them")
    try:
        sizes = sorted(set(expand_sizes([x.strip() for x in args.sizes.split(",")
                                         if x.strip()])))
    except (ValueError, UserError) as e:
        raise UserError(f"--sizes {args.sizes!r}: {e}") from None
    out = args.output or args.rules.with_name(args.rules.name + ".validate")
    mpi = options.mpi(args)
    dump, costs = None, None
    if args.autotuner:
        dump, costs = _autotuner(args, reading, out, sizes)
    elif args.tuned_from is not None:
        raise UserError("--tuned-from: the file's cost beside the autotuner's; valid: with "
                        "--autotuner")
    result = validate(reading, args.rules, out, args.nprocs, sizes, mpi,
                      repetitions=args.repetitions, seed=args.seed,
                      collectives=args.collective, iterations=args.iterations,
                      timeout=args.timeout, autotuner=dump)
    sys.stdout.write(render(result))
    if costs is not None:
        from collbench.store import Store
        from collbench.tune import impi_autotuner
        from collbench.tune.validate import analyse

        theirs = analyse(Store(out), None, result.confidence, lambda r: True,
                         arm=impi_autotuner.AUTOTUNER)
        sys.stdout.write("\n" + impi_autotuner.render(result, theirs, *costs))
    return 1 if result.regressions else 0


def _autotuner(args: argparse.Namespace, reading: Any, out: Path, sizes: list[int]
               ) -> tuple[Path, tuple[Any, Any]]:
    """Intel's autotuner over the validated points (its own folder beside OUT): the dump,
    and (the file's cost, the autotuner's run)."""
    from collbench.tune import impi_autotuner
    from collbench.tune.impi_validate import collectives_of

    if len(args.nprocs) != 1:
        raise UserError(f"-n {','.join(map(str, args.nprocs))}: Intel's autotuner dumps one "
                        "file a launch; valid: one process count with --autotuner")
    file_cost = impi_autotuner.campaign_cost(args.tuned_from)
    folder = out.with_name(out.name + ".autotuner")
    tuned = impi_autotuner.run_autotuner(
        folder, args.nprocs[0], sizes, collectives_of(reading, args.rules, args.collective),
        options.mpi(args), args.autotuner_iterations, args.timeout)
    return tuned.dump, (file_cost, tuned)


def placement_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) for k in ("hostfile", "ssh_config", "ppn"))
