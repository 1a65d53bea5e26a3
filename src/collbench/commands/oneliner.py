"""A campaign from command-line options instead of a TOML file (`run` and `plan`).

`collbench run -c bcast -m 1:1M -i 1000 -x 100 -n 4 -o results/b` builds the spec a file
would hold, validates it with the same pydantic Spec (so the same limits and messages,
with the option named instead of the key), and hands `campaign.py` its TOML text: the
folder stores it as `spec.toml`, so `--resume`, `report` and `tune` work as for a file.

OSU's letters where they do not clash: -m sizes, -i iterations, -x warm-up. OSU's -c
(validate) becomes --validate, and -c is the collective; -n is the process count, as for
mpirun and `rules verify -n`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from collbench.campaign import Prepared, SpecSource
from collbench.commands import options
from collbench.errors import UserError
from collbench.spec import Spec, spec_from_dict
from collbench.store import Store

ORIGIN: Final = "command line"
CONFIDENCE: Final = 0.95  # the quick look's, as compare's default
MAX_REPETITIONS: Final = 64  # more would not make a difference testable that 64 cannot
# Spec key → the option that sets it, so a validation message names what the user typed.
OPTION_OF: Final = {
    "campaign.name": "--name",
    "measure.collectives": "--collective",
    "measure.algorithms": "--algorithms",
    "measure.sizes": "--sizes",
    "measure.nprocs": "--nprocs",
    "measure.map_by": "--map-by",
    "measure.bind_to": "--bind-to",
    "measure.iterations": "--iterations",
    "measure.warmup": "--warmup",
    "run.repetitions": "--repetitions",
}
_DESTS: Final = ("collective", "algorithms", "sizes", "nprocs", "map_by", "bind_to",
                 "iterations", "warmup", "repetitions", "validate", "name")


def add_options(p: argparse.ArgumentParser) -> None:
    """The options that stand for a spec file (all optional; a file or these, not both)."""
    g = p.add_argument_group(
        "campaign without a spec file (OSU's letters: -m sizes, -i iterations, -x warm-up)")
    g.add_argument("-c", "--collective", metavar="LIST",
                   help="collectives to measure, comma-separated (e.g. bcast,allreduce)")
    g.add_argument("--algorithms", metavar="LIST",
                   help='"all" (default), "default", or names/ids, comma-separated')
    g.add_argument("-m", "--sizes", metavar="SIZES",
                   help="bytes per rank: MIN:MAX (powers of two), or a comma list; "
                        "default 1:1M")
    g.add_argument("-n", "--nprocs", metavar="LIST",
                   help="process counts, comma-separated (required with -c)")
    g.add_argument("--map-by", metavar="LIST", help="mappings, comma-separated (core, ...)")
    g.add_argument("--bind-to", metavar="LIST", help="bindings, comma-separated (core, ...)")
    g.add_argument("-i", "--iterations", type=options.count(0, options.MAX_COUNT), metavar="N",
                   help="timed iterations per point (default: OSU's, 1000/100; 1 under "
                        "SimGrid, which repeats exactly)")
    g.add_argument("-x", "--warmup", type=options.count(0, options.MAX_COUNT), metavar="N",
                   help="warm-up iterations per point (default: OSU's, 100/10; 1 under "
                        "SimGrid)")
    g.add_argument("--repetitions", type=options.count(1, options.MAX_COUNT), metavar="N",
                   help="launches per configuration (default 1)")
    g.add_argument("--validate", action="store_true", default=None,
                   help="check every result (OSU's -c)")
    g.add_argument("--name", help="campaign name (default: the -o folder's name)")


def given(args: argparse.Namespace) -> list[str]:
    """The spec-building options present on this command line, as the user spells them."""
    return [f"--{d.replace('_', '-')}" for d in _DESTS if getattr(args, d, None) is not None]


def source(args: argparse.Namespace) -> SpecSource:
    """The campaign's spec: the file, the options, or (run --resume alone) the folder's."""
    spec_file: Path | None = args.spec
    present = given(args)
    if spec_file is not None and present:
        raise UserError(f"{spec_file}: a spec file and {', '.join(present)} together; give "
                        "one or the other (write the settings into the file)")
    if spec_file is not None:
        return SpecSource.from_file(spec_file)
    if present:
        return from_options(args)
    output: Path | None = getattr(args, "output", None)
    if getattr(args, "resume", False) and output is not None and Store(output).exists():
        store = Store(output)
        return SpecSource.from_text(store.spec_text(), str(store.spec_file))
    raise UserError("give a spec file, or a campaign as options (e.g. -c bcast -n 2,4; "
                    "see --help)")


def from_options(args: argparse.Namespace) -> SpecSource:
    data = spec_data(args)
    spec = _validate(data)
    text = spec_text(data)
    again = SpecSource.from_text(text, ORIGIN)  # what the folder will store reads back
    if again.spec.model_dump(mode="json") != spec.model_dump(mode="json"):
        raise UserError(f"{ORIGIN}: these options cannot be written as a spec file")
    return again


def spec_data(args: argparse.Namespace) -> dict[str, Any]:
    """The spec as TOML would hold it; values left as typed where the Spec parses them."""
    if args.collective is None:
        raise UserError(f"{ORIGIN}: --collective (-c) is required to run without a spec "
                        "file (e.g. -c bcast -n 2,4)")
    if args.nprocs is None:
        raise UserError(f"{ORIGIN}: --nprocs (-n) is required with --collective (e.g. -n 2,4)")
    measure: dict[str, Any] = {"collectives": _items(args.collective),
                               "nprocs": [_int_or_text(v) for v in _items(args.nprocs)]}
    if args.algorithms is not None:
        algs = _items(args.algorithms)
        measure["algorithms"] = algs[0] if algs in (["all"], ["default"]) else \
            [_int_or_text(a) for a in algs]
    if args.sizes is not None:
        sizes = _items(args.sizes)
        measure["sizes"] = sizes[0] if len(sizes) == 1 else sizes
    for key in ("map_by", "bind_to"):
        if getattr(args, key) is not None:
            measure[key] = _items(getattr(args, key))
    for key in ("iterations", "warmup"):
        if getattr(args, key) is not None:
            measure[key] = getattr(args, key)
    if args.validate:
        measure["validate"] = True
    data: dict[str, Any] = {"campaign": {"name": _name(args)}, "measure": measure}
    if args.repetitions is not None:
        data["run"] = {"repetitions": args.repetitions}
    return data


def _name(args: argparse.Namespace) -> str:
    if args.name is not None:
        return str(args.name)
    output: Path | None = getattr(args, "output", None)
    folder = output.resolve().name if output is not None else ""
    # A folder name the spec would refuse (spaces, accents) falls back to a plain one.
    ok = folder and all(c.isascii() and (c.isalnum() or c in "_.-") for c in folder)
    return folder if ok else "cli"


def _items(text: str) -> list[str]:
    items = [part.strip() for part in str(text).split(",")]
    return [i for i in items if i] or [str(text)]


def _int_or_text(value: str) -> int | str:
    return int(value) if value.isascii() and value.isdigit() and len(value) < 20 else value


def _validate(data: dict[str, Any]) -> Spec:
    with options_named():
        return spec_from_dict(data, ORIGIN)


@contextmanager
def options_named() -> Iterator[None]:
    """Say `--sizes` where a message about a spec made from options says `measure.sizes`
    (planning checks algorithms against the MPI after validation)."""
    try:
        yield
    except UserError as e:
        message = str(e)
        for key, option in OPTION_OF.items():
            prefix = f"{ORIGIN}: {key}"
            if message.startswith(prefix):
                raise UserError(f"{ORIGIN}: {option}{message[len(prefix):]}") from None
        raise


def spec_text(data: dict[str, Any]) -> str:
    """TOML for the spec data (tables of strings, integers, booleans and lists of them)."""
    lines = ["# collbench spec made from `collbench run`/`plan` options; runs as a file too."]
    for table, values in data.items():
        lines.append(f"\n[{table}]")
        lines.extend(f"{key} = {_value(value)}" for key, value in values.items())
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    text = str(value)
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):  # undecodable bytes in argv
        raise UserError(f"{ORIGIN}: {text.encode('utf-8', 'replace')!r} is not valid text")
    # A JSON string is a TOML basic string once DEL is escaped too; control characters
    # are escaped, so nothing the user typed can end a line of the file.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


# --- the quick look: `run -c bcast -n 2` without -o, and the table it prints -------------
def add_quicklook(p: argparse.ArgumentParser) -> None:
    """`run`'s options for the table a campaign given as options prints."""
    from collbench.points import STATS

    g = p.add_argument_group("the table printed after a campaign given as options")
    g.add_argument("--stat", choices=tuple(STATS), default="avg", metavar="NAME",
                   help=f"the figure in the table ({', '.join(STATS)}, as compare --stat; "
                        "default: %(default)s)")
    g.add_argument("-f", "--full", action="store_true",
                   help="also the tables of the fastest and slowest rank (min, max; OSU's "
                        "-f)")


