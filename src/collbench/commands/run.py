"""`collbench plan SPEC` and `collbench run SPEC -o RESULTS [--resume] [--dry-run]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collbench.campaign import (
    Prepared,
    Request,
    SpecSource,
    build_binary,
    open_campaign,
    prepare,
)
from collbench.commands import options
from collbench.errors import UserError
from collbench.progress import fmt_duration
from collbench.runner import Summary


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("plan", help="the launches and points a spec will run")
    s.add_argument("spec", type=Path)
    options.add_format(s, ("table", "json"))
    options.add_backend(s)
    s.add_argument("--platform", help="simgrid: built-in platform or cluster TOML")
    options.add_mpi(s)
    s.set_defaults(func=cmd_plan)

    s = sub.add_parser("run", help="run a campaign into a results folder")
    s.add_argument("spec", type=Path)
    options.add_output(s, "results folder (required unless --dry-run)")
    s.add_argument("--resume", action="store_true", help="skip launches already stored")
    s.add_argument("--dry-run", action="store_true",
                   help="print what would run (batch scripts, command lines); run nothing")
    s.add_argument("--retry-failed", action="store_true",
                   help="with --resume: run failed and timed-out launches again")
    options.add_backend(s)
    s.add_argument("--platform", help="simgrid: built-in platform or cluster TOML "
                                      "(overrides run.simgrid.platform)")
    options.add_kernel_debug(s)
    options.add_mpi(s)
    s.set_defaults(func=cmd_run)


def _prepared(args: argparse.Namespace) -> Prepared:
    source = SpecSource.from_file(args.spec)
    out = getattr(args, "output", None) or Path("results") / source.spec.campaign.name
    return prepare(source, options.mpi(args), Request(out, backend=args.backend,
                                                      platform=args.platform))


def cmd_plan(args: argparse.Namespace) -> int:
    prepared = _prepared(args)
    plan, mpi = prepared.plan, prepared.mpi
    if args.format == "json":
        print(json.dumps(plan.to_json(), indent=1))
        return 0
    print(f"campaign {plan.campaign}: {len(plan.launches)} launches, {plan.points_total()} "
          f"points, seed {plan.seed}, {mpi.implementation} {mpi.version}")
    for la in plan.launches:
        colls = sorted({p.collective for p in la.points})
        algs = len({(p.collective, p.algorithm, p.segsize, p.fanout) for p in la.points})
        extra = " ".join(f"{k}={v}" for k, v in [*la.swept, *(
            la.program.params if la.program is not None else ())])
        print(f"  {la.launch_id}  np={la.nprocs:<4d} map-by={la.mapping:<7s} "
              f"bind-to={la.binding:<5s} rep={la.repetition} select={la.selection:<6s} "
              f"{len(la.points):4d} points ({algs} algorithm variants: {', '.join(colls)})"
              f"{' ' + extra if extra else ''}")
    print(f"estimated time: {fmt_duration(plan.estimate_seconds())} (rough model: launch "
          "start-up plus iterations × modelled latency)")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    if args.dry_run:
        prepared = _prepared(args)
        kernel = build_binary(prepared.backend, prepared.source.spec)
        sys.stdout.write(prepared.backend.dry_run(prepared.plan, kernel.path,
                                                  options.debug(args)))
        return 0
    if args.output is None:
        raise UserError("collbench run: -o/--output is required (except with --dry-run)")
    camp = open_campaign(SpecSource.from_file(args.spec), options.mpi(args),
                         Request(args.output, resume=args.resume,
                                 retry_failed=args.retry_failed, backend=args.backend,
                                 platform=args.platform))
    line = camp.backend.describe()
    if line:
        print(line, file=sys.stderr)
    summary = camp.run(debug=options.debug(args))
    return report(summary, args.output)


def report(summary: Summary, output: Path) -> int:
    """The end-of-run lines, and the exit status: 130 interrupted, 1 something missing."""
    print(f"{output}: {summary.launches} launches ({summary.skipped} already stored); "
          f"this run: {summary.by_status or 'nothing to do'}; points: {summary.points}")
    if summary.interrupted:
        return 130
    if summary.lost:
        print(f"warning: {sum(summary.lost.values())} launches lost to the scheduler "
              f"({summary.lost}); rerun with --resume to submit them again", file=sys.stderr)
        return 1
    bad = {k: v for k, v in summary.points.items() if k != "ok"}
    if bad:
        print(f"warning: not every point measured: {bad}; see `collbench show {output}` "
              "(each failed row holds its error) and rerun with --resume --retry-failed",
              file=sys.stderr)
        return 1
    return 0
