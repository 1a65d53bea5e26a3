"""Predicting points: a p2p model, a placement, a collective, an algorithm and a size in,
latencies and tidy rows out. The one prediction behind `collbench model predict`,
`tune --model`, `compare --against MODEL` and the report's models section.

    topology(nprocs, nodes, ppn, mapping, shape) -> Topology   where a point's ranks sat
    placement(nprocs, nodes, ppn) -> (nodes, ppn)       the allocation a prediction asks for
    predict_point(model, topo, collective, algorithm, size) -> (avg, min, max) µs
    prediction_rows(model, collective, algorithms, topo, sizes, ...) -> Predicted
    launches(model, Request, name, model_name) -> ([(launch id, rows)], notes)

Predicted rows (`source = backend = "model"`) are read by every other command like
measurements; "default" is predicted as what Open MPI runs for it in the series asked for
(`han_plan.default_choice`): coll/tuned's fixed decision on the whole communicator
(4.1 everywhere, 5.0 on one node), or under 5.0 on 2 or more nodes coll/han's hierarchy
(models.han), whose rows say component "han". Pure: no results folder is read or written
here (`tune.model.write_predictions`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from collbench.catalog import han_plan, ompi_decisions
from collbench.catalog.components import MODELLED, MODELLED_HAN
from collbench.errors import UserError, choice_error
from collbench.models import han
from collbench.models.algorithms import ALGORITHMS, detail
from collbench.models.networks import DEFAULT_NETWORK, NETWORKS, Network, network
from collbench.models.p2p import P2PModel
from collbench.models.topology import MAPPINGS, Topology
from collbench.records import make_row

MODEL_SOURCE: Final = "model"
DEFAULT: Final = "default"
DECISIONS_VERSION: Final = "5.0"
# The longest time a prediction may claim (µs; 11.6 days): a model file's numbers are
# bounded (p2pfile), but a slow network times a large size times many steps still gives
# times no run takes, and beyond 1e308 they are inf.
MAX_US: Final = 1e12


# --- the machine --------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """Sockets per node and cores per socket of the machine a folder ran on (None: not
    known; enough cores for the ranks per node are assumed)."""

    sockets: int = 2
    cores_per_socket: int | None = None
    sockets_per_package: int | None = None  # a platform's packages (models price them apart)


def topology(nprocs: int, nodes: int | None, ppn: int | None, mapping: str | None,
             shape: Shape = Shape(), where: str = "topology") -> Topology:
    """Where the ranks of one measurement sat (oversubscribed ranks share cores)."""
    nodes = nodes if nodes and nodes > 0 else 1
    mapping = mapping or ("node" if nodes > 1 else "core")
    if mapping not in MAPPINGS:
        raise choice_error(where, "mapping", mapping, MAPPINGS)
    ppn = ppn if ppn and ppn > 0 else -(-nprocs // nodes)
    ppn = max(ppn, -(-nprocs // nodes))
    sockets = max(1, shape.sockets)
    cores = max(shape.cores_per_socket or 1, -(-ppn // sockets))
    per_package = shape.sockets_per_package
    if per_package is not None and (per_package >= sockets or sockets % per_package):
        per_package = None  # not this machine's grouping: one package
    return Topology(nprocs, nodes, ppn, sockets, cores, mapping, per_package)


def placement(nprocs: int, nodes: int | None, ppn: int | None) -> tuple[int, int]:
    """The nodes × ranks per node a prediction of `nprocs` ranks asks for: the ones given,
    the others worked out (one node unless `ppn` needs more, ranks spread evenly)."""
    nodes = nodes or (-(-nprocs // ppn) if ppn else 1)
    ppn = ppn or -(-nprocs // nodes)
    if nprocs > nodes * ppn:
        raise UserError(f"--nprocs {nprocs} does not fit on {nodes} nodes × {ppn} ranks; "
                        f"valid: at most {nodes * ppn}, or more --nodes")
    return nodes, ppn


# --- one point ----------------------------------------------------------------------------

def modelled(collective: str, algorithm: str) -> bool:
    return algorithm in ALGORITHMS.get(collective, ()) or (
        algorithm == DEFAULT and collective in ALGORITHMS
        and ompi_decisions.has_fixed_decision(DECISIONS_VERSION, collective))


def default_algorithm(collective: str, nprocs: int, size: int,
                      version: str = DECISIONS_VERSION) -> str:
    """What Open MPI's fixed decision rules (coll/tuned) run for "default"."""
    d = ompi_decisions.decide_osu(version, collective, nprocs, size)
    return ompi_decisions.algorithm_name(version, collective, d.algorithm_id)


def default_choice(topo: Topology, collective: str, size: int,
                   version: str = DECISIONS_VERSION) -> han_plan.DefaultChoice:
    """What "default" runs where `topo` seats the ranks: coll/tuned's decision, or coll/han's
    hierarchy (5.0, 2 or more nodes, the same number of ranks on each)."""
    nodes, ppn = _occupied(topo)
    return han_plan.default_choice(version, collective, topo.nprocs, size, nodes, ppn)


