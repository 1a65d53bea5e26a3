"""Command line: parse, call, print. Errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from collbench import __version__
from collbench.errors import UserError

FORMATS = ("table", "csv", "json")


def _mpi_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("MPI under study (default: the Open MPI wheel beside collbench)")
    g.add_argument("--mpi", type=Path, metavar="PREFIX", help="MPI installation prefix")
    g.add_argument("--mpi-from-path", action="store_true", help="use the mpicc on PATH")


def _mpi(args: argparse.Namespace) -> Any:
    from collbench.catalog.mpi import find_mpi

    return find_mpi(args.mpi, args.mpi_from_path)


def cmd_mpi(args: argparse.Namespace) -> int:
    mpi = _mpi(args)
    if args.format == "json":
        print(json.dumps(mpi.as_dict(), indent=1))
    else:
        for k, v in mpi.as_dict().items():
            print(f"{k:15s} {v}")
    return 0


def cmd_algorithms(args: argparse.Namespace) -> int:
    from collbench.catalog.algorithms import load_catalog
    from collbench.catalog.collectives import COLLECTIVES
    from collbench.errors import choice_error
    from collbench.tables import render

    if args.backend == "simgrid":
        from collbench.platforms.cli import cmd_algorithms_simgrid

        return cmd_algorithms_simgrid(args, load_catalog(_mpi(args)))
    catalog = load_catalog(_mpi(args))
    colls = list(COLLECTIVES)
    if args.collective:
        if args.collective not in COLLECTIVES:
            raise choice_error("collbench algorithms", "collective", args.collective, colls)
        colls = [args.collective]
    rows = []
    for c in colls:
        d = catalog.default(c)
        rows.append({"collective": c, "id": d.id, "algorithm": d.name,
                     "switch": "mpit" if d.runtime_switchable else "launch"})
        rows += [{"collective": c, "id": a.id, "algorithm": a.name,
                  "switch": "mpit" if a.runtime_switchable else "launch"}
                 for a in catalog.of(c)]
    print(f"# {catalog.implementation} {catalog.version} — from {catalog.source}")
    print(render(rows, ["collective", "id", "algorithm", "switch"], args.format))
    return 0


def _load(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from collbench.catalog.algorithms import load_catalog
    from collbench.launch.allocation import plan_cores
    from collbench.plan import make_plan
    from collbench.spec import load_spec

    spec = load_spec(args.spec)
    mpi = _mpi(args)
    catalog = load_catalog(mpi)
    cores = plan_cores(spec, getattr(args, "backend", None))
    if (getattr(args, "backend", None) or spec.run.backend) == "simgrid":
        from collbench.launch.simgrid_run import for_simgrid

        catalog, cores = for_simgrid(spec, catalog, args)
    return spec, mpi, make_plan(spec, catalog, source=str(args.spec), cores=cores)


def cmd_plan(args: argparse.Namespace) -> int:
    from collbench.progress import fmt_duration

    _, mpi, plan = _load(args)
    if args.format == "json":
        print(json.dumps(plan.to_json(), indent=1))
        return 0
    print(f"campaign {plan.campaign}: {len(plan.launches)} launches, {plan.points_total()} "
          f"points, seed {plan.seed}, {mpi.implementation} {mpi.version}")
    for la in plan.launches:
        colls = sorted({p.collective for p in la.points})
        algs = len({(p.collective, p.algorithm, p.segsize, p.fanout) for p in la.points})
        extra = " ".join(f"{k}={v}" for k, v in la.swept)
        print(f"  {la.launch_id}  np={la.nprocs:<4d} map-by={la.mapping:<7s} "
              f"bind-to={la.binding:<5s} rep={la.repetition} select={la.selection:<6s} "
              f"{len(la.points):4d} points ({algs} algorithm variants: {', '.join(colls)})"
              f"{' ' + extra if extra else ''}")
    print(f"estimated time: {fmt_duration(plan.estimate_seconds())} (rough model: launch "
          "start-up plus iterations × modelled latency)")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from collbench import provenance
    from collbench.kernel.build import build_kernel
    from collbench.launch.base import get_backend
    from collbench.plan import Plan
    from collbench.runner import RowContext, run_campaign
    from collbench.spec import load_spec
    from collbench.store import Store

    if (args.backend or load_spec(args.spec).run.backend) == "simgrid":
        from collbench.launch.simgrid_run import cmd_run_simgrid

        return cmd_run_simgrid(args)
    if args.dry_run:
        from collbench.dryrun import cmd_dry_run

        return cmd_dry_run(args)
    if args.output is None:
        raise UserError("collbench run: -o/--output is required (except with --dry-run)")
    store = Store(args.output)
    spec = load_spec(args.spec)
    mpi = _mpi(args)
    if store.exists():
        if not args.resume:
            raise UserError(f"{args.output}: already holds campaign "
                            f"{store.campaign().get('name')!r}; add --resume to continue it, "
                            "or choose another -o folder")
        from collbench.spec import parse_spec

        stored = parse_spec(store.spec_text(), str(args.output / "spec.toml"))
        if stored.model_dump(mode="json") != spec.model_dump(mode="json"):
            raise UserError(f"{args.spec}: differs from the spec stored in {args.output}; "
                            "resume needs the same spec (use another -o folder for a new one)")
        _same_mpi(store, mpi, args.output)
        plan = Plan.from_json(store.plan())
        if args.retry_failed:
            store.forget(lid for lid, st in store.finished().items() if st != "ok")
    else:
        _, mpi, plan = _load(args)
    backend_name = args.backend or plan.backend
    backend = get_backend(backend_name, mpi)
    print(f"building the kernel with {mpi.mpicc} ...", file=sys.stderr)
    kernel = build_kernel(mpi.mpicc)
    if not store.exists():
        from dataclasses import replace

        plan = replace(plan, backend=backend_name)  # --resume goes on with the same backend
        prov = provenance.collect(mpi, {"path": str(kernel.path),
                                        "fingerprint": kernel.fingerprint,
                                        "compile_command": kernel.compile_command})
        store.create({"name": plan.campaign, "seed": plan.seed, "backend": backend_name,
                      "spec_source": str(args.spec)},
                     args.spec.read_text(), plan.to_json(), prov)
    ctx = RowContext(plan.campaign, backend_name, mpi.implementation, mpi.version)
    debug = tuple(args.kernel_debug.split()) if args.kernel_debug else ()
    summary = run_campaign(store, plan, backend, kernel.path, ctx, debug=debug)
    print(f"{args.output}: {summary.launches} launches ({summary.skipped} already stored); "
          f"this run: {summary.by_status or 'nothing to do'}; points: {summary.points}")
    if summary.interrupted:
        return 130
    if summary.lost:
        print(f"warning: {sum(summary.lost.values())} launches lost to the scheduler "
              f"({summary.lost}); rerun with --resume to submit them again", file=sys.stderr)
        return 1
    bad = {k: v for k, v in summary.points.items() if k != "ok"}
    if bad:
        print(f"warning: not every point measured: {bad}; see `collbench show {args.output}` "
              "and rerun with --resume --retry-failed", file=sys.stderr)
        return 1
    return 0


def _same_mpi(store: Any, mpi: Any, where: Path) -> None:
    """Resuming with another MPI would mix two MPIs' numbers in one campaign."""
    try:
        stored = json.loads((store.root / "provenance.json").read_text())["mpi"]
    except (OSError, ValueError, KeyError):
        return
    was = (stored.get("implementation"), stored.get("version"), stored.get("mpicc"))
    now = (mpi.implementation, mpi.version, str(mpi.mpicc))
    if was != now:
        raise UserError(f"{where}: was run with {was[0]} {was[1]} ({was[2]}), not {now[0]} "
                        f"{now[1]} ({now[2]}); resume with the same MPI (--mpi) or use "
                        "another -o folder")


