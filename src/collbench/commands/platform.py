"""`collbench platforms` and `collbench platform new|show|xml|calibrate`: simulated
clusters for the SimGrid backend."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collbench.commands import options, results_folder
from collbench.errors import UserError, choice_error
from collbench.platforms.model import (
    PLATFORM_LEVELS,
    TOPOLOGIES,
    Cluster,
    builtin_names,
    load_cluster,
)
from collbench.storefiles import atomic_write
from collbench.tables import render

if TYPE_CHECKING:
    from collbench.platforms.calibrate import Calibration

FORMATS = ("table", "csv", "json")


def _row(name: str) -> dict[str, Any]:
    c, _, _ = load_cluster(name)
    row: dict[str, Any] = {"platform": name, "nodes": c.nodes, "sockets": c.sockets_per_node,
                           "cores/socket": c.cores_per_socket, "cores": c.cores,
                           "topology": c.topology.kind}
    for level, short in (("intra_socket", "socket"), ("inter_socket", "x-socket"),
                         ("inter_node", "node")):
        lv = c.level(level)
        row[f"{short} µs"] = lv.latency_us if lv else None
        row[f"{short} MB/s"] = lv.bandwidth_mbs if lv else None
    return row


def cmd_platforms(args: argparse.Namespace) -> int:
    rows = [_row(name) for name in builtin_names()]
    if args.format == "json":
        options.emit(args, json.dumps(rows, indent=1))
        return 0
    text = render(rows, list(rows[0]), args.format)
    if args.format == "table":
        text += ("\n\nPer level: one-way ping-pong latency (µs) and bandwidth (MB/s). Details: "
                 "`collbench platform show NAME`; your own: `collbench platform new FILE`.")
    options.emit(args, text)
    return 0


def cmd_new(args: argparse.Namespace) -> int:
    from collbench.platforms.model import parse_cluster
    from collbench.platforms.template import Shape, new_template

    if args.file.exists() and not args.force:
        raise UserError(f"{args.file}: already exists; add --force to overwrite it")
    if args.topology not in TOPOLOGIES:
        raise choice_error("--topology", "topology", args.topology, TOPOLOGIES)
    name = args.name or args.file.stem
    per = args.sockets_per_package
    if per is not None and (per >= args.sockets or args.sockets % per):
        raise UserError(f"--sockets-per-package: {per} is not valid; valid: a divisor of "
                        f"--sockets ({args.sockets}) below it")
    text = new_template(Shape(name, args.nodes, args.sockets, args.cores, args.topology,
                              args.nodes_per_leaf, per))
    cluster = parse_cluster(text, str(args.file))  # the template must load as written
    atomic_write(args.file, text.encode(), mode=0o644)
    print(f"wrote {args.file}: {cluster.summary()}; edit the per-level numbers, or fill them "
          f"with `collbench platform calibrate RESULTS -o {args.file} --from {args.file}`")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    cluster, text, path = load_cluster(args.platform)
    print(f"# {cluster.name}: {cluster.summary()} — {path}")
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_xml(args: argparse.Namespace) -> int:
    from collbench.platforms.simgrid_xml import platform_xml

    cluster, _, _ = load_cluster(args.platform)
    xml = platform_xml(cluster)
    if args.out:
        atomic_write(args.out, xml.encode(), mode=0o644)
        print(f"wrote {args.out}: {cluster.summary()}")
    else:
        sys.stdout.write(xml)
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from collbench.analyse.modeldata import pingpong_medians
    from collbench.commands.simulated_multipair import fitted_port, measured_pairs
    from collbench.platforms.model import parse_cluster
    from collbench.platforms.template import Shape, cluster_toml, new_template

    if args.out.exists() and not args.force and args.out != args.base:
        raise UserError(f"{args.out}: already exists; add --force to overwrite it")
    results_folder.check(args, "platform calibrate")
    if args.inter_package is not None and not args.inter_package.is_dir():
        raise UserError(f"--inter-package: {args.inter_package}: not a results folder; valid: "
                        "a folder of ping-pong rows between sockets of different packages")
    if args.load_barrier:  # a typo is one line before any simulation
        from collbench.platforms.load import parse_barrier
        parse_barrier(args.load_barrier)
    measured, notes = (_p2p_points(args.results) if args.results.is_file()
                       else pingpong_medians(args.results))
    probed = _probed(args, measured, notes)
    package = _package_points(args.inter_package, measured)
    overheads = _p2p_overheads(args.overheads or (args.results if args.results.is_file()
                                                  else None), notes, explicit=args.overheads)
    per_size: dict[str, list[tuple[int, float, float]]] = {}
    if args.overhead_share:
        if args.overheads is not None or args.collectives is not None:
            raise UserError("--overhead-share: not with --overheads or --collectives; valid: "
                            "one source of per-message overheads")
        from collbench.platforms.calibrate import shared_overheads

        per_size = shared_overheads(measured, _shares(args.overhead_share),
                                    "--overhead-share", args.sender_share, args.eager_limit)
        notes.append("per-message overheads (o_s/o_r) as a share of each level's ping-pong "
                     f"up to {args.eager_limit} B, the smallest's above: " + ", ".join(
                         f"{lv} {rows[0][1]:.3g}/{rows[0][2]:.3g} µs at {min(measured[lv])} B"
                         + (f", {rows[-2][1]:.3g}/{rows[-2][2]:.3g} µs at {rows[-2][0]} B"
                            if len(rows) > 1 else "")
                         for lv, rows in per_size.items()))
    elif args.sender_share != 0.5 or (args.eager_limit != 4096 and args.probe is None):
        raise UserError("--sender-share/--eager-limit: only with --overhead-share (and "
                        "--eager-limit with --probe); valid: add --overhead-share LEVEL=SHARE")
    if args.base is None:
        name = args.name or args.out.stem
        base = parse_cluster(new_template(Shape(name)), "template")
        notes.append("node/socket/core counts and topology are the template's (2 × 2 × 12, "
                     f"flat): edit them in {args.out}, or pass --from")
    else:
        base, _, _ = load_cluster(args.base)
        if args.name:
            base = base.model_copy(update={"name": args.name})
    base = _with_sharing(base, args, notes)
    multi_pair = measured_pairs(args, base, notes)  # one line before any simulation
    base = base.model_copy(update={"source": f"ping-pongs measured in {args.results} "
                                             f"({', '.join(sorted(measured))}); the rest from "
                                             f"{base.name}"})
    # every simulation is a campaign, kept under --simulations DIR (or a temporary folder)
    with results_folder.root(args, "collbench-calibrate-") as root:
        if package is not None:  # a one-line error before any simulation
            _check_packages(base, args.inter_package)
            base = base.model_copy(update={"levels": base.levels.model_copy(
                update={"inter_package": None})})  # refitted below
        result, table = _calibrated(args, measured, base, overheads, root, per_size)
        if package is not None:
            from collbench.platforms.calibrate import with_package
            result.cluster = with_package(result.cluster, package, measured["inter_socket"],
                                          notes)
        if args.load_barrier:
            result.cluster = _loaded(args, result.cluster, root, notes)
        else:
            _dropped_load(base, measured, notes)
        if multi_pair is not None:  # last: the load slows the pairs too
            result.cluster = fitted_port(args, result.cluster, multi_pair, root, notes)
    if probed:
        result.cluster = result.cluster.model_copy(update={"calibration": {
            **result.cluster.calibration, "probe": str(args.probe),
            "probe_ratios": [f"{lv} {m}={r:.4g}" for lv, rs in probed.items()
                             for m, r in rs.items()]}})
    if table:
        print(table)
    header = (f"# {result.cluster.name}: calibrated by `collbench platform calibrate` from "
              f"{args.results}\n# (Hockney fit per level + per-level size factors; the "
              "simulated ping-pong is checked\n# against the measured one: see [calibration]).")
    atomic_write(args.out, cluster_toml(result.cluster, header).encode(), mode=0o644)
    rows = [{"level": lv, "size_bytes": s, "measured_us": round(t, 4),
             "simulated_us": round(result.simulated[lv][s], 4),
             "error_pct": round(result.errors_pct()[lv][s], 2)}
            for lv, pts in result.measured.items() for s, t in pts.items()]
    print(render(rows, list(rows[0]), "table"))
    for lv in result.measured:
        level = result.cluster.level(lv)
        assert level is not None
        over = (f"; overheads o_s {level.send_overhead_us:.3g} µs, o_r "
                f"{level.recv_overhead_us:.3g} µs per message" if level.overheads() else "")
        print(f"{lv}: latency {level.latency_us:.4g} µs, bandwidth {level.bandwidth_mbs:.6g} "
              f"MB/s (Hockney fit){over}")
    for note in notes + result.notes:
        print(f"note: {note}")
    print(f"wrote {args.out}: simulated ping-pong within {result.max_error_pct():.2f} % of "
          "the measured one at every size")
    return 0


def _probed(args: argparse.Namespace, measured: dict[str, dict[int, float]],
            notes: list[str]) -> dict[str, dict[int, float]]:
    """--probe: `measured` scaled in place above the eager limit by the 2-rank probe's
    ratios (platforms/calibrate.with_probe); the ratios per level, for [calibration]."""
    if args.probe is None:
        return {}
    from collbench.analyse.modeldata import probe_medians
    from collbench.platforms.calibrate import with_probe

    if not args.probe.is_dir():
        raise UserError(f"--probe: {args.probe}: not a results folder; valid: a folder of "
                        "2-rank bcast/scatter/gather rows")
    before = {lv: dict(pts) for lv, pts in measured.items()}
    measured.update(with_probe(measured, probe_medians(args.probe), args.eager_limit,
                               str(args.probe), notes))
    return {lv: {m: t / before[lv][m] for m, t in pts.items() if t != before[lv][m]}
            for lv, pts in measured.items() if pts != before[lv]}


def _package_points(folder: Path | None,
                    measured: dict[str, dict[int, float]]) -> dict[int, float] | None:
    """The --inter-package folder's ping-pong medians (rows ingested with --mapping socket,
    one size is enough: the level is inter_socket's plus the measured difference)."""
    from collbench.analyse.modeldata import pingpong_medians

    if folder is None:
        return None
    found, _ = pingpong_medians(folder, min_sizes=1)
    if set(found) != {"inter_socket"}:
        raise UserError(f"--inter-package: {folder}: ping-pongs at {', '.join(sorted(found))};"
                        " valid: rows with mapping socket only (two sockets of one node in "
                        "different packages)")
    if "inter_socket" not in measured:
        raise UserError("--inter-package: the results have no inter-socket ping-pong; valid: "
                        "results with mapping socket rows too (inter_package is inter_socket "
                        "plus the measured difference)")
    return found["inter_socket"]


