"""`collbench tune`: write tuning files from measurements, and validate them A/B.

    collbench tune RESULTS -o tuned.rules [--mpich]      (same as: collbench tune build ...)
    collbench tune SPEC --adaptive -o tuned.rules        (measure only what the rules need)
    collbench tune validate tuned.rules -n 4 --repetitions 10

`tune` takes either an action (validate, build) or, as the default action "build", a results
folder; _DefaultAction below inserts "build" when the first word names no action.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench import points
from collbench.commands import adaptive, options, tune_model
from collbench.commands.tune_output import han_rules_beside
from collbench.commands.tune_output import summary as _summary
from collbench.commands.tune_output import write_file as _write
from collbench.errors import UserError
from collbench.sizes import expand_sizes
from collbench.store import Store

if TYPE_CHECKING:
    _Base = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _Base = argparse._SubParsersAction

BUILD = "build"


class _AnyName:
    """Choices that accept any word: an unknown one is the default action's argument."""

    def __init__(self, names: dict[str, argparse.ArgumentParser]) -> None:
        self.names = names

    def __contains__(self, key: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)


class _DefaultAction(_Base):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.choices = _AnyName(self._name_parser_map)  # type: ignore[assignment]

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if values and values[0] not in self._name_parser_map:
            values = [BUILD, *values]
        super().__call__(parser, namespace, values, option_string)


def add_placement(p: argparse.ArgumentParser) -> None:
    """--hostfile/--ssh-config/--ppn: run on a host list (the hosts backend) instead of
    this machine, e.g. on two nodes where Open MPI 5.0's coll/han serves."""
    g = p.add_argument_group("on several hosts (docs/hosts.md, docs/components.md)")
    g.add_argument("--hostfile", type=Path, metavar="FILE",
                   help="run on these hosts (mpirun --hostfile format), not on this machine")
    g.add_argument("--ssh-config", type=Path, metavar="FILE",
                   help="with --hostfile: the ssh client configuration to reach them")
    g.add_argument("--ppn", type=options.count(1, options.MAX_NPROCS), metavar="N",
                   help="with --hostfile: ranks per host (default: fill each host's slots)")


def placement(args: argparse.Namespace) -> Any:
    """The tune.campaign.Hosts of --hostfile (None: this machine); one line on misuse."""
    from collbench.tune.campaign import Hosts

    if args.hostfile is None:
        if args.ssh_config is not None or args.ppn is not None:
            raise UserError("--ssh-config and --ppn go with --hostfile; valid: add "
                            "--hostfile FILE, or leave them out to run on this machine")
        return None
    for flag, path in (("--hostfile", args.hostfile), ("--ssh-config", args.ssh_config)):
        if path is not None and not path.is_file():
            raise UserError(f"{flag} {path}: no such file; valid: a readable file")
    return Hosts(args.hostfile, args.ssh_config, args.ppn)


def nprocs_list(value: str) -> list[int]:
    one = options.count(1, options.MAX_NPROCS)
    try:
        out = [one(x) for x in value.split(",") if x]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{value!r} is not valid; valid: a process count "
                                         f"(1 to {options.MAX_NPROCS}) or a comma-separated "
                                         "list, such as 2,4") from None
    if not out or len(out) > 64:
        raise argparse.ArgumentTypeError(f"{value!r} is not valid; valid: 1 to 64 counts")
    return out


