"""`collbench model`: explain measurements with models, and predict what was not measured.

    collbench model p2p RESULTS -o orfeo.p2p.toml      point-to-point fit from ping-pong rows
    collbench model p2p --show orfeo.p2p.toml          parameters, CIs, regimes, fit error
    collbench model loggp --map-by core,socket -o m.p2p.toml   measured LogGP/PLogP per level
    collbench model predict orfeo.p2p.toml --collective bcast --algorithms all \\
        --nprocs 48 --ppn 24 --map-by core --sizes 1:1M -o results/model48
    collbench model fit RESULTS                        per-algorithm fitted models, CV error
    collbench model scaling RESULTS --x nprocs --forms linear,quadratic,log,nlogn
    collbench model jacobi RESULTS --p2p orfeo.p2p.toml    P(L,N) of the Jacobi mini-app

fit, scaling and jacobi run in commands/fitted.py, loggp in commands/loggp.py.

Method and file format: docs/models.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from collbench.commands import fitted, loggp, options
from collbench.commands.fitted import words
from collbench.errors import UserError, choice_error
from collbench.points import COLUMN_STATS
from collbench.tables import render

FORMATS: Final = ("table", "csv", "json")


def add_parser(sub: options.Subparsers) -> None:
    m = sub.add_parser("model", help="p2p fits, per-algorithm models, predictions, regressions",
                       description="Explain measurements with models and predict what was "
                                   "not measured (docs/models.md).")
    msub = m.add_subparsers(dest="model_command", required=True)

    s = msub.add_parser("p2p", help="fit Hockney parameters per level from ping-pong rows, "
                                    "or --show a .p2p.toml file",
                        description="Piecewise Hockney fit (latency + size/bandwidth per "
                                    "protocol regime, regimes found from the data) per "
                                    "placement level and per transport/MCA setting, from the "
                                    "'latency' rows of a results folder (measured or "
                                    "ingested with --mapping). A folder with several "
                                    "settings gives one file per setting.")
    s.add_argument("source", type=Path, help="results folder (or, with --show, a .p2p.toml)")
    s.add_argument("-o", "--output", type=Path, help="the .p2p.toml file to write")
    s.add_argument("--show", action="store_true", help="print a .p2p.toml file's model")
    s.add_argument("--transport", help="fit only this transport/MCA setting (as listed)")
    s.add_argument("--max-regimes", type=int, default=3, choices=(1, 2, 3),
                   help="most protocol regimes per level (default: %(default)s)")
    options.add_format(s, FORMATS)
    s.set_defaults(func=cmd_p2p)
    loggp.add_parser(msub)  # model loggp: measured LogGP/PLogP parameters (commands/loggp.py)

    s = msub.add_parser("predict", help="a results folder of predicted latencies",
                        description="Cost each algorithm's schedule (what Open MPI 5.0's "
                                    "coll/tuned code sends) with the p2p model at each hop's "
                                    "level. Rows are stored with source = model, so show, "
                                    "compare, tune and report work on them; 'default' is "
                                    "predicted as what --openmpi's series runs: coll/tuned's "
                                    "fixed decision, or (5.0 on 2 or more nodes) coll/han's "
                                    "hierarchy, in rows of component han.")
    s.add_argument("p2p", type=Path, nargs="?", help=".p2p.toml file (or --platform)")
    s.add_argument("--platform", metavar="NAME|FILE",
                   help="cost with a SimGrid platform's parameters instead of a .p2p.toml: "
                        "a built-in name or a cluster TOML (per-level latency, bandwidth, "
                        "factors, per-message overheads, [memory] sharing and its shape)")
    s.add_argument("--collective", required=True, help="one or a comma list, e.g. bcast,gather")
    s.add_argument("--algorithms", default="all", help="'all' or a comma list "
                                                       "(default: %(default)s)")
    s.add_argument("--nprocs", type=_int_list, required=True, help="e.g. 48 or 2,4,8")
    s.add_argument("--ppn", type=_positive, help="ranks per node (default: all on one node, "
                                                 "or spread evenly over --nodes)")
    s.add_argument("--nodes", type=_positive, help="nodes allocated (default: as many as "
                   "nprocs / ppn needs); --map-by node spreads the ranks over all of them")
    s.add_argument("--map-by", default="core", help="core, socket, node or a comma list "
                                                    "(default: %(default)s)")
    s.add_argument("--sizes", default="1:1M", help="bytes per rank: '1:1M', '4K', '1,64,8K' "
                                                   "(default: %(default)s)")
    s.add_argument("--openmpi", default="5.0", metavar="SERIES",
                   help="the Open MPI series whose 'default' is predicted: 4.1 (coll/tuned "
                        "everywhere) or 5.0 (coll/han on 2 or more nodes) "
                        "(default: %(default)s)")
    _add_shape(s)
    add_network(s)
    s.add_argument("-o", "--output", type=Path, required=True, help="results folder to create")
    s.set_defaults(func=cmd_predict)

    s = msub.add_parser("fit", help="per-algorithm models fitted to collective measurements",
                        description="Per (collective, algorithm): the schedule's latency and "
                                    "byte counts along each rank's critical path, their "
                                    "coefficients fitted to the measurements (weighted least "
                                    "squares on relative error), with 95 %% intervals and "
                                    "cross-validated error (leave one size / one process "
                                    "count out).")
    s.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    s.add_argument("--p2p", type=Path, help=".p2p.toml giving each hop's cost (default: fitted "
                                            "from the folder's ping-pongs if any, else unit "
                                            "costs: only the structure counts)")
    s.add_argument("--basis", default="pooled", help="pooled (α, β, γ per algorithm), "
                                                     "per_level or scaled (default: "
                                                     "%(default)s)")
    s.add_argument("--collective", help="only this collective")
    s.add_argument("--stat", choices=tuple(COLUMN_STATS), default="avg",
                   help="figure fitted, pooled as its median over repetitions (default: "
                        "%(default)s)")
    _add_shape(s)
    add_network(s)
    options.add_format(s, FORMATS)
    s.set_defaults(func=fitted.cmd_fit)

    s = msub.add_parser("scaling", help="regressions of latency in the process count or size",
                        description="Per algorithm × placement × size (or × process count): "
                                    "the forms asked for, fitted with statsmodels; adjusted "
                                    "R², AIC(c), leave-one-out error; the best form named.")
    s.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    s.add_argument("--x", choices=("nprocs", "size"), default="nprocs",
                   help="regress in the process count or the message size")
    s.add_argument("--forms", default="linear,quadratic,log,nlogn",
                   help=f"comma list of {', '.join(fitted.FORMS)} (default: %(default)s)")
    s.add_argument("--collective", help="only this collective")
    s.add_argument("--algorithm", help="only this algorithm label")
    s.add_argument("--stat", choices=tuple(COLUMN_STATS), default="avg",
                   help="figure fitted, pooled as its median over repetitions (default: "
                        "%(default)s)")
    s.add_argument("--all-forms", action="store_true", help="one row per form, not only "
                                                            "the best")
    options.add_format(s, FORMATS)
    s.set_defaults(func=fitted.cmd_scaling)

    s = msub.add_parser("jacobi", help="the Jacobi mini-app's P(L,N) model against its "
                                       "measurements",
                        description="P(L,N) = L^3 N / (T_s + C/B + 4kλ) for every jacobi run "
                                    "of a results folder: T_s from its nprocs = 1 runs, λ and "
                                    "B from the p2p model at the level the halos cross; "
                                    "predicted against measured MLUP/s per placement and N "
                                    "(docs/workloads.md).")
    s.add_argument("results", type=Path, help="results folder (collbench run/ingest)")
    s.add_argument("--p2p", type=Path, required=True, help=".p2p.toml (core, socket and node "
                                                           "levels as the runs need)")
    _add_shape(s)
    options.add_format(s, FORMATS)
    s.set_defaults(func=fitted.cmd_jacobi)


def _add_shape(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sockets", type=_positive, help="sockets per node (default: the "
                   "folder's machine or SimGrid platform; for predict 2)")
    p.add_argument("--cores-per-socket", type=_positive, help="cores per socket (default: "
                   "as many as the ranks per node need)")


# Bounded as the spec's numbers are (options.MAX_NPROCS is spec/fields.py's): a prediction
# costs every rank's schedule, and an unbounded count never ends.
_positive = options.count(1, options.MAX_NPROCS)  # ppn, nodes, sockets, cores per socket
MAX_COUNTS: Final = 64


def _int_list(text: str) -> list[int]:
    one = options.count(2, options.MAX_NPROCS)
    try:
        out = [one(x) for x in text.split(",") if x.strip()]
    except argparse.ArgumentTypeError:
        out = []
    if not out or len(out) > MAX_COUNTS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not valid; valid: a process count from 2 to {options.MAX_NPROCS}, "
            f"or a comma list of up to {MAX_COUNTS}, such as 2,4,8")
    return out


# --- p2p ------------------------------------------------------------------------------------

def cmd_p2p(args: argparse.Namespace) -> int:
    from collbench.models.p2pfile import read_p2p, write_p2p

    if args.show:
        if args.output is not None:
            raise UserError("--show prints a file; leave -o out")
        model = read_p2p(args.source, required_levels=())
        sys.stdout.write(show_p2p(model, str(args.source), args.format))
        return 0
    if args.output is None:
        raise UserError("model p2p: -o FILE.p2p.toml is required to fit (or --show FILE)")
    from collbench.analyse.modeldata import fit_p2p
    from collbench.store import Store

    models, notes = fit_p2p(Store(args.source), max_segments=args.max_regimes)
    if args.transport is not None:
        if args.transport not in models:
            raise choice_error(str(args.source), "--transport", args.transport, models)
        models = {args.transport: models[args.transport]}
    outputs = _p2p_outputs(args.output, list(models))
    for (transport, model), path in zip(models.items(), outputs, strict=True):
        try:
            write_p2p(model, path)
        except OSError as e:
            raise UserError(f"{path}: cannot write: {e.strerror or e}") from None
        sys.stdout.write(show_p2p(model, str(path), args.format))
        print(f"wrote {path} (transport/MCA setting: {transport})")
    for n in notes:
        print(f"note: {n}")
    return 0


def _p2p_outputs(out: Path, transports: Sequence[str]) -> list[Path]:
    if len(transports) == 1:
        return [out]
    stem = out.name.removesuffix(".p2p.toml").removesuffix(".toml")
    return [out.with_name(f"{stem}.{_slug(t)}.p2p.toml") for t in transports]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", text).strip("_.")[:60] or "default"


def show_p2p(model: Any, where: str, fmt: str = "table") -> str:
    from collbench.analyse.modeldata import P2P_COLUMNS, p2p_rows

    rows = p2p_rows(model)
    lg = loggp.loggp_rows(model)
    if fmt == "json":
        return json.dumps({"file": where, "source": dict(model.source),
                           "reduce_us_per_byte": model.gamma_us_per_byte,
                           "regimes": rows, "loggp": lg}, indent=1) + "\n"
    if fmt == "csv":
        return render(rows, P2P_COLUMNS, "csv") + "\n"
    out = [f"# {where}: t(m) = latency + m / bandwidth per level and protocol regime "
           "(95 % intervals)"]
    out += [f"# {k}: {v}" for k, v in model.source.items()]
    if model.gamma_us_per_byte > 0:
        out.append(f"# reduction: {1e-3 / model.gamma_us_per_byte:.4g} GB/s")
    out.append(render(rows, P2P_COLUMNS, "table"))
    if lg:
        out += ["", "# LogGP/PLogP parameters per level (model loggp; docs/models.md)",
                render([loggp.shown(r) for r in lg], loggp.LOGGP_COLUMNS, "table")]
    return "\n".join(out) + "\n"


# --- predict -------------------------------------------------------------------------------

def cmd_predict(args: argparse.Namespace) -> int:
    from collbench.catalog.ompi_decisions import series
    from collbench.models.p2pfile import read_p2p
    from collbench.models.predict import Request, Shape, launches, resolve_algorithms
    from collbench.sizes import parse_sizes
    from collbench.tune.model import write_predictions

    if (args.p2p is None) == (args.platform is None):
        raise UserError("model predict: give a .p2p.toml file or --platform NAME|FILE "
                        "(exactly one)")
    collectives = words(args.collective)
    for c in collectives:
        resolve_algorithms(c, args.algorithms)  # checks names before anything is costed
    platform = None
    if args.platform is not None:
        from collbench.models.platform import read_platform
        platform = read_platform(args.platform)
    base = platform[1] if platform else Shape(2, None)
    shape = Shape(args.sockets or base.sockets, args.cores_per_socket or base.cores_per_socket,
                  base.sockets_per_package)  # a platform's packages (dropped if --sockets
    # or --cores-per-socket give another machine: predict.topology checks the grouping)
    sizes = tuple(parse_sizes(words(args.sizes), "--sizes"))  # type: ignore[arg-type]
    version = series(args.openmpi)  # one line naming the valid series
    requests = [Request(tuple(collectives), tuple(args.nprocs), args.ppn, args.nodes, m,
                        sizes, args.algorithms, shape, args.network, version)
                for m in words(args.map_by)]
    model = platform[0] if platform else read_p2p(args.p2p, required_levels=_levels(requests))
    missing = sorted(set(_levels(requests)) - set(model.levels))
    if platform and missing:
        raise UserError(f"model predict: platform {args.platform}: no level for "
                        f"{', '.join(missing)}; valid: placements within its nodes and sockets")
    origin = str(args.p2p) if platform is None else f"platform {args.platform}"
    name = args.output.resolve().name
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    notes: list[str] = []
    for req in requests:
        got, more = launches(model, req, name, origin)
        runs += got
        notes += more
    if not runs:
        raise UserError("model predict: nothing to predict; " + "; ".join(notes[:3]))
    store = write_predictions(args.output, runs, {
        **({"platform": args.platform} if platform else {"p2p_file": str(args.p2p.resolve())}),
        "p2p_source": dict(model.source),
        "network": args.network, "ompi_version": version,
        "shape": {"sockets": shape.sockets, "cores_per_socket": shape.cores_per_socket}})
    for n in dict.fromkeys(notes):
        print(f"note: {n}")
    print(f"wrote {store.root}: {sum(len(r) for _, r in runs)} predicted rows in {len(runs)} "
          f"launches ({', '.join(collectives)}; np {','.join(map(str, args.nprocs))}; map-by "
          f"{args.map_by}); read it like measurements: collbench show {store.root}")
    return 0


def _levels(requests: Sequence[Any]) -> list[str]:
    """The levels the requested placements use (a p2p file must have those)."""
    from collbench.models.predict import placement, topology

    levels: set[str] = set()
    for req in requests:
        for n in req.nprocs:
            try:
                nodes, ppn = placement(n, req.nodes, req.ppn)
            except UserError:
                continue  # launches() reports it, once the p2p file is read
            levels |= topology(n, nodes, ppn, req.mapping, req.shape).levels_used()
    return sorted(levels)


def add_network(p: argparse.ArgumentParser, dest: str = "network") -> None:
    p.add_argument("--network", dest=dest, choices=("mpi", "smpi", "serial"), default="mpi",
                   help="how messages share time: mpi = eager sends overlap their latency, "
                        "rendezvous from 4 KiB (Open MPI's sm eager limit); smpi = SimGrid: "
                        "transfers start when the receive is posted and share links, "
                        "rendezvous from 64 KiB, timed from each rank's barrier exit; "
                        "serial = whole transfers one after another (default: %(default)s)")