def _check_packages(base: Cluster, folder: Path) -> None:
    if base.packages_per_node < 2:
        raise UserError(f"--inter-package: {folder}: --from {base.name} has one package per "
                        "node; valid: a description with sockets_per_package below "
                        "sockets_per_node (`platform new --sockets-per-package N`)")


def _loaded(args: argparse.Namespace, cluster: Cluster, root: Path,
            notes: list[str]) -> Cluster:
    """`cluster` with the load term fitted to --load-barrier (after the ping-pong fit: the
    ping-pong keeps two cores busy, where the term is 0)."""
    from collbench.catalog.mpi import find_mpi
    from collbench.commands.simulated_barrier import BarrierSimulations
    from collbench.platforms.load import fit_load, parse_barrier

    barrier = parse_barrier(args.load_barrier)
    loaded, _ = fit_load(cluster, barrier,
                         BarrierSimulations(root, find_mpi(), args.resume), notes)
    return loaded.model_copy(update={"calibration": {
        **cluster.calibration, "load_barrier_min_us": [f"{n}={us:g}" for n, us in
                                                       sorted(barrier.items())]}})


def _dropped_load(base: Cluster, measured: dict[str, dict[int, float]],
                  notes: list[str]) -> None:
    """Say so when a refitted level loses the --from description's load term (fitted
    against the old ping-pong, it is refitted only with --load-barrier)."""
    lost = [lv for lv in measured if (level := base.level(lv)) is not None
            and level.load_latency_us]
    if lost:
        notes.append(f"the load term of {base.name} on {', '.join(lost)} is not kept (it was "
                     "fitted with the former ping-pong): give --load-barrier to fit it again")


