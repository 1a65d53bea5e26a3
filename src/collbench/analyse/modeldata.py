"""Results folders in and out of the models: ping-pong rows to point-to-point fits,
collective rows to fitted per-algorithm models and regressions, predictions to rows.

- `read_pingpongs(store)`: ping-pong rows (collective `latency`, measured or ingested) as
  `models.p2p.PingPong`, each placed on a level from its own mapping, nodes and ppn (ranks 0
  and 1 under `--map-by core` on one node share a socket; `socket` puts them on the two
  sockets of a node; `node`, or any mapping on 2 nodes, on two nodes) and labelled with its
  transport/MCA setting (the row's `params` MCA and environment settings, never mixed);
- `fit_p2p(store)`: one `P2PModel` per transport setting;
- `collective_points(store)`: collective rows, median over repetitions, with the topology
  they ran on (shape of the machine from the folder's provenance or SimGrid platform);
- `prediction_rows(...)`: predicted latencies as tidy rows (`source = backend = "model"`)
  that every other command reads like measurements; "default" is predicted as the algorithm
  Open MPI 5.0's fixed decision rules pick.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from collbench.analyse.compare import algorithm_label
from collbench.catalog import ompi_decisions
from collbench.catalog.forcing import is_forcing_env, is_forcing_mca
from collbench.errors import UserError, choice_error
from collbench.models.algorithms import ALGORITHMS, Sends, detail
from collbench.models.p2p import DEFAULT_TRANSPORT, P2PModel, PingPong, fit_model
from collbench.models.topology import MAPPINGS, Topology
from collbench.records import make_row
from collbench.store import Store

MODEL_SOURCE: Final = "model"
DEFAULT: Final = "default"
DECISIONS_VERSION: Final = "5.0"
PINGPONG: Final = ("latency", "bw")


# --- the machine --------------------------------------------------------------------------

@dataclass(frozen=True)
class Shape:
    """Sockets per node and cores per socket of the machine a folder ran on (None: not
    known; enough cores for the ranks per node are assumed)."""

    sockets: int = 2
    cores_per_socket: int | None = None


def machine_shape(store: Store) -> Shape:
    """The SimGrid platform's shape, else the measuring host's (provenance), else 2 sockets."""
    prov = store.provenance()
    sim = prov.get("simgrid")
    if isinstance(sim, dict) and isinstance(sim.get("platform_toml"), str):
        from collbench.platforms.model import parse_cluster

        try:
            cluster = parse_cluster(sim["platform_toml"], "platform")
            return Shape(cluster.sockets_per_node, cluster.cores_per_socket)
        except UserError:
            pass
    sockets, cores = prov.get("sockets"), prov.get("cores")
    if isinstance(sockets, int) and isinstance(cores, int) and sockets >= 1 and cores >= sockets:
        return Shape(sockets, cores // sockets)
    return Shape()


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
    return Topology(nprocs, nodes, ppn, sockets, cores, mapping)


# --- ping-pong rows -----------------------------------------------------------------------

def transport_label(params: str | None) -> str:
    """The transport/MCA setting of a row: its MCA and environment settings ("btl=self,sm"),
    without the ones that only force algorithms and without suite metadata; "default" when
    there are none."""
    if not params:
        return DEFAULT_TRANSPORT
    try:
        data = json.loads(params)
    except ValueError:
        return params
    if not isinstance(data, dict):
        return params
    parts = []
    for key, forcing in (("mca", is_forcing_mca), ("env", is_forcing_env)):
        table = data.get(key) or {}
        if isinstance(table, dict):
            parts += [f"{k}={v}" for k, v in sorted(table.items()) if not forcing(k)]
    return " ".join(parts) or DEFAULT_TRANSPORT


def pingpong_level(mapping: str | None, nodes: int | None, ppn: int | None,
                   where: str) -> str | None:
    """The level ranks 0 and 1 of a ping-pong talk over; None for `--map-by node` inside one
    node (no inter-node message, not a level of its own)."""
    if mapping is None and not (nodes and nodes >= 2):
        raise UserError(f"{where}: ping-pong rows without a mapping on one node; valid: ingest "
                        "OSU files with --mapping core|socket|node (or --nodes 2)")
    if mapping is not None and mapping not in MAPPINGS:
        raise choice_error(where, "ping-pong mapping", mapping, MAPPINGS)
    if mapping == "node" and not (nodes and nodes >= 2):
        return None
    topo = topology(2, min(nodes or 1, 2), ppn, mapping, Shape(2, max(ppn or 2, 2)), where)
    return topo.level(0, 1)


@dataclass
class PingPongs:
    rows: list[PingPong]
    bandwidth: dict[tuple[str, str], tuple[int, float]]  # (level, transport) -> osu_bw peak
    notes: list[str] = field(default_factory=list)


def read_pingpongs(store: Store) -> PingPongs:
    """Ping-pong rows of a folder, placed on levels and labelled by transport setting."""
    con = store.connect()
    try:
        rows = con.execute(
            "SELECT collective, mapping, nodes, ppn, params, size_bytes, avg_us, bandwidth_mbs "
            "FROM measurements WHERE collective IN ('latency', 'bw') AND status = 'ok' "
            "AND (nprocs IS NULL OR nprocs = 2)").fetchall()
    finally:
        con.close()
    out = PingPongs([], {})
    skipped = 0
    for coll, mapping, nodes, ppn, params, size, avg, bw in rows:
        level = pingpong_level(mapping, nodes, ppn, str(store.root))
        if level is None:
            skipped += 1
            continue
        transport = transport_label(params)
        if coll == "bw":
            if bw is not None and bw > 0 and size:
                best = out.bandwidth.get((level, transport))
                if best is None or bw > best[1]:
                    out.bandwidth[(level, transport)] = (int(size), float(bw))
            continue
        if avg is None or not avg > 0 or size is None:
            continue
        out.rows.append(PingPong(int(size), float(avg), level, transport))
    if skipped:
        out.notes.append(f"{skipped} ping-pong rows with --map-by node on one node skipped "
                         "(no inter-node message)")
    if out.bandwidth:
        out.notes.append("osu_bw rows give the streaming bandwidth, recorded beside the fit "
                         "(the fit is to ping-pong latency: a message at a time)")
    if not out.rows:
        raise UserError(f"{store.root}: no ok ping-pong rows (collective 'latency' at 2 "
                        "ranks); valid: a folder measured with collectives = [\"latency\"] "
                        "and map_by core/socket/node, or osu_latency files ingested with "
                        "--mapping")
    return out


def fit_p2p(store: Store, max_segments: int = 3) -> tuple[dict[str, P2PModel], list[str]]:
    """One point-to-point model per transport setting of the folder's ping-pongs."""
    data = read_pingpongs(store)
    models: dict[str, P2PModel] = {}
    for transport in sorted({r.transport for r in data.rows}):
        try:
            model = _fit_simplest(data.rows, transport, max_segments)
        except UserError as e:
            raise UserError(f"{store.root}: {e}") from None
        source = dict(model.source, results=str(store.root))
        for (level, tr), (size, bw) in sorted(data.bandwidth.items()):
            if tr == transport:
                source[f"osu_bw_{level}"] = f"{bw:g} MB/s at {size} B"
        models[transport] = P2PModel(model.levels, model.gamma_us_per_byte, source)
    return models, data.notes


