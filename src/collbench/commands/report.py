"""The `collbench report` subcommand (the main parser registers it with add_parser)."""

from __future__ import annotations

import argparse
from pathlib import Path

from collbench.commands import options
from collbench.errors import UserError
from collbench.points import COLUMN_STATS as STATS
from collbench.points import STATS as COMPARE_STATS


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser(
        "report", help="figures, tables and one self-contained HTML page of a results folder",
        description="Write OUT/index.html (one page, figures embedded, no network needed), "
                    "OUT/figures/*.png|svg and OUT/tables/*.md|csv: latency per size, ratios "
                    "to a baseline with significance, spread over repetitions, scaling with "
                    "the process count, recommendations, stability warnings and provenance. "
                    "The statistics are those of `collbench compare` (docs/statistics.md).")
    s.add_argument("results", type=Path, help="results folder")
    s.add_argument("-o", "--output", type=Path, required=True,
                   help="report folder (created; an earlier report there is replaced)")
    s.add_argument("--baseline", default="default",
                   help="algorithm label to compare against (default: %(default)s)")
    s.add_argument("--stat", choices=tuple(COMPARE_STATS), default="avg",
                   help="figure compared, as in `collbench compare`: avg_us (OSU's, the "
                        "default), median_us, min_us, max_us, completion_us, or a "
                        "non-blocking figure (docs/statistics.md)")
    s.add_argument("-c", "--collective", help="only this collective")
    s.add_argument("--confidence", type=options.fraction, default=0.95,
                   help="confidence level of intervals and tests (default: %(default)s)")
    s.add_argument("--format", choices=("png", "svg", "both"), default="png",
                   help="figure files to write; the page embeds PNG when written, else SVG "
                        "(default: %(default)s)")
    s.add_argument("--model", type=Path, metavar="P2P",
                   help="add a models section: every point predicted from this .p2p.toml, "
                        "overlays, residuals, error tables, p2p parameters, regressions in P")
    s.add_argument("--against", type=Path, metavar="RESULTS",
                   help="add a models section comparing with another results folder (e.g. "
                        "`collbench model predict` output)")
    s.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    # Imported here: matplotlib takes a moment to load, other commands should not wait.
    from collbench.report.build import Options, build_report

    if (args.model or args.against) and args.stat not in STATS:
        raise UserError(f"report: --stat {args.stat} with --model/--against: the models "
                        f"section compares {', '.join(STATS)} only; valid: one of those")

    written = build_report(args.results, args.output, Options(
        baseline=args.baseline, stat=args.stat, collective=args.collective,
        confidence=args.confidence, fmt=args.format, model=args.model,
        against=args.against))
    print(f"wrote {written.index} ({len(written.figures)} figure files, "
          f"{len(written.tables)} table files)")
    return 0