def _with_sharing(base: Cluster, args: argparse.Namespace, notes: list[str]) -> Cluster:
    """`base` with --receiver-copies / --socket-bandwidth / --send-queue / --load-bandwidth
    in its [memory] table and --rendezvous in its [smpi] one (terms a ping-pong cannot see:
    the calibration's ping-pong is the same with or without them)."""
    from collbench.platforms.model import Memory

    update: dict[str, Any] = {}
    if args.receiver_copies:
        update["receiver_copies"] = True
    if args.socket_bandwidth is not None:
        update["socket_bandwidth_mbs"] = args.socket_bandwidth
    if args.send_queue:
        update["send_queue"] = True
    if args.load_bandwidth:
        if not args.load_barrier and not any(
                lv is not None and lv.load_latency_us
                for lv in (base.level(n) for n in PLATFORM_LEVELS)):
            raise UserError("--load-bandwidth: no load term to scale the bandwidth by; "
                            "valid: with --load-barrier, or --from a description with "
                            "load_latency_us")
        update["load_bandwidth"] = True
    if args.rendezvous is not None:  # the protocol switch, before the ping-pong is fitted
        base = base.model_copy(update={"smpi": base.smpi.model_copy(
            update={"rendezvous_bytes": args.rendezvous})})
    if not update:
        return base
    memory = Memory.model_validate({**base.memory.model_dump(), **update})
    notes.append("sharing: " + ", ".join(
        [*(["a sender's concurrent single copies in parallel (receiver_copies)"]
           if memory.receiver_copies else []),
         *([f"{memory.socket_bandwidth_mbs:g} MB/s shared per socket and direction"]
           if memory.socket_bandwidth_mbs else []),
         *(["a sender's rendezvous sends leave one after another (send_queue)"]
           if memory.send_queue else []),
         *(["a loaded level's bytes slow down as its latency grows (load_bandwidth)"]
           if memory.load_bandwidth else [])]))
    return base.model_copy(update={"memory": memory})