REGIME_GAIN_PCT: Final = 0.5  # a further regime must cut the p95 error by this much


def _fit_simplest(rows: Sequence[PingPong], transport: str, max_segments: int) -> P2PModel:
    """fit_model per level, keeping the fewest regimes whose p95 error is within
    REGIME_GAIN_PCT points of the best (noise-free data, e.g. simulated, otherwise gets
    regimes that differ in the 9th digit)."""
    best = fit_model(rows, transport=transport, max_segments=max_segments)
    levels = dict(best.levels)
    for name, lm in best.levels.items():
        if len(lm.regimes) == 1 or lm.error is None:
            continue
        for k in range(1, len(lm.regimes)):
            fewer = fit_model([r for r in rows if r.level == name], transport=transport,
                              max_segments=k).levels[name]
            if fewer.error is not None and \
                    fewer.error.p95_abs_pct <= lm.error.p95_abs_pct + REGIME_GAIN_PCT:
                levels[name] = fewer
                break
    return P2PModel(levels, best.gamma_us_per_byte, best.source)


# --- collective rows ----------------------------------------------------------------------

@dataclass(frozen=True)
class CollectiveRow:
    """One point of a folder, pooled over ok repetitions (median of the statistic)."""

    collective: str
    algorithm: str
    segsize: int
    fanout: int
    nprocs: int
    nodes: int | None
    ppn: int | None
    mapping: str | None
    size_bytes: int
    value_us: float

    @property
    def label(self) -> str:
        return algorithm_label(self.algorithm, self.segsize, self.fanout)

    @property
    def mapping_label(self) -> str:
        """The placement rule alone (nodes grow with P along a scaling series)."""
        return f"map-by={self.mapping}" if self.mapping else "default placement"

    @property
    def placement(self) -> str:
        parts = [f"map-by={self.mapping}"] if self.mapping else []
        parts += [f"nodes={self.nodes} ppn={self.ppn}"] if self.nodes and self.nodes > 1 \
            else []
        return " ".join(parts) or "default placement"