# Composite algorithms run the communicator's own collectives: what the fixed decision
# rules pick at the inner message size, unsegmented; a chain gets fanout 1 (a pipeline).
_COMPOSITES: Final = {("allreduce", "nonoverlapping"): (("reduce", 1), ("bcast", 1)),
                      ("allgather", "linear"): (("gather", 1), ("bcast", 0))}


def inner_algorithms(collective: str, algorithm: str, nprocs: int,
                     size: int) -> dict[str, str] | None:
    """The inner algorithms a composite runs under Open MPI's fixed decision rules (the
    bcast of allgather linear carries all P blocks); None for other algorithms."""
    parts = _COMPOSITES.get((collective, algorithm))
    if parts is None or nprocs < 2:
        return None
    out = {}
    for inner, per_rank in parts:
        name = default_algorithm(inner, nprocs, size if per_rank else size * nprocs)
        out[inner] = "pipeline" if name == "chain" else name
    return out


def predict_point(model: P2PModel, topo: Topology, collective: str, algorithm: str,
                  size: int, segsize: int = 0, fanout: int = 0,
                  net: Network = NETWORKS[DEFAULT_NETWORK],
                  version: str = DECISIONS_VERSION) -> tuple[float, float, float]:
    """(avg over ranks, min, max) predicted latency in µs."""
    net = _with_rendezvous(model, net)
    alg = algorithm
    if algorithm == DEFAULT:  # the rules' choice, run with fanout 0: a chain is a pipeline
        choice = default_choice(topo, collective, size, version)
        if choice.han is not None:
            return han.compose(choice.han, topo, _sub_cost(model, net, version))
        alg = _fanout0(collective, choice.algorithm)
    # the barrier between iterations: the fixed rules' one, or the barrier being measured
    barrier = None if not net.loop or topo.nprocs < 2 else alg if collective == "barrier" \
        else default_algorithm("barrier", topo.nprocs, 0, version)
    inner = inner_algorithms(collective, alg, topo.nprocs, size)
    pred = detail(model, topo, collective, alg, size, segsize=segsize, barrier=barrier,
                  inner=inner,
                  fanout=fanout or None, radix=fanout or None, overlap=net.overlap,
                  rendezvous=net.rendezvous, matched=net.matched, shared=net.shared)
    return pred.avg_us, pred.min_us, pred.max_us


def _fanout0(collective: str, algorithm: str) -> str:
    return "pipeline" if algorithm == "chain" and collective in ("bcast", "reduce") \
        else algorithm


def _sub_cost(model: P2PModel, net: Network, version: str) -> han.Cost:
    """The cost of one of han's calls on its sub-communicator (no barrier loop: han's calls
    follow each other inside one timed collective)."""
    def cost(call: han_plan.SubCall, topo: Topology) -> tuple[float, float, float]:
        alg = _fanout0(call.collective, call.algorithm)
        pred = detail(model, topo, call.collective, alg, call.size_bytes,
                      segsize=call.segsize, inner=inner_algorithms(
                          call.collective, alg, topo.nprocs, call.size_bytes),
                      overlap=net.overlap, rendezvous=net.rendezvous, matched=net.matched,
                      shared=net.shared)
        return pred.avg_us, pred.min_us, pred.max_us
    return cost


# --- predictions as rows ------------------------------------------------------------------

def resolve_algorithms(collective: str, requested: str) -> list[str]:
    """'all' (default plus every modelled algorithm) or a comma list, checked."""
    if collective not in ALGORITHMS:
        raise choice_error("--collective", "collective", collective, ALGORITHMS)
    valid = (DEFAULT, *ALGORITHMS[collective])
    if requested.strip() == "all":
        return list(valid)
    names = [a.strip() for a in requested.split(",") if a.strip()]
    if not names:
        raise UserError(f"--algorithms {requested!r} is not valid; valid: all, or a comma "
                        f"list of {', '.join(valid)}")
    for name in names:
        if name not in valid:
            raise choice_error(f"--algorithms ({collective})", "algorithm", name, valid)
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class Predicted:
    rows: list[dict[str, Any]]
    notes: list[str]


def unbounded(*values: float) -> float | None:
    """The first of `values` that is not a time a run can take (not finite, negative or
    beyond MAX_US), None when all are."""
    return next((v for v in values if not (math.isfinite(v) and 0 <= v <= MAX_US)), None)


def beyond(value: float) -> str:
    return (f"{value:.6g} us is beyond the bound of 0 to {MAX_US:g} us (no run takes that "
            "long: the model's latencies and bandwidths are too slow for this size)")