def _calibrated(args: argparse.Namespace, measured: dict[str, dict[int, float]],
                base: Cluster, overheads: dict[str, tuple[float, float]],
                root: Path, per_size: dict[str, list[tuple[int, float, float]]]
                ) -> tuple[Calibration, str]:
    """The calibration, and with --collectives the table of the candidates tried."""
    from collbench.catalog.mpi import find_mpi
    from collbench.commands.simulated_pingpong import Simulations
    from collbench.platforms.calibrate import calibrate

    mpi = find_mpi()  # whose algorithm names the simulation's catalogue takes
    if args.collectives is None:
        return calibrate(measured, base, Simulations(root, mpi, args.resume),
                         str(args.results), overheads, per_size), ""
    from collbench.commands import calibrate_collectives as fit

    result, trials, best = fit.fit(
        args.collectives, measured, overheads,
        lambda over, folder: calibrate(measured, base, Simulations(folder, mpi, args.resume),
                                       str(args.results), over),
        fit.Folders(root, mpi, args.resume))
    return result, render(
        [{"candidate": t.label, "chosen": i == best,
          "overheads (o_s/o_r µs)": ", ".join(f"{lv} {a:.3g}/{b:.3g}"
                                              for lv, (a, b) in t.overheads.items()),
          "points": t.points, "median error %": round(t.median_abs_pct, 2),
          "p95 error %": round(t.p95_abs_pct, 2)} for i, t in enumerate(trials)],
        ["candidate", "chosen", "overheads (o_s/o_r µs)", "points", "median error %",
         "p95 error %"], "table")


P2P_LEVELS = {"core": "intra_socket", "socket": "inter_socket", "node": "inter_node"}


def _p2p_points(path: Path) -> tuple[dict[str, dict[int, float]], list[str]]:
    """Per-level one-way latencies from a .p2p.toml model, at 0 B and 1 B to 4 MiB (powers
    of 2), as if measured: the calibration then fits and checks them as usual."""
    from collbench.models.p2pfile import read_p2p

    model = read_p2p(path, required_levels=("core",))
    sizes = [0] + [1 << k for k in range(23)]
    measured = {P2P_LEVELS[lv]: {m: lm.time_us(m) for m in sizes}
                for lv, lm in model.levels.items()}
    notes = [f"per-level numbers from the model {path} (levels "
             f"{', '.join(sorted(model.levels))}), evaluated at {len(sizes)} sizes"]
    return measured, notes


def _shares(items: list[str]) -> dict[str, float]:
    from collbench.platforms.model import LEVELS

    out: dict[str, float] = {}
    for item in items:
        level, eq, value = item.partition("=")
        try:
            share = float(value)
        except ValueError:
            share = math.nan
        if not eq or level not in LEVELS or not math.isfinite(share):
            raise UserError(f"--overhead-share: {item!r} is not valid; valid: LEVEL=SHARE with "
                            f"LEVEL one of {', '.join(LEVELS)}, e.g. intra_socket=0.9")
        out[level] = share
    return out