def add_parser(sub: options.Subparsers) -> None:
    t = sub.add_parser(
        "tune", help="rules file (Open MPI) or JSON tuning file (MPICH) from measurements",
        description="Write the algorithm choices that measurements support: "
                    "`collbench tune RESULTS -o tuned.rules` (Open MPI dynamic rules) or "
                    "`--mpich -o tuned.json` (MPICH csel JSON); `collbench tune validate "
                    "FILE -n N` runs default against tuned, A/B. Method: docs/tuning.md.")
    actions = t.add_subparsers(dest="tune_action", required=False, action=_DefaultAction,
                               metavar="{RESULTS,validate}")
    tune_model.add_model_options(t, nprocs_list)  # `tune --model`: from predictions

    b = actions.add_parser(BUILD, help="(default) write a tuning file from a results folder",
                           description="Per collective and process count: thresholds where "
                                       "the best algorithm changes, switching from the "
                                       "default only where significantly faster.")
    b.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    b.add_argument("-o", "--output", type=Path, required=True, help="file to write")
    b.add_argument("--mpich", action="store_true",
                   help="write an MPICH csel JSON file instead of an Open MPI rules file")
    b.add_argument("--impi", action="store_true",
                   help="write an Intel MPI JSON tuning file (I_MPI_TUNING) instead")
    b.add_argument("--no-significance", action="store_true",
                   help="take the fastest algorithm per size without testing it against the "
                        "default (needed with a single repetition; not recommended)")
    b.add_argument("--confidence", type=options.fraction, default=0.95,
                   help="confidence level of the tests (default: %(default)s)")
    b.add_argument("--min-gain", type=float, default=0.0, metavar="FRACTION",
                   help="switch only where at least this much faster, e.g. 0.05 "
                        "(default: %(default)s)")
    b.add_argument("--max-regret", type=float, default=0.05, metavar="FRACTION",
                   help="switch less: between neighbouring sizes keep the previous choice "
                        "while it is at most this much slower than the best (0: no "
                        "smoothing; default: %(default)s)")
    b.add_argument("--stat", choices=tuple(points.TIMING_STATS), default="avg",
                   help="figure compared: avg_us (OSU's average, the default), median_us, "
                        "min_us, max_us or completion_us (measure.timing = \"completion\")")
    b.add_argument("--collective", action="append", default=[],
                   help="only this collective (repeatable)")
    b.add_argument("--map-by", help="where several placements were measured: use this one")
    b.add_argument("--bind-to", help="where several bindings were measured: use this one")
    b.add_argument("--measured-mpi", metavar="KEY",
                   help="a campaign of several MPIs ([measure] mpi): tune this one's rows, "
                        "e.g. openmpi-4.1.8 (one file per MPI, each in the format that MPI "
                        "reads; docs/mpis.md)")
    b.add_argument("--rules-version", choices=("auto", "1", "2"), default="auto",
                   help="Open MPI file format: 2 = rule-file-version-2 with max-requests "
                        "(Open MPI >= 4.1.8 / 5.0.7), 1 = classic (default: auto, from the "
                        "measured version)")
    b.add_argument("--extrapolate", action="store_true",
                   help="let the rules of the smallest and largest measured process counts "
                        "serve every smaller and larger communicator (default: the MPI's own "
                        "choice outside the measured range; required by --impi, whose file "
                        "cannot hand a size back to Intel MPI's own tuning)")
    b.add_argument("--against", type=Path, metavar="REAL",
                   help="a real (measured or ingested) folder: report the regret of the "
                        "written rules' picks there (docs/tuning.md)")
    options.add_mpi(b)
    options.add_verbosity(b)
    b.set_defaults(func=cmd_build)

    adaptive.add_arguments(b)  # --adaptive and its options

    v = actions.add_parser("validate", help="default against tuned, interleaved, with CIs",
                           description="A/B: repeated launches of the default and of the "
                                       "tuned file, interleaved in random order; per-size "
                                       "speed-up with confidence intervals, geometric mean; "
                                       "exit 1 on a regression beyond noise.")
    v.add_argument("rules", type=Path, help="rules file")
    v.add_argument("-n", "--nprocs", type=nprocs_list, required=True, help="process count(s), "
                   "e.g. 4 or 2,4")
    v.add_argument("--repetitions", type=options.count(1, 100_000), default=10,
                   help="launches per arm (default: %(default)s)")
    v.add_argument("--sizes", default="1:1M",
                   help="bytes per rank: '1:1M', '4K', '1,64,8K' (default: %(default)s)")
    v.add_argument("--collective", action="append", default=[],
                   help="only this collective of the file (repeatable)")
    v.add_argument("--iterations", type=options.count(0, options.MAX_COUNT), default=0,
                   help="timed iterations per point (default: OSU's, 1000/100)")
    v.add_argument("-o", "--output", type=Path,
                   help="results folder (default: <rules file>.validate next to it; rerun "
                        "the same command to resume)")
    v.add_argument("--seed", type=options.count(0, options.MAX_COUNT), default=1,
                   help="order of the arms (default: 1)")
    v.add_argument("--timeout", type=options.seconds, default=600, help="seconds per launch")
    v.add_argument("--han", type=Path, metavar="FILE",
                   help="coll/han's rules file written beside RULES (RULES.han): the tuned "
                        "arm activates both (Open MPI 5.0 on several nodes)")
    v.add_argument("--impi", action="store_true",
                   help="RULES is an Intel MPI JSON tuning file (tune --impi): the tuned arm "
                        "sets I_MPI_TUNING (one node; --mpi impi==VERSION)")
    v.add_argument("--autotuner", action="store_true",
                   help="with --impi: also run Intel's autotuner (I_MPI_TUNING_MODE=auto; its "
                        "I_MPI_TUNING_AUTO_* knobs from the environment) on the same points "
                        "and measure its choices as a third arm: speed-up and measurement "
                        "cost beside the file's (one -n)")
    v.add_argument("--autotuner-iterations", type=options.count(1, options.MAX_COUNT),
                   default=2000, metavar="N",
                   help="calls per point in the autotuner's launch (default: %(default)s)")
    v.add_argument("--tuned-from", type=Path, metavar="DIR",
                   help="with --autotuner: the results folder the file was tuned from; the "
                        "sum of its launches' wall times is the file's measurement cost")
    add_placement(v)
    options.add_mpi(v)
    options.add_verbosity(v)
    v.set_defaults(func=cmd_validate)