def quick(args: argparse.Namespace) -> bool:
    """A campaign given as options (not a file, not a folder's own spec)."""
    return getattr(args, "spec", None) is None and bool(given(args))


def throwaway_folder() -> Path:
    """A new folder under the temporary directory for a run without -o, said on stderr."""
    import sys
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="collbench-")) / "quick"
    print(f"collbench: measuring into {out} (a throw-away folder; -o DIR keeps the results "
          "where you choose)", file=sys.stderr)
    return out


def repetitions_needed(prepared: Prepared) -> int:
    """The fewest launches with which the most variants compared at one size can show a
    significant difference (stability.repetitions_needed's rule, from the plan); 1 for a
    simulation, which repeats to the last digit."""
    from collbench.analyse.stability import MIN_REPETITIONS, SIMULATED
    from collbench.analyse.stats import min_p_value

    if prepared.backend.name in SIMULATED:  # as compare reads its rows: exact
        return 1
    variants: dict[tuple[object, ...], set[tuple[object, ...]]] = {}
    for la in prepared.plan.launches:
        for pt in la.points:
            key = (la.launch_id, pt.collective, pt.size_bytes, pt.test_calls, pt.compute)
            variants.setdefault(key, set()).add((pt.algorithm, pt.algorithm_id, pt.segsize,
                                                 pt.fanout))
    family = max([1] + [len(v) - 1 for v in variants.values()])
    alpha = 1 - CONFIDENCE
    return max(MIN_REPETITIONS,
               next(n for n in range(2, MAX_REPETITIONS) if family * min_p_value(n, n) < alpha))


def print_table(args: argparse.Namespace) -> None:
    """The size × algorithm table of the folder just measured; a figure it lacks is a note,
    not a failed run (the results stay stored)."""
    import sys

    from collbench.analyse.compare import compare
    from collbench.analyse.grid import grid, warnings

    stats = [args.stat] + ([s for s in ("min", "max") if s != args.stat] if args.full else [])
    try:
        comparisons = [compare(Store(args.output), stat=s, confidence=CONFIDENCE)
                       for s in stats]
    except UserError as e:
        print(f"collbench: no table: {e}", file=sys.stderr)
        return
    print("\n".join(grid(c) for c in comparisons), end="")
    lines = warnings(comparisons[0])
    if lines:
        print("\n" + "\n".join(lines).replace(
            "--all shows", f"`collbench compare {args.output} --all` shows"))