def cmd_show(args: argparse.Namespace) -> int:
    from collbench.show import best, show
    from collbench.store import Store

    store = Store(args.results)
    if args.best:
        print(best(store, args.format, args.collective))
    else:
        print(show(store, args.format, args.collective, args.algorithm, args.nprocs))
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    import duckdb

    from collbench.store import Store
    from collbench.tables import render

    con = Store(args.results).connect()
    try:
        cur = con.execute(args.sql)
    except duckdb.Error as e:
        raise UserError(f"query: {str(e).splitlines()[0]}") from None
    names = [d[0] for d in cur.description] if cur.description else []
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    print(render(rows, names, args.format))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from collbench.store import Store, _sql_path

    suffix = args.out.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise UserError(f"{args.out}: extension {suffix!r} is not valid; valid: .csv, .parquet")
    con = Store(args.results).connect()
    kind = "parquet" if suffix == ".parquet" else "csv, HEADER"
    con.execute(f"COPY (SELECT * FROM {args.table}) TO '{_sql_path(args.out)}' (FORMAT {kind})")
    print(f"wrote {args.out}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from collbench.spec import spec_json_schema

    print(json.dumps(spec_json_schema(), indent=2))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="collbench", description=__doc__)
    p.add_argument("--version", action="version", version=f"collbench {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("mpi", help="which MPI is in use")
    _mpi_args(s)
    s.add_argument("--format", choices=("table", "json"), default="table")
    s.set_defaults(func=cmd_mpi)

    s = sub.add_parser("algorithms", help="algorithms of each collective for that MPI")
    s.add_argument("collective", nargs="?")
    s.add_argument("--format", choices=FORMATS, default="table")
    s.add_argument("--backend", choices=("simgrid",),
                   help="simgrid: what SMPI runs for each algorithm, and what it lacks")
    _mpi_args(s)
    s.set_defaults(func=cmd_algorithms)

    s = sub.add_parser("plan", help="the launches and points a spec will run")
    s.add_argument("spec", type=Path)
    s.add_argument("--format", choices=("table", "json"), default="table")
    _mpi_args(s)
    s.set_defaults(func=cmd_plan)

    s = sub.add_parser("run", help="run a campaign into a results folder")
    s.add_argument("spec", type=Path)
    s.add_argument("-o", "--output", type=Path, help="results folder (required unless --dry-run)")
    s.add_argument("--resume", action="store_true", help="skip launches already stored")
    s.add_argument("--dry-run", action="store_true",
                   help="print what would run (batch scripts, command lines); run nothing")
    s.add_argument("--retry-failed", action="store_true",
                   help="with --resume: run failed and timed-out launches again")
    s.add_argument("--backend", help="override the spec's run.backend")
    s.add_argument("--platform", help="simgrid: built-in platform or cluster TOML "
                                      "(overrides run.simgrid.platform)")
    s.add_argument("--kernel-debug", help=argparse.SUPPRESS)  # test switch, e.g. "--debug hang"
    _mpi_args(s)
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("show", help="avg/min/max per collective, algorithm and size")
    s.add_argument("results", type=Path)
    s.add_argument("--collective")
    s.add_argument("--algorithm")
    s.add_argument("--nprocs", type=int)
    s.add_argument("--best", action="store_true",
                   help="fastest algorithm per size and its ratio to the default")
    s.add_argument("--format", choices=FORMATS, default="table")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("query", help="SQL over the folder (tables: measurements, samples)")
    s.add_argument("results", type=Path)
    s.add_argument("sql")
    s.add_argument("--format", choices=FORMATS, default="table")
    s.set_defaults(func=cmd_query)

    s = sub.add_parser("export", help="write measurements (or samples) to CSV or Parquet")
    s.add_argument("results", type=Path)
    s.add_argument("-o", "--out", type=Path, required=True)
    s.add_argument("--table", choices=("measurements", "samples"), default="measurements")
    s.set_defaults(func=cmd_export)

    from collbench.analyse.cli import add_parser as add_compare
    from collbench.ingest.cli import add_parser as add_ingest
    from collbench.launch.slurm.cli import add_parser as add_slurm
    from collbench.platforms.cli import add_parser as add_platforms
    from collbench.report.cli import add_parser as add_report
    from collbench.study.cli import add_parser as add_study
    from collbench.tune.cli import add_parser as add_tune

    add_compare(sub)
    add_ingest(sub)
    add_report(sub)
    add_study(sub)
    add_tune(sub)
    add_slurm(sub)
    add_platforms(sub)

    s = sub.add_parser("schema", help="print the JSON schema of campaign specs")
    s.set_defaults(func=cmd_schema)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UserError as e:
        print(f"collbench: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("collbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
