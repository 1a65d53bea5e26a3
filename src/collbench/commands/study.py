"""The `collbench study` subcommand (the main parser registers it with add_parser)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.commands import options
from collbench.errors import UserError

if TYPE_CHECKING:
    from collbench.catalog.mpi import MpiInstall
    from collbench.study.mca import McaParam
    from collbench.study.spec import Study


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser(
        "study", help="MCA parameter study: one parameter at a time, kept only if better",
        description="Run a study spec (a campaign spec with a [study] table; docs/study.md): "
                    "each parameter in turn is measured at its baseline and every candidate "
                    "setting, repetitions in random order, and a setting is kept for the next "
                    "parameters only if it is significantly better. With --report, summarise "
                    "a study folder: tables, boxplots, the kept settings and the mpirun line.")
    s.add_argument("source", type=Path, help="study spec (TOML), or with --report a study "
                                             "folder")
    options.add_output(s, "study folder to write (with a spec)")
    s.add_argument("--resume", action="store_true", help="continue the study stored in -o")
    s.add_argument("--check", action="store_true",
                   help="check the spec against the MPI and print the stages; run nothing")
    s.add_argument("--report", action="store_true",
                   help="report on a study folder (figures in FOLDER/report)")
    options.add_backend(s)
    options.add_mpi(s)
    options.add_verbosity(s)
    s.set_defaults(func=cmd_study)


def cmd_study(args: argparse.Namespace) -> int:
    options.apply_verbosity(args)
    if args.report and args.source.is_dir():
        return _report(args.source)
    if args.source.is_dir():
        raise UserError(f"{args.source}: is a folder; give a study spec to run, or add "
                        "--report to report on a study folder")
    from collbench.study.spec import load_study

    study = load_study(args.source)
    mpi = options.mpi(args)
    if mpi.implementation != "openmpi" or mpi.info_tool is None:
        raise UserError(f"{args.source}: a study sets Open MPI MCA parameters; the MPI found "
                        f"is {mpi.implementation} {mpi.version}; valid: openmpi (--mpi PREFIX)")
    from collbench.study.mca import query_params

    mca = query_params(mpi.info_tool)
    if args.check:
        return _check(study, mca, mpi, args.backend, args.output or Path("results") /
                      study.name)
    if args.output is None:
        raise UserError("collbench study: -o/--output is required to run a study")
    from collbench.progress import overall
    from collbench.study.run import read_decisions, run_study
    from collbench.study.spec import resolve

    params = resolve(study, mca, f"{mpi.implementation} {mpi.version}")
    left = len(params) - (len(read_decisions(args.output, params)) if args.resume else 0)
    with overall("study stages", left):  # one bar over the stages, each stage's under it
        result = run_study(study, args.output, mpi, mca, resume=args.resume,
                           backend_name=args.backend,
                           say=lambda msg: print(f"collbench study: {msg}", file=sys.stderr))
    if result.interrupted:
        print(f"{args.output}: interrupted; finished launches are stored; continue with "
              f"collbench study {args.source} -o {args.output} --resume", file=sys.stderr)
        return 130
    if args.report:
        _report(args.output)
    else:
        print(f"{args.output}: {len(result.decisions)} stages decided: "
              + ", ".join(f"{d.parameter}={d.kept}" for d in result.decisions)
              + f"; report: collbench study {args.output} --report")
    if result.failed_points:
        print(f"warning: {result.failed_points} points failed or timed out; their repetitions "
              f"were left out (see collbench show {args.output}/stages/*)", file=sys.stderr)
        return 1
    return 0


def _check(study: Study, mca: dict[str, McaParam], mpi: MpiInstall,
           backend: str | None, out: Path) -> int:
    from collbench.progress import fmt_duration
    from collbench.study.placement import check_placements
    from collbench.study.run import preflight
    from collbench.study.spec import resolve

    label = f"{mpi.implementation} {mpi.version}"
    params = resolve(study, mca, label)
    stages = preflight(study, params, mpi, study.spec.run.seed or 0, out, backend)
    check_placements(study, params, stages)
    plans = [stage.plan for stage in stages]
    print(f"study {study.name}: {len(params)} parameters, {study.spec.run.repetitions} "
          f"repetitions per setting; parameters, values and placements checked against "
          f"{label}")
    for i, (p, plan) in enumerate(zip(params, plans, strict=True)):
        default = f" (Open MPI default {p.mpi_default})" if p.kind == "mca" else ""
        print(f"  {i + 1}. {p.name}: baseline {p.baseline}{default} vs "
              f"{', '.join(p.candidates)}: {len(plan.launches)} launches")
    total = sum(plan.estimate_seconds() for plan in plans)
    print(f"{sum(len(p.launches) for p in plans)} launches, estimated "
          f"{fmt_duration(total)} (rough model)")
    return 0


def _report(folder: Path) -> int:
    from collbench.storefiles import atomic_write
    from collbench.study.report import build

    rep = build(folder)
    atomic_write(folder / "report" / "report.md", (rep.markdown + "\n").encode())
    print(rep.markdown)
    print(f"wrote {folder / 'report' / 'report.md'} and {len(rep.figures)} figures; final "
          f"command: {shlex.join(rep.command)}", file=sys.stderr)
    return 0
