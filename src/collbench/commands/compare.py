"""The `collbench compare` subcommand (the main parser registers it with add_parser)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from collbench.analyse import stability
from collbench.analyse.compare import Comparison, compare
from collbench.analyse.render import FORMATS, render
from collbench.commands import options
from collbench.errors import UserError
from collbench.points import COLUMN_STATS
from collbench.points import STATS as COMPARE_STATS
from collbench.store import Store


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "compare", help="each algorithm against a baseline: ratios, CIs, significance, best",
        description="Compare every algorithm with a baseline per size: the median over "
                    "repetitions of one statistic, ratios with confidence intervals, exact "
                    "Mann-Whitney tests (Holm-corrected per size), the best algorithm per "
                    "size, the size ranges each wins, and stability warnings.")
    s.add_argument("results", type=Path, help="results folder")
    s.add_argument("--baseline", default="default", metavar="[COLUMN=]VALUE",
                   help="the variant to compare against: an algorithm label (default: "
                        "%(default)s), or COLUMN=VALUE to compare the values of another "
                        "column within otherwise identical contexts: mpi=openmpi-5.0.11, "
                        "mapping=socket, component=tuned (against han), collective=bcast "
                        "(against ibcast), an MCA setting btl=self,vader (or mca.btl=...), "
                        "env.NAME=VALUE, a workload parameter dims=2,1,1 (program.dims), a "
                        "non-blocking setting test_calls=0; a wrong one lists the valid "
                        "ones; docs/statistics.md")
    s.add_argument("--collective", help="only this collective")
    s.add_argument("--nprocs", type=options.count(1, options.MAX_NPROCS),
                   help="only this process count")
    s.add_argument("--stat", default="avg", metavar="NAME",
                   help="figure compared, pooled as its median over repetitions: "
                        f"{', '.join(COMPARE_STATS)} or any <NAME>_us figure the rows' "
                        "metrics hold: avg_us (OSU's), median_us (median over iterations), "
                        "min_us/max_us (fastest/slowest rank), completion_us; for "
                        "non-blocking collectives overall (OSU's Overall), pure (Pure Comm.) "
                        "and overlap_pct (higher is better; differences in percentage "
                        "points); docs/statistics.md (default: %(default)s)")
    s.add_argument("--confidence", type=options.fraction, default=0.95,
                   help="confidence level of intervals and tests (default: %(default)s)")
    s.add_argument("--format", choices=FORMATS, default="table",
                   help="output format (default: %(default)s)")
    s.add_argument("--all", dest="all_warnings", action="store_true",
                   help="every stability warning (default: the worst few and how many more)")
    s.add_argument("--summary", action="store_true",
                   help="only the recommended variant per size range of each block, "
                        "smoothed as tune smooths (--max-regret), with its effect")
    s.add_argument("--max-regret", type=float, default=0.05, metavar="FRACTION",
                   help="with --summary: accept up to this much slower than the per-size "
                        "recommendation to switch less often, as `tune` (0: no smoothing; "
                        "default: %(default)s)")
    s.add_argument("--against", type=Path, metavar="B",
                   help="another results folder (measured, ingested, simulated, predicted) "
                        "or a .p2p.toml model: error of B against RESULTS per point and "
                        "algorithm, same best algorithm per size, selection penalty, "
                        "crossovers (docs/models.md)")
    s.add_argument("--explain", action="store_true",
                   help="with --against FILE.p2p.toml: per algorithm and size regime, the "
                        "messages and bytes per level on the critical path and the term that "
                        "dominates, predicted from the schedules (docs/models.md)")
    s.add_argument("--network", choices=("mpi", "smpi", "serial"), default="mpi",
                   help="with --against FILE.p2p.toml: how messages share time, as `model "
                        "predict --network` (default: %(default)s)")
    s.add_argument("-o", "--output", type=Path, metavar="FILE|DIR",
                   help="write the output to FILE (complete or absent) instead of printing "
                        "it; with --against, a folder DIR for the overlay and residual "
                        "figures (PNG) and the tables")
    s.set_defaults(func=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    if args.against is not None:
        return _against(args)
    if not 0 <= args.max_regret < 1:  # also refuses nan
        raise UserError(f"compare: --max-regret {args.max_regret:g} is not valid; valid: a "
                        "fraction from 0 (no smoothing) to below 1, such as 0.05")
    result = compare(Store(args.results), baseline=args.baseline, stat=args.stat,
                     collective=args.collective, nprocs=args.nprocs,
                     confidence=args.confidence)
    if args.summary:
        from collbench.analyse.summary import render_summary, summarise

        text = render_summary(summarise(result, args.max_regret), args.format,
                              args.all_warnings)
    else:
        text = render(result, args.format, args.all_warnings)
    if args.output is None:
        sys.stdout.write(text)
    else:  # as every command that prints a table writes it with -o FILE
        options.emit(argparse.Namespace(table_output=args.output), text)
    _stderr_notes(result, args.format, args.all_warnings)
    return 0


def _stderr_notes(result: Comparison, fmt: str, all_warnings: bool = False) -> None:
    if fmt == "csv":  # keep the CSV parseable: notices and warnings go to stderr
        if result.notice:
            print(f"collbench: {result.notice}", file=sys.stderr)
        shown, more = ((list(result.warnings), None) if all_warnings
                       else stability.brief(result.warnings))
        for w in shown:
            print(f"collbench: warning: {stability.line(w)}", file=sys.stderr)
        if more:
            print(f"collbench: {more}", file=sys.stderr)


def _explain(args: argparse.Namespace, a: Store, a_points: Any) -> None:
    from collbench.models.p2pfile import read_p2p
    from collbench.report import explain

    if not args.against.is_file():
        raise UserError(f"--explain: {args.against} is a folder; valid: --against "
                        "FILE.p2p.toml (the schedules are costed with a p2p model)")
    model = read_p2p(args.against, required_levels=())
    whys, notes = explain.explain_store(a, model, a_points, args.stat, args.collective)
    sys.stdout.write("\n" + explain.render(whys, notes, args.format == "markdown"))


def _against(args: argparse.Namespace) -> int:
    from collbench.analyse.against import against, predicted_points, read_points, render

    if args.stat not in COLUMN_STATS:
        raise UserError(f"--stat {args.stat}: not valid with --against; valid: "
                        f"{', '.join(COLUMN_STATS)}")
    a = Store(args.results)
    a_points = read_points(a, args.stat, args.collective, args.nprocs)
    notes: list[str] = []
    if args.against.is_file():
        from collbench.models.p2pfile import read_p2p

        model = read_p2p(args.against, required_levels=())
        from collbench.models.networks import network

        b_points, notes = predicted_points(a, model, args.stat, args.collective, args.nprocs,
                                           network(args.network), where=str(args.against))
    else:
        b_points = read_points(Store(args.against), args.stat, args.collective, args.nprocs)
    result = against(a_points, b_points, str(args.results), str(args.against), args.stat,
                     notes)
    sys.stdout.write(render(result, args.format))
    if args.explain:
        _explain(args, a, a_points)
    if args.output is not None:
        from collbench.report.models import write_against

        written = write_against(result, args.output)
        pngs = sum(1 for p in written if p.suffix == ".png")
        print(f"wrote {args.output}: {pngs} figures (overlay and residuals per context), "
              "points.csv, against.md, against.json",
              file=sys.stderr if args.format in ("csv", "json") else sys.stdout)
    return 0