def cmd_build(args: argparse.Namespace) -> int:
    from collbench.tune.select import Options, select

    if not 0 <= args.max_regret < 1:
        raise UserError(f"--max-regret {args.max_regret}: not valid; valid: a fraction in "
                        "[0, 1)")
    if not 0 <= args.min_gain < 1:
        raise UserError(f"--min-gain {args.min_gain}: not valid; valid: a fraction in [0, 1)")
    store = _one_mpi(Store(args.results), args.measured_mpi)
    opts = Options(significance=not args.no_significance, confidence=args.confidence,
                      min_gain=args.min_gain, stat=args.stat,
                      collectives=tuple(args.collective), map_by=args.map_by,
                      bind_to=args.bind_to, max_regret=args.max_regret)
    if args.adaptive:  # measures (or replays) first; then written like any selection
        from collbench.progress import overall

        options.apply_verbosity(args)
        with overall("adaptive rounds", None):  # how many rounds depends on the data
            selection, args.results = adaptive.selection(args, opts)
    else:
        selection = select(store, opts)
    if store.only_mpi is not None:
        print(f"collbench: tuning the rows of {store.only_mpi}", file=sys.stderr)
    if not selection.tested:
        print("collbench: warning: --no-significance: choices are the fastest per size, "
              "untested; validate them with `collbench tune validate`", file=sys.stderr)
    if args.mpich:
        return _build_mpich(args, selection)
    if args.impi:
        return _build_impi(args, selection)
    return _build_ompi(args, selection)


def _one_mpi(store: Store, key: str | None) -> Store:
    """The rows of one MPI: a rules file is written for the MPI it was measured with, so a
    campaign of several MPIs is tuned one MPI (--measured-mpi KEY) at a time."""
    if not store.meta_path.exists():
        return store  # the reader says what is wrong with the folder
    keys = store.reading(lambda con: sorted(str(k) for (k,) in con.execute(
        "SELECT DISTINCT mpi FROM measurements WHERE mpi IS NOT NULL").fetchall()))
    if key is None:
        if len(keys) > 1:
            raise UserError(f"{store.root}: holds rows of {len(keys)} MPIs; a rules file is "
                            "for one: add --measured-mpi KEY (valid: "
                            f"{', '.join(keys)}) and write one file per MPI")
        return store
    if key not in keys:
        from collbench.errors import did_you_mean

        raise UserError(f"--measured-mpi {key!r}: no rows of it in {store.root}; valid: "
                        f"{', '.join(keys) or 'none'}{did_you_mean(key, keys)}")
    return Store(store.root, only_mpi=key)


def _build_ompi(args: argparse.Namespace, selection: Any) -> int:
    from collbench.catalog.load import load_catalog
    from collbench.tune import writer
    from collbench.tune.check import check, render_report

    mpi = None
    with contextlib.suppress(UserError):  # writing needs no MPI: the measured version decides
        mpi = options.mpi(args)
    same = mpi is not None and mpi.implementation == "openmpi" and \
        mpi.version == selection.mpi_version
    defaults = writer.tuned_defaults(mpi.info_tool) if same and mpi else {}
    selection, predicted = _simulated(args.results, selection)
    version = writer.choose_version(selection.mpi_version, args.rules_version)
    written = writer.build(selection, version=version, source=str(args.results),
                           defaults=defaults, path=args.output, predicted=predicted,
                           extrapolate=args.extrapolate)
    _write(args.output, written.text)
    if mpi is not None and mpi.implementation == "openmpi":
        report = check(args.output, load_catalog(mpi))
        if not report.ok:  # our own output must pass our own check
            sys.stderr.write(render_report(report))
            raise UserError(f"{args.output}: the file written does not pass `collbench rules "
                            "check`; please report this")
    _summary(selection, written.notes)
    print(f"wrote {args.output} ({'rule-file-version-2' if version else 'classic format'}, "
          f"{len(written.rules.collectives)} collectives)")
    path = args.output.resolve()
    mca = [*writer.activation(args.output), *written.extra_mca,
           *han_rules_beside(selection, args.output, str(args.results))]
    print("activate it with:\n  mpirun " + " ".join(f"--mca {k} {v}" for k, v in mca) + " ...")
    print("or:\n" + "".join(f"  export OMPI_MCA_{k}={v}\n" for k, v in mca).rstrip())
    print(f"then prove it is used: collbench rules verify {path} -n <ranks>")
    print(f"note: {writer.reach_note(selection, args.extrapolate, predicted is not None)}")
    if args.against is not None:
        from collbench.analyse.against import read_points, regret_lines
        from collbench.catalog.ompi_decisions import series
        from collbench.tune.regret import regret

        real = read_points(Store(args.against))
        got = regret(written.rules, series(selection.mpi_version), real, selection.tables)
        for line in regret_lines(got, str(args.against)):
            print(line)
    return 0