STAT_COLUMNS: Final = {"avg": "avg_us", "median": "median_us", "min": "min_us",
                       "max": "max_us"}


def collective_rows(store: Store, stat: str = "avg", collective: str | None = None,
                    pingpong: bool = False) -> list[CollectiveRow]:
    """Every point of the folder (collectives; ping-pongs only with pingpong=True)."""
    if stat not in STAT_COLUMNS:
        raise choice_error("models", "--stat", stat, STAT_COLUMNS)
    col = STAT_COLUMNS[stat]
    con = store.connect()
    try:
        rows = con.execute(
            "SELECT collective, algorithm, coalesce(segsize, 0), coalesce(fanout, 0), nprocs, "
            f"nodes, ppn, mapping, size_bytes, median({col}) FROM measurements "
            f"WHERE status = 'ok' AND {col} IS NOT NULL AND {col} > 0 "
            "GROUP BY ALL ORDER BY ALL").fetchall()
    finally:
        con.close()
    out = [CollectiveRow(str(c), str(a), int(s), int(f), int(n), nd, pp, m, int(b), float(v))
           for c, a, s, f, n, nd, pp, m, b, v in rows]
    return [r for r in out if (pingpong or r.collective not in PINGPONG)
            and (collective is None or r.collective == collective)]


def modelled(collective: str, algorithm: str) -> bool:
    return algorithm in ALGORITHMS.get(collective, ()) or (
        algorithm == DEFAULT and collective in ALGORITHMS
        and ompi_decisions.has_fixed_decision(DECISIONS_VERSION, collective))


def default_algorithm(collective: str, nprocs: int, size: int) -> str:
    """What Open MPI 5.0's fixed decision rules run for "default"."""
    d = ompi_decisions.decide_osu(DECISIONS_VERSION, collective, nprocs, size)
    return ompi_decisions.algorithm_name(DECISIONS_VERSION, collective, d.algorithm_id)


@dataclass(frozen=True)
class Network:
    """How messages share time (models.algorithms.simulate): `overlap` latencies, transfers
    that wait for the receive (`matched`), sends of `rendezvous` bytes or more that wait
    for their receiver."""

    name: str
    overlap: bool
    rendezvous: int | None = None
    matched: bool = False
    shared: bool = False
    loop: bool = False  # time as OSU's loop does: from each rank's exit of the barrier

    @property
    def sends(self) -> Sends:
        return Sends(self.overlap, self.rendezvous, self.matched, self.shared)


NETWORKS: Final = {
    # Open MPI over shared memory / a NIC: eager sends leave at once and overlap their
    # latency; from the sm BTL's eager limit on, a rendezvous
    "mpi": Network("mpi", True, 4096),
    # SimGrid SMPI: both sides matched before any transfer; detached (non-waiting) sends
    # below smpi/send-is-detached-thresh; concurrent flows share links (models.fluid)
    "smpi": Network("smpi", True, 65536, True, shared=True, loop=True),
    # whole transfers one after another per rank, Pjesivac-Grbovic-style (γ_k = k)
    "serial": Network("serial", False),
}
DEFAULT_NETWORK: Final = "mpi"


def network(name: str) -> Network:
    if name not in NETWORKS:
        raise choice_error("models", "--network", name, NETWORKS)
    return NETWORKS[name]


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
                  net: Network = NETWORKS[DEFAULT_NETWORK]) -> tuple[float, float, float]:
    """(avg over ranks, min, max) predicted latency in µs."""
    alg = algorithm
    if algorithm == DEFAULT:  # the rules' choice, run with fanout 0: a chain is a pipeline
        alg = default_algorithm(collective, topo.nprocs, size)
        alg = "pipeline" if alg == "chain" and collective in ("bcast", "reduce") else alg
    # the barrier between iterations: the fixed rules' one, or the barrier being measured
    barrier = None if not net.loop or topo.nprocs < 2 else alg if collective == "barrier" \
        else default_algorithm("barrier", topo.nprocs, 0)
    inner = inner_algorithms(collective, alg, topo.nprocs, size)
    pred = detail(model, topo, collective, alg, size, segsize=segsize, barrier=barrier,
                  inner=inner,
                  fanout=fanout or None, radix=fanout or None, overlap=net.overlap,
                  rendezvous=net.rendezvous, matched=net.matched, shared=net.shared)
    return pred.avg_us, pred.min_us, pred.max_us


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