def _p2p_overheads(path: Path | None, notes: list[str],
                   explicit: Path | None) -> dict[str, tuple[float, float]]:
    """(o_s, o_r) per platform level from a .p2p.toml's [levels.<level>.loggp] tables."""
    from collbench.models.p2pfile import read_p2p

    if path is None:
        return {}
    model = read_p2p(path, required_levels=())
    found = {P2P_LEVELS[lv]: (lm.loggp.o_s_us, lm.loggp.o_r_us)
             for lv, lm in model.levels.items() if lm.loggp is not None and lv in P2P_LEVELS}
    if not found and explicit is not None:
        raise UserError(f"{path}: --overheads: no [levels.<level>.loggp] table; valid: a "
                        "file written by `collbench model loggp`")
    if found:
        notes.append(f"per-message overheads (LogGP o_s, o_r) from {path}: "
                     + ", ".join(f"{lv} {s:.3g}/{r:.3g} µs" for lv, (s, r) in found.items()))
    return found


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("platforms", help="built-in simulated clusters and their parameters")
    s.add_argument("--format", choices=FORMATS, default="table",
                   help="output format (default: %(default)s)")
    options.add_table_output(s)
    s.set_defaults(func=cmd_platforms)

    p = sub.add_parser("platform", help="describe, inspect and calibrate a simulated cluster")
    psub = p.add_subparsers(dest="platform_command", required=True)

    s = psub.add_parser("new", help="write a commented cluster description to fill in")
    s.add_argument("file", type=Path, help="the cluster TOML to write")
    s.add_argument("--name", help="platform name (default: the file name)")
    s.add_argument("--nodes", type=_positive, default=2,
                   help="nodes of the cluster (default: %(default)s)")
    s.add_argument("--sockets", type=_positive, default=2, help="sockets per node")
    s.add_argument("--cores", type=_positive, default=12, help="cores per socket")
    s.add_argument("--topology", default="flat", help=f"one of: {', '.join(TOPOLOGIES)}")
    s.add_argument("--nodes-per-leaf", type=_positive, default=16,
                   help="fat-tree: nodes under one leaf switch")
    s.add_argument("--sockets-per-package", type=_positive, metavar="N",
                   help="group a node's sockets into packages of N consecutive sockets "
                        "(processors; adds an inter_package level; default: one package)")
    s.add_argument("--force", action="store_true", help="overwrite an existing file")
    s.set_defaults(func=cmd_new)

    s = psub.add_parser("show", help="print a platform's description (built-in or file)")
    s.add_argument("platform", help="a built-in platform's name or a cluster TOML")
    s.set_defaults(func=cmd_show)

    s = psub.add_parser("xml", help="write the SimGrid platform file collbench generates")
    s.add_argument("platform", help="a built-in platform's name or a cluster TOML")
    s.add_argument("-o", "--out", type=Path, help="file to write (default: standard output)")
    s.set_defaults(func=cmd_xml)

    s = psub.add_parser("calibrate", help="fill per-level latency/bandwidth from measured "
                                          "ping-pongs in a results folder")
    s.add_argument("results", type=Path, help="results folder with ping-pong rows, or a "
                                              ".p2p.toml model (docs/models.md)")
    s.add_argument("-o", "--out", type=Path, required=True, help="cluster TOML to write")
    s.add_argument("--from", dest="base", type=_platform,
                   help="description giving nodes, sockets, cores and topology (built-in "
                        "or file; default: the `platform new` template)")
    s.add_argument("--name", help="platform name (default: the output file name)")
    s.add_argument("--overheads", type=Path, metavar="P2P_TOML",
                   help="a .p2p.toml from `collbench model loggp`: its per-level LogGP "
                        "overheads (o_s, o_r) are charged per message in the simulation "
                        "(default: those of RESULTS when it is such a file)")
    s.add_argument("--overhead-share", action="append", default=[], metavar="LEVEL=SHARE",
                   help="charge this share (0-0.9) of LEVEL's ping-pong time as CPU time per "
                        "message, per size up to --eager-limit and the smallest size's "
                        "above (shared memory: the CPUs do the whole transfer); repeatable")
    s.add_argument("--sender-share", type=options.fraction, default=0.5, metavar="F",
                   help="with --overhead-share: the sender's part of each message's "
                        "overheads, the receiver's being 1-F (default: 0.5)")
    s.add_argument("--eager-limit", type=options.count(0, 1 << 30), default=4096,
                   metavar="BYTES",
                   help="with --overhead-share: the largest message the overheads grow "
                        "with; with --probe: the largest left as the ping-pong measured it "
                        "(Open MPI's shared-memory eager limit, btl_sm/vader_eager_limit;"
                        " default: 4096)")
    s.add_argument("--receiver-copies", action="store_true",
                   help="single-copy transfers are made by the receiver (Open MPI's shared "
                        "memory above its eager limit with CMA/XPMEM/KNEM, InfiniBand "
                        "rendezvous reads): a sender's concurrent messages do not share its "
                        "link ([memory] receiver_copies; docs/simgrid.md)")
    s.add_argument("--socket-bandwidth", type=options.number(
                       lambda v: v == 0 or 1e-3 <= v <= 1e7, "0 (no limit) or 0.001 to 1e+07"),
                   metavar="MBPS",
                   help="bandwidth (MB/s) all traffic leaving one socket shares (and apart "
                        "all traffic entering it): osu_mbw_mr with every core of a socket "
                        "sending off it, or the processor's fabric bandwidth; 0 = no limit "
                        "([memory] socket_bandwidth_mbs; default: the --from description's)")
    s.add_argument("--multi-pair", type=Path, metavar="RESULTS",
                   help="a results folder of multi-pair bandwidth (collective mbw_mr, or "
                        "osu_mbw_mr / IMB Uniband output ingested; --map-by core, the "
                        "senders filling "
                        "whole sockets of one node): the socket bandwidth is fitted so that "
                        "the simulated aggregate is the measured one at the largest size "
                        "(docs/simgrid.md, \"Multi-pair bandwidth\"); not with "
                        "--socket-bandwidth")
    s.add_argument("--send-queue", action="store_true",
                   help="a sender's transfers from the rendezvous threshold on "
                        "leave one after another, at the socket bandwidth within a node and "
                        "the inter-node bandwidth between nodes (a NIC's send queue, a "
                        "socket's one port): a root's fan-out completes in order ([memory] "
                        "send_queue; docs/simgrid.md, \"Sharing\")")
    s.add_argument("--inter-package", type=Path, metavar="RESULTS",
                   help="a results folder of ping-pongs between sockets of different "
                        "packages (ingested with --mapping socket; one size is enough): "
                        "the inter_package level is inter_socket's plus the measured "
                        "difference (the --from description needs sockets_per_package)")
    s.add_argument("--rendezvous", type=options.count(1, 1 << 30), metavar="BYTES",
                   help="blocking sends of BYTES or more wait for their receive, as the MPI's "
                        "rendezvous does (Open MPI's shared-memory eager limit: 4096; [smpi] "
                        "rendezvous_bytes; default: the --from description's, or SMPI's "
                        "65536)")
    s.add_argument("--probe", type=Path, metavar="RESULTS",
                   help="a results folder of 2-rank bcast/scatter/gather (one message, timed "
                        "as a collective run times it; --map-by gives the level): above "
                        "--eager-limit, each probed level's ping-pong is scaled by the "
                        "probe's ratio to it before the fit (docs/simgrid.md, \"Probe\")")
    s.add_argument("--load-barrier", action="append", metavar="NPROCS=US",
                   help="a barrier's min_us (OSU: the fastest rank's mean) at NPROCS ranks "
                        "--map-by core on the machine, repeated for a few counts: fits the "
                        "inter_socket latency a message gains when that many cores of a "
                        "node are busy (load_latency_us; each fit simulates the barrier; "
                        "docs/simgrid.md)")
    s.add_argument("--load-bandwidth", action="store_true",
                   help="the load term slows a level's bytes too: by 1 + its extra latency / "
                        "the level's latency at that many busy cores (a copy moves its cache "
                        "lines at the loaded latency; [memory] load_bandwidth; "
                        "docs/simgrid.md, \"The load slows bytes too\"); with --load-barrier")
    s.add_argument("--collectives", type=Path, metavar="RESULTS",
                   help="a results folder of collectives measured on the machine: the "
                        "per-message overheads are chosen so that simulating them comes "
                        "closest (a few candidates, each simulated; docs/simgrid.md)")
    results_folder.add_options(s, "--simulations", "the simulations' campaigns (pingpong-N "
                               "per ping-pong simulated, barrier-N per barrier with "
                               "--load-barrier; with --collectives, candidate-N/ holding "
                               "those and collectives)")
    s.add_argument("--force", action="store_true", help="overwrite an existing file")
    s.set_defaults(func=cmd_calibrate)


_positive = options.count(1, 65_536)  # nodes, sockets, cores of a simulated cluster


def _platform(text: str) -> Path | str:
    return text if text in builtin_names() else Path(text)