def _simulated(results: Path, selection: Any) -> tuple[Any, str | None]:
    """A SimGrid campaign of collbench's Open MPI ports: its selection as the simulated Open
    MPI series', and what the header says it was predicted from (None: not simulated)."""
    from dataclasses import replace

    from collbench.tune import writer

    if selection.mpi != "smpi":
        return selection, None
    prov = Store(results).provenance()
    series = writer.simulated_openmpi(prov)
    if series is None:
        raise UserError(f"{results}: simulated with SMPI's own collectives "
                        "(run.simgrid.ompi_version not set); an Open MPI rules file needs "
                        "Open MPI measurements or a SimGrid campaign of collbench's Open MPI "
                        "ports; valid: run.simgrid.ompi_version = \"4.1\" or \"5.0\"")
    smpi_own = sorted({c.algorithm for cs in selection.tables.values() for c in cs
                       if c.algorithm.startswith("smpi:")})
    if smpi_own:
        raise UserError(f"{results}: SMPI's own algorithms won somewhere "
                        f"({', '.join(smpi_own)}); Open MPI cannot run them; valid: "
                        "--collective to leave those out, or a campaign of the ports only")
    sim = prov.get("simgrid", {})
    what = (f"simulated with SimGrid {sim.get('version', '?')} on platform "
            f"{sim.get('platform', '?')}, collbench's ports of Open MPI {series}'s "
            "coll/tuned algorithms")
    print(f"collbench: {results} is a simulation: rules for Open MPI {series}, marked "
          "predicted", file=sys.stderr)
    return replace(selection, mpi="openmpi", mpi_version=series), what


def _build_impi(args: argparse.Namespace, selection: Any) -> int:
    from collbench.commands.impi_tuning import cmd_build  # traces where the default won

    return cmd_build(args, selection)


def _build_mpich(args: argparse.Namespace, selection: Any) -> int:
    from collbench.tune import mpich, writer

    mpi = options.mpi(args)
    written = mpich.build(selection, mpi, source=str(args.results),
                          measured=mpich.measured_cvars(Store(args.results).provenance()),
                          extrapolate=args.extrapolate)
    _write(args.output, written.text)
    _summary(selection, written.notes)
    reach = writer.reach_note(selection, args.extrapolate, mpi="MPICH",
                              own="MPICH's own choice (its built-in table)")
    print(f"note: {reach}")
    print(f"wrote {args.output} (MPICH csel JSON: {len(written.tuned)} collectives tuned, "
          "the rest from MPICH's built-in table)")
    print("activate it with:")
    for k, v in mpich.activation(args.output, written.tuned):
        print(f"  export {k}={v}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from collbench.tune.check import read_file
    from collbench.tune.rules import parse_rules
    from collbench.tune.validate import render, validate

    options.apply_verbosity(args)
    if args.impi:
        from collbench.commands.impi_tuning import cmd_validate as impi_validate

        return impi_validate(args)
    if args.autotuner or args.tuned_from is not None:
        raise UserError("--autotuner, --tuned-from: Intel MPI's autotuner; valid: with --impi")
    reading = parse_rules(read_file(args.rules))
    if reading.rules is None:
        raise UserError(f"{args.rules}: Open MPI would ignore this file; run `collbench rules "
                        f"check {args.rules}`")
    try:
        sizes = sorted(set(expand_sizes([x.strip() for x in args.sizes.split(",") if x.strip()])))
    except (ValueError, UserError) as e:
        raise UserError(f"--sizes {args.sizes!r}: {e}") from None
    out = args.output or args.rules.with_name(args.rules.name + ".validate")
    if args.han is not None:
        from collbench.tune import han

        han.read(args.han)  # one line where coll/han would reject it
    result = validate(reading.rules, args.rules, out, args.nprocs, sizes, options.mpi(args),
                      repetitions=args.repetitions, seed=args.seed,
                      collectives=args.collective, iterations=args.iterations,
                      timeout=args.timeout, hosts=placement(args), han_path=args.han)
    sys.stdout.write(render(result))
    return 1 if result.regressions else 0