def prediction_rows(model: P2PModel, collective: str, algorithms: Sequence[str],
                    topo: Topology, sizes: Iterable[int], *, campaign: str, launch_id: str,
                    model_name: str, explicit: bool = True,
                    net: Network = NETWORKS[DEFAULT_NETWORK]) -> Predicted:
    """Predicted rows, one per algorithm and size. An algorithm that cannot run at this
    process count is an error when named (`explicit`), else left out with a note."""
    nodes_used = len({p.node for p in topo.places})
    per_node: dict[int, int] = {}
    for p in topo.places:
        per_node[p.node] = per_node.get(p.node, 0) + 1
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    sizes = sorted(set(sizes))
    for alg in algorithms:
        try:
            got = [(s, predict_point(model, topo, collective, alg, s, net=net))
                   for s in sizes]
        except UserError as e:
            if explicit:
                raise
            notes.append(f"{collective} {alg} at np={topo.nprocs} left out: {e}")
            continue
        ident = 0 if alg == DEFAULT else ompi_decisions.ALGORITHMS[collective].index(alg) + 1
        for size, (avg, lo, hi) in got:
            metrics: dict[str, Any] = {"model": model_name, "stat": "avg over ranks",
                                       "network": net.name}
            if alg == DEFAULT:
                metrics["runs"] = default_algorithm(collective, topo.nprocs, size)
            rows.append(make_row(
                campaign=campaign, launch_id=launch_id, repetition=0, backend=MODEL_SOURCE,
                source=MODEL_SOURCE, mpi="openmpi", mpi_version=DECISIONS_VERSION,
                collective=collective, algorithm=alg, algorithm_id=ident, segsize=0,
                fanout=0, selection="none", params="{}", nprocs=topo.nprocs,
                nodes=nodes_used, ppn=max(per_node.values()), mapping=topo.mapping,
                binding=None, size_bytes=size, iterations=1, warmup=0,
                avg_us=_round(avg), min_us=_round(lo), max_us=_round(hi),
                median_us=_round(avg), metrics=json.dumps(metrics, sort_keys=True),
                validated=None, status="ok", error=None))
    return Predicted(rows, notes)


def _round(v: float) -> float:
    return float(f"{v:.6g}") if math.isfinite(v) else v


# --- a p2p model as a table ---------------------------------------------------------------

def p2p_rows(model: P2PModel) -> list[dict[str, Any]]:
    """One row per level and protocol regime: parameters, 95 % intervals, fit error."""
    out = []
    for name in ("core", "socket", "node"):
        lm = model.levels.get(name)
        if lm is None:
            continue
        for i, r in enumerate(lm.regimes):
            end = lm.regimes[i + 1].from_bytes - 1 if i + 1 < len(lm.regimes) else None
            out.append({
                "level": name, "transport": lm.transport, "regime": i + 1,
                "from_bytes": r.from_bytes, "to_bytes": end,
                "latency_us": r.alpha_us,
                "latency_ci": _ci(r.alpha_ci, 1.0, "{:.3g}"),
                "bandwidth_GBs": r.beta_bytes_per_s / 1e9,
                "bandwidth_ci": _ci(r.beta_ci, 1e-9, "{:.3g}"),
                "fit_points": lm.error.points if lm.error and i == 0 else None,
                "fit_median_pct": lm.error.median_abs_pct if lm.error and i == 0 else None,
                "fit_p95_pct": lm.error.p95_abs_pct if lm.error and i == 0 else None,
            })
    return out


P2P_COLUMNS: Final = ("level", "transport", "regime", "from_bytes", "to_bytes", "latency_us",
                      "latency_ci", "bandwidth_GBs", "bandwidth_ci", "fit_points",
                      "fit_median_pct", "fit_p95_pct")


def _ci(ci: tuple[float, float] | None, scale: float, fmt: str) -> str | None:
    if ci is None:
        return None
    lo, hi = (v * scale for v in ci)
    return f"[{fmt.format(lo)}, {fmt.format(hi) if math.isfinite(hi) else 'inf'}]"