def prediction_rows(model: P2PModel, collective: str, algorithms: Sequence[str],
                    topo: Topology, sizes: Iterable[int], *, campaign: str, launch_id: str,
                    model_name: str, explicit: bool = True,
                    net: Network = NETWORKS[DEFAULT_NETWORK],
                    version: str = DECISIONS_VERSION) -> Predicted:
    """Predicted rows, one per algorithm and size. An algorithm that cannot run at this
    process count is an error when named (`explicit`), else left out with a note.

    A prediction beyond MAX_US (or not finite) is stored as a failed row with the reason,
    not refused: the other points of the request are sound, and a failed row is what
    show, compare and tune already leave out (the model has no time for that point, as a
    failed measurement has none)."""
    nodes_used, ppn_used = _occupied(topo)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    failed: list[str] = []
    sizes = sorted(set(sizes))
    for alg in algorithms:
        try:
            got = [(s, predict_point(model, topo, collective, alg, s, net=net,
                                     version=version)) for s in sizes]
        except UserError as e:
            if explicit:
                raise
            notes.append(f"{collective} {alg} at np={topo.nprocs} left out: {e}")
            continue
        ident = 0 if alg == DEFAULT else ompi_decisions.ALGORITHMS[collective].index(alg) + 1
        for size, (avg, lo, hi) in got:
            metrics: dict[str, Any] = {"model": model_name, "stat": "avg over ranks",
                                       "network": net.name}
            component = MODELLED
            if alg == DEFAULT:
                choice = default_choice(topo, collective, size, version)
                metrics["runs"] = choice.han.describe() if choice.han else choice.algorithm
                component = MODELLED_HAN if choice.han else MODELLED
            bad = unbounded(avg, lo, hi)
            if bad is not None:
                failed.append(f"{alg} at {size} B")
            rows.append(make_row(
                campaign=campaign, launch_id=launch_id, repetition=0, backend=MODEL_SOURCE,
                source=MODEL_SOURCE, mpi="openmpi", mpi_version=version,
                collective=collective, component=component, algorithm=alg,
                algorithm_id=ident, segsize=0,
                fanout=0, selection="none", params="{}", nprocs=topo.nprocs,
                nodes=nodes_used, ppn=ppn_used, mapping=topo.mapping,
                binding=None, size_bytes=size, iterations=1, warmup=0,
                avg_us=_round(avg, bad), min_us=_round(lo, bad), max_us=_round(hi, bad),
                median_us=_round(avg, bad), metrics=json.dumps(metrics, sort_keys=True),
                validated=None, status="ok" if bad is None else "failed",
                error=None if bad is None else f"predicted {beyond(bad)}"))
    if failed:
        notes.append(f"{collective} at np={topo.nprocs}: {len(failed)} prediction(s) beyond "
                     f"{MAX_US:g} us stored as failed ({', '.join(failed[:3])}"
                     f"{' ...' if len(failed) > 3 else ''})")
    return Predicted(rows, notes)


def _occupied(topo: Topology) -> tuple[int, int]:
    """The nodes the ranks sit on and the most ranks on one of them: a row records where
    its ranks ran, which is less than the allocation (`placement`) when they do not fill it
    (4 ranks with --ppn 8: ppn 4; --map-by node over 4 nodes: 1 per node)."""
    per_node: dict[int, int] = {}
    for p in topo.places:
        per_node[p.node] = per_node.get(p.node, 0) + 1
    return len(per_node), max(per_node.values())


def _round(v: float, bad: float | None = None) -> float | None:
    return None if bad is not None else float(f"{v:.6g}")


# --- a request: collectives × process counts × one placement ------------------------------

@dataclass(frozen=True)
class Request:
    """What to predict: collectives × process counts × one placement."""

    collectives: tuple[str, ...]
    nprocs: tuple[int, ...]
    ppn: int | None
    nodes: int | None
    mapping: str
    sizes: tuple[int, ...]
    algorithms: str = "all"
    shape: Shape = field(default_factory=Shape)
    network: str = DEFAULT_NETWORK
    version: str = DECISIONS_VERSION  # the Open MPI series whose "default" is predicted


def launches(model: P2PModel, req: Request, name: str, model_name: str
             ) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[str]]:
    """The predicted rows of a request, one launch per collective and process count (none
    for a launch whose algorithms were all left out), and the notes of what was left out."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    notes: list[str] = []
    for coll in req.collectives:
        algs = resolve_algorithms(coll, req.algorithms)
        for n in req.nprocs:
            nodes, ppn = placement(n, req.nodes, req.ppn)
            topo = topology(n, nodes, ppn, req.mapping, req.shape, "model")
            lid = f"model-{coll}-np{n}-{req.mapping}"
            got = prediction_rows(model, coll, algs, topo, req.sizes, campaign=name,
                                  launch_id=lid, model_name=model_name,
                                  explicit=req.algorithms.strip() != "all",
                                  net=network(req.network),
                                  version=ompi_decisions.series(req.version))
            notes += got.notes
            if got.rows:
                out.append((lid, got.rows))
    return out, notes


def _with_rendezvous(model: P2PModel, net: Network) -> Network:
    """`net` with a platform's own rendezvous threshold under "mpi" (the one its SimGrid
    runs use: [smpi] rendezvous_bytes)."""
    if model.rendezvous is None or net.name != "mpi":
        return net
    return replace(net, rendezvous=model.rendezvous)
