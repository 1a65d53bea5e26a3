"""`collbench plan SPEC` and `collbench run SPEC -o RESULTS [--resume] [--dry-run]`; instead
of SPEC, a campaign given as options (commands/oneliner.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from collbench.campaign import (
    Prepared,
    Request,
    build_binary,
    open_campaign,
    prepare,
)
from collbench.commands import oneliner, options
from collbench.errors import UserError
from collbench.plan import Launch, Plan, estimate
from collbench.progress import fmt_duration
from collbench.runner import Summary


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("plan", help="the launches and points a spec will run")
    s.add_argument("spec", type=Path, nargs="?", help="spec file (or the options below)")
    options.add_format(s, ("table", "json", "toml"))
    options.add_table_output(s)
    oneliner.add_options(s)
    options.add_backend(s)
    s.add_argument("--platform", help="simgrid: built-in platform or cluster TOML")
    options.add_mpi(s)
    s.set_defaults(func=cmd_plan)

    s = sub.add_parser("run", help="run a campaign into a results folder")
    s.add_argument("spec", type=Path, nargs="?",
                   help="spec file (or the options below; with --resume alone, the folder's)")
    options.add_output(s, "results folder (a campaign given as options without -o: a "
                          "throw-away folder, its path printed)")
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
    oneliner.add_options(s)
    oneliner.add_quicklook(s)
    s.set_defaults(func=cmd_run)


def _prepared(args: argparse.Namespace) -> Prepared:
    if oneliner.quick(args) and args.repetitions is None:
        # planned once to count the variants ("all" is known only then), then again with
        # enough launches for the comparison to test them
        args.repetitions = oneliner.repetitions_needed(_plan_once(args))
    return _plan_once(args)


def _plan_once(args: argparse.Namespace) -> Prepared:
    source = oneliner.source(args)
    out = getattr(args, "output", None) or Path("results") / source.spec.campaign.name
    with oneliner.options_named():
        return prepare(source, options.mpi(args), Request(out, backend=args.backend,
                                                          platform=args.platform))


def cmd_plan(args: argparse.Namespace) -> int:
    if args.format == "toml":  # the spec as a file would hold it: a start for your own
        source = _prepared(args).source if oneliner.quick(args) else oneliner.source(args)
        options.emit(args, source.text.rstrip("\n"))
        return 0
    prepared = _prepared(args)
    plan, mpi = prepared.plan, prepared.mpi
    if args.format == "json":
        options.emit(args, json.dumps(plan.to_json(), indent=1))
        return 0
    mpis = ", ".join(prepared.mpis) or f"{mpi.implementation} {mpi.version}"
    lines = [f"campaign {plan.campaign}: {len(plan.launches)} launches, "
             f"{plan.points_total()} points, seed {plan.seed}, {mpis}"]
    for la in plan.launches:
        colls = sorted({p.collective for p in la.points})
        algs = len({(p.collective, p.algorithm, p.segsize, p.fanout) for p in la.points})
        extra = " ".join(f"{k}={v}" for k, v in [*(
            [("mpi", la.mpi)] if la.mpi else []), *(
            [("ppn", la.ppn)] if la.ppn else []), *la.swept, *_nonblocking(la), *(
            la.program.params if la.program is not None else ())])
        lines.append(f"  {la.launch_id}  np={la.nprocs:<4d} map-by={la.mapping:<7s} "
                     f"bind-to={la.binding:<5s} rep={la.repetition} "
                     f"select={la.selection:<6s} {len(la.points):4d} points ({algs} "
                     f"algorithm variants: {', '.join(colls)}){' ' + extra if extra else ''}")
    lines.append(f"estimated time: {fmt_duration(plan.estimate_seconds())} (`run` corrects "
                 "it by the speed it measures as points complete)")
    lines.append(f"  = {estimate.describe(plan.launches, plan.simulated)}")
    lines += skipped(plan)
    options.emit(args, "\n".join(lines))
    return 0


def skipped(plan: Plan) -> list[str]:
    """What the plan leaves out and why (algorithms the layout rules out, placements tried
    at the machine's cores): `plan` and `run --dry-run` say the same."""
    return [f"skipped: {note}" for note in plan.notes]


def _nonblocking(la: Launch) -> list[tuple[str, str]]:
    """A launch's non-blocking settings: MPI_Test counts, compute, hideable-compute sweep."""
    nb = [p for p in la.points if p.test_calls is not None]
    if not nb:
        return []
    out = [("test_calls", ",".join(str(t) for t in sorted({p.test_calls for p in nb
                                                            if p.test_calls is not None}))),
           ("compute", ",".join(sorted({p.compute or "auto" for p in nb})))]
    hide = max(p.hide_steps for p in nb)
    return out + ([("hide_steps", str(hide))] if hide else [])


def cmd_run(args: argparse.Namespace) -> int:
    if args.dry_run:
        prepared = _prepared(args)
        kernel = build_binary(prepared.backend, prepared.source.spec)
        sys.stdout.write(prepared.backend.dry_run(prepared.plan, kernel.path,
                                                  options.debug(args)))
        # as comments after it: what a dry run prints stays a script (sbatch's #! first,
        # sh) when kept in a file; nothing is written, so the jobs files it names are not
        sys.stdout.write("".join(f"# {line}\n" for line in skipped(prepared.plan)))
        sys.stdout.write(f"# dry run: {len(prepared.plan.launches)} launch(es), nothing "
                         "written; a run writes each launch's jobs file where its command "
                         "says, then starts it\n")
        return 0
    quick = oneliner.quick(args)
    if args.output is None and not quick:
        raise UserError("collbench run: -o/--output is required with a spec file "
                        "(except with --dry-run)")
    if quick and args.repetitions is None:  # the same number again on --resume
        args.repetitions = oneliner.repetitions_needed(_plan_once(args))
        print("collbench: 1 repetition (launch): a simulation repeats to the last digit"
              if args.repetitions == 1 else
              f"collbench: {args.repetitions} repetitions (launches), the fewest that let "
              "the table test significance; --repetitions 1 for a first look",
              file=sys.stderr)
    if args.output is None:  # only once the options are known to be good
        args.output = oneliner.throwaway_folder()
    with oneliner.options_named():
        camp = open_campaign(oneliner.source(args), options.mpi(args),
                             Request(args.output, resume=args.resume,
                                     retry_failed=args.retry_failed, backend=args.backend,
                                     platform=args.platform))
    line = camp.backend.describe()
    if line:
        print(line, file=sys.stderr)
    summary = camp.run(debug=options.debug(args))
    status = report(summary, args.output)
    if quick and status != 130 and summary.points.get("ok"):
        oneliner.print_table(args)
    return status


def report(summary: Summary, output: Path) -> int:
    """The end-of-run lines, and the exit status: 130 interrupted, 1 something missing."""
    print(f"{output}: {summary.words()}")
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
