"""`collbench tune --model X.p2p.toml`: rules from a point-to-point model's predictions
(tune.model), written as `tune` writes them from measurements: the coll/tuned rules file
and, where the modelled default is coll/han's hierarchy (Open MPI 5.0 on several nodes),
han's rules file beside it (docs/models.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from collbench.commands import options
from collbench.errors import UserError
from collbench.sizes import expand_sizes
from collbench.store import Store


def add_model_options(t: argparse.ArgumentParser,
                      nprocs_list: Callable[[str], list[int]]) -> None:
    g = t.add_argument_group("rules from a model (collbench tune --model X.p2p.toml --nprocs N "
                             "-o FILE; docs/models.md)")
    g.add_argument("--model", type=Path, metavar="P2P", help="a .p2p.toml point-to-point model")
    g.add_argument("--nprocs", dest="model_nprocs", type=nprocs_list, metavar="N",
                   help="process count(s) to write rules for, e.g. 48 or 24,48")
    g.add_argument("--ppn", dest="model_ppn", type=options.count(1, options.MAX_NPROCS),
                   metavar="N",
                   help="ranks per node (default: all on one node)")
    g.add_argument("--nodes", dest="model_nodes", type=options.count(1, options.MAX_NPROCS),
                   metavar="N",
                   help="nodes allocated (default: nprocs / ppn)")
    g.add_argument("--map-by", dest="model_map_by", default="core", metavar="MAPPING",
                   help="core, socket or node (default: %(default)s)")
    g.add_argument("--sizes", dest="model_sizes", default="1:1M", metavar="SIZES",
                   help="bytes per rank (default: %(default)s)")
    g.add_argument("--collectives", dest="model_collectives", metavar="LIST",
                   default="bcast,gather,scatter,reduce,allreduce,allgather,alltoall",
                   help="comma list (default: %(default)s)")
    g.add_argument("--sockets", dest="model_sockets", type=options.count(1, 1024), default=2,
                   metavar="N",
                   help="sockets per node (default: %(default)s)")
    g.add_argument("--cores-per-socket", dest="model_cores", type=options.count(1, 1 << 20),
                   metavar="N",
                   help="cores per socket (default: as many as the ranks per node need)")
    g.add_argument("--network", dest="model_network", choices=("mpi", "smpi", "serial"),
                   default="mpi", help="how messages share time, as `model predict` "
                                       "(default: %(default)s)")
    g.add_argument("--against", dest="model_against", type=Path, metavar="RESULTS",
                   help="measured folder: report the selection penalty of the model's choices "
                        "where it has the same configurations")
    g.add_argument("--keep-predictions", dest="model_keep", type=Path, metavar="DIR",
                   help="keep the predicted results folder here (default: a temporary one)")
    g.add_argument("-o", "--output", dest="model_output", type=Path, metavar="FILE",
                   help="rules file to write")
    g.add_argument("--rules-version", dest="model_rules_version", choices=("auto", "1", "2"),
                   metavar="{auto,1,2}",
                   default="2", help="rule-file-version-2 (default) or the classic format")
    g.add_argument("--extrapolate", dest="model_extrapolate", action="store_true",
                   help="let the rules of the smallest and largest --nprocs serve every "
                        "smaller and larger communicator")
    t.set_defaults(func=cmd_model)


def cmd_model(args: argparse.Namespace) -> int:
    """`tune --model`: rules for process counts and sizes from a p2p model's predictions."""
    import tempfile

    from collbench.commands.tune_output import han_rules_beside, summary, write_file
    from collbench.models.p2pfile import read_p2p
    from collbench.models.predict import Request, Shape
    from collbench.tune import writer
    from collbench.tune.model import han_note, predicted_selection

    if args.model is None:
        raise UserError("tune: give a results folder (collbench tune RESULTS -o FILE), "
                        "`validate`, or --model X.p2p.toml --nprocs N -o FILE")
    if args.model_nprocs is None or args.model_output is None:
        raise UserError("tune --model: --nprocs and -o FILE are required; e.g. collbench tune "
                        "--model x.p2p.toml --nprocs 48 --ppn 24 -o predicted.rules")
    try:
        sizes = tuple(sorted(set(expand_sizes([x.strip() for x in args.model_sizes.split(",")
                                               if x.strip()]))))
    except (ValueError, UserError) as e:
        raise UserError(f"--sizes {args.model_sizes!r}: {e}") from None
    req = Request(tuple(c.strip() for c in args.model_collectives.split(",") if c.strip()),
                  tuple(args.model_nprocs), args.model_ppn, args.model_nodes,
                  args.model_map_by, sizes, "all",
                  Shape(args.model_sockets, args.model_cores), args.model_network)
    model = read_p2p(args.model, required_levels=())
    with tempfile.TemporaryDirectory(prefix="collbench-model-") as tmp:
        folder = args.model_keep or Path(tmp) / "predicted"
        selection, store = predicted_selection(model, req, folder, str(args.model))
        version = writer.choose_version("5.0.7", args.model_rules_version)
        written = writer.build(selection, version=version, source=str(args.model),
                               path=args.model_output,
                               predicted=f"predicted by the p2p model {args.model}",
                               extrapolate=args.model_extrapolate)
        write_file(args.model_output, written.text)
        summary(selection, written.notes)
        print(f"note: {writer.reach_note(selection, args.model_extrapolate, True)}")
        print(f"wrote {args.model_output} ({'rule-file-version-2' if version else 'classic'}"
              f", {len(written.rules.collectives)} collectives) from predictions; activate "
              "it as `collbench tune` says, and check it with `collbench tune validate`")
        mca = han_rules_beside(selection, args.model_output, str(args.model))
        if mca:
            print("activate both with: mpirun " + " ".join(
                f"--mca {k} {v}" for k, v in [*writer.activation(args.model_output), *mca]))
        why = han_note(selection, req)
        if why and not mca:
            print(f"note: {why}")
        if args.model_against is not None:
            from collbench.analyse.against import against, read_points, summary_lines

            measured = Store(args.model_against)
            result = against(read_points(measured), read_points(store),
                             str(args.model_against), "model")
            print(f"against {args.model_against}: " + "; ".join(summary_lines(result)[1:]))
    return 0
