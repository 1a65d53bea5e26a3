"""`collbench ingest`: OSU / IMB text output into a results folder."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from collbench.commands import options
from collbench.errors import UserError
from collbench.ingest import FORMATS, IngestOptions, ingest_files

EXAMPLES = """\
examples:
  collbench ingest osu_bcast.out --collective bcast --algorithm pipeline --nprocs 48 \\
      --nodes 2 -o results/orfeo
  collbench ingest IMB-MPI1.out -o results/imb --nprocs 4
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "ingest", help="import OSU Micro-Benchmarks / Intel MPI Benchmarks text output",
        description="Store OSU (5.x-7.x) or IMB (IMB-MPI1, IMB-NBC) text output as tidy rows "
        "in a results folder; each file becomes one launch. What the file does not say "
        "comes from the options. See docs/ingest.md.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    p.add_argument("-o", "--output", type=Path, required=True,
                   help="results folder (created if new; may already hold results)")
    p.add_argument("--format", default="auto", help=f"one of {', '.join(FORMATS)}")
    p.add_argument("--collective", help="OSU: when the title does not say; IMB: keep only "
                   "this benchmark")
    p.add_argument("--algorithm", help="algorithm name as stored (default: 'default', or the "
                   "name of the id forced with --mca coll_tuned_<coll>_algorithm)")
    p.add_argument("--nprocs", help="processes in the job (required for OSU)")
    p.add_argument("--nodes", default="1", help="default 1")
    p.add_argument("--ppn", help="processes per node (default nprocs / nodes)")
    p.add_argument("--mapping", help="--map-by value of the run")
    p.add_argument("--binding", help="--bind-to value of the run")
    p.add_argument("--mca", action="append", default=[], metavar="KEY=VALUE",
                   help="MCA setting of the run (repeatable)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="OSU: an option the file's '### cmd:' line does not record: "
                        "test_calls (-t), iterations (-i), warmup (-x); repeatable")
    p.add_argument("--mpi", default="unknown", help="MPI name, free text")
    p.add_argument("--mpi-version", default="unknown", help="MPI version, free text")
    p.add_argument("--repetition", default="0", help="repetition number (default 0)")
    p.add_argument("--campaign", help="campaign name (default: the -o folder's name)")
    p.set_defaults(func=cmd_ingest)


def _int(flag: str, value: str | None, high: int = options.MAX_NPROCS) -> int | None:
    if value is None:
        return None
    try:
        return options.count(0, high)(value)
    except argparse.ArgumentTypeError as e:
        raise UserError(f"{flag}: {e}") from None


def _mca(items: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise UserError(f"--mca: {item!r} is not valid; expected KEY=VALUE, e.g. "
                            "coll_tuned_bcast_algorithm=6")
        pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def _params(items: list[str]) -> tuple[tuple[str, int], ...]:
    pairs = []
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"\s*\d{1,10}\s*", value):
            raise UserError(f"--param: {item!r} is not valid; expected KEY=NUMBER, e.g. "
                            "test_calls=25")
        pairs.append((key.strip(), int(value)))
    return tuple(pairs)


def options_from_args(args: argparse.Namespace) -> IngestOptions:
    nodes = _int("--nodes", args.nodes)
    repetition = _int("--repetition", args.repetition)
    return IngestOptions(
        collective=args.collective, algorithm=args.algorithm,
        nprocs=_int("--nprocs", args.nprocs), nodes=1 if nodes is None else nodes,
        ppn=_int("--ppn", args.ppn), mapping=args.mapping, binding=args.binding,
        mca=_mca(args.mca), mpi=args.mpi, mpi_version=args.mpi_version,
        repetition=0 if repetition is None else repetition, campaign=args.campaign,
        format=args.format, params=_params(args.param))


def cmd_ingest(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    written = ingest_files(list(args.files), args.output, options, log=print)
    skipped = len(args.files) - len(written)
    print(f"{args.output}: {len(written)} launch{'es' if len(written) != 1 else ''} stored"
          + (f", {skipped} already there" if skipped else ""))
    return 0
