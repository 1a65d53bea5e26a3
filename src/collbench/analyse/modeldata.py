"""Results folders into the models (the reading side): ping-pong rows to point-to-point
fits, collective rows to fitted per-algorithm models and regressions.

- `read_pingpongs(store)`: ping-pong rows (collective `latency`, measured or ingested) as
  `models.p2p.PingPong`, each placed on a level from its own mapping, nodes and ppn (ranks 0
  and 1 under `--map-by core` on one node share a socket; `socket` puts them on the two
  sockets of a node; `node`, or any mapping on 2 nodes, on two nodes) and labelled with its
  transport/MCA setting (the row's `params` MCA and environment settings, never mixed);
- `fit_p2p(store)`: one `P2PModel` per transport setting;
- `collective_rows(store)`: collective rows, median over repetitions, with the placement
  they ran on; `machine_shape(store)`: the machine's `models.predict.Shape` (from the
  folder's SimGrid platform or provenance);
- `p2p_rows(model)`: a p2p model as a table.

Predicting (a point, the rows of `model predict`) is `models.predict`, which reads no
folder.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from collbench import points
from collbench.analyse.compare import algorithm_label
from collbench.errors import UserError, choice_error
from collbench.models.p2p import P2PModel, PingPong, fit_model
from collbench.models.predict import Shape, topology
from collbench.models.topology import MAPPINGS
from collbench.platforms.calibrate import Points
from collbench.platforms.placement import LEVEL_OF_MAPPING
from collbench.store import Store

PINGPONG: Final = ("latency", "bw")


# --- the machine --------------------------------------------------------------------------

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


# --- ping-pong rows -----------------------------------------------------------------------

def transport_label(params: str | None) -> str:
    """The transport/MCA setting of a row: its MCA and environment settings ("btl=self,sm"),
    without the ones that only force algorithms and without suite metadata; "default" when
    there are none."""
    return points.transport(points.context(params))


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
    rows = [(r["collective"], r["mapping"], r["nodes"], r["ppn"], r["context"],
             r["size_bytes"], r["avg_us"], r["bandwidth_mbs"])
            for r in points.read(store, collectives=PINGPONG, ok=True)
            if r["nprocs"] is None or r["nprocs"] == 2]
    out = PingPongs([], {})
    skipped = 0
    for coll, mapping, nodes, ppn, ctx, size, avg, bw in rows:
        level = pingpong_level(mapping, nodes, ppn, str(store.root))
        if level is None:
            skipped += 1
            continue
        transport = points.transport(ctx)
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


# What the model readers keep of a point's identity: one MPI, one setting and one coll
# component per point (a folder that sweeps an MCA parameter, holds two MPIs or measured
# [measure] components is refused, not merged; folders of format 1-2, ingested files and
# simulations name the component differently, so `compare --against` matches across them).
MODEL_KEEP: Final = tuple(f for f in points.IDENTITY if f not in ("mpi", "context",
                                                                   "component"))


def collective_rows(store: Store, stat: str = "avg", collective: str | None = None,
                    pingpong: bool = False, reader: str = "the models",
                    zero: bool = False) -> list[CollectiveRow]:
    """Every point of the folder (collectives; ping-pongs only with pingpong=True). Values
    of 0 µs are left out unless `zero` (fits take logs; a comparison must see them)."""
    if stat not in points.COLUMN_STATS:
        raise choice_error("models", "--stat", stat, points.COLUMN_STATS)
    col = points.COLUMN_STATS[stat]
    rows = [r for r in points.read(store, collective=collective, ok=True)
            if r[col] is not None and (r[col] >= 0 if zero else r[col] > 0)
            and (pingpong or r["collective"] not in PINGPONG)]
    points.narrow(rows, MODEL_KEEP, str(store.root), reader)
    out = []
    for p in points.pool(rows, col, MODEL_KEEP, positive=not zero):
        f = dict(zip(MODEL_KEEP, p.key, strict=True))
        out.append(CollectiveRow(str(f["collective"]), str(f["algorithm"]), f["segsize"],
                                 f["fanout"], f["nprocs"], f["nodes"], f["ppn"], f["mapping"],
                                 f["size_bytes"], p.median))
    return sorted(out, key=lambda r: (r.collective, r.algorithm, r.segsize, r.fanout,
                                      r.nprocs, *_last(r.nodes), *_last(r.ppn),
                                      *_last(r.mapping), r.size_bytes, r.value_us))


def _last(value: Any) -> tuple[bool, Any]:
    """A sort key putting None last (as SQL's ORDER BY does)."""
    return (value is None, value if value is not None else 0)


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


# --- ping-pong medians for a platform -----------------------------------------------------

def pingpong_medians(results: Path, min_sizes: int = 2) -> tuple[dict[str, Points],
                                                                 list[str]]:
    """Median one-way latency per level and size from a results folder, and notes (what
    `platform calibrate` fits a platform to: one MPI and one transport setting per point)."""
    found = [r for r in points.read(Store(results), collectives=PINGPONG, ok=True)
             if r["avg_us"] is not None]
    points.narrow(found, MODEL_KEEP, str(results), "platform calibrate")
    rows = [(r["mapping"], r["nodes"], r["size_bytes"], r["avg_us"], r["collective"])
            for r in found]
    notes: list[str] = []
    by_level: dict[str, dict[int, list[float]]] = {}
    skipped_bw = skipped_one_node = 0
    for mapping, nodes, size, avg, coll in rows:
        if coll == "bw":
            skipped_bw += 1
            continue
        if mapping is None:
            if not nodes or nodes < 2:
                raise UserError(f"{results}: latency rows without a mapping; ingest OSU files "
                                "with --mapping core|socket|node (or --nodes 2 for inter-node)")
            mapping = "node"
        if mapping not in LEVEL_OF_MAPPING:
            raise UserError(f"{results}: latency rows with mapping {mapping!r} cannot be "
                            f"placed on a level; valid: {', '.join(LEVEL_OF_MAPPING)}")
        if mapping == "node" and nodes is not None and nodes < 2:
            skipped_one_node += 1  # --map-by node inside one machine: not inter-node
            continue
        by_level.setdefault(LEVEL_OF_MAPPING[mapping], {}).setdefault(int(size), []).append(
            float(avg))
    if skipped_bw:
        notes.append(f"{skipped_bw} bw rows not used: the platform is fitted to ping-pong "
                     "latency (osu_bw's streaming bandwidth is usually higher)")
    if skipped_one_node:
        notes.append(f"{skipped_one_node} latency rows with --map-by node on one node skipped "
                     "(not an inter-node ping-pong)")
    if not by_level:
        raise UserError(f"{results}: no ok latency rows; measure ping-pongs first (collective "
                        "\"latency\", map_by core/socket/node) or ingest osu_latency files")
    measured = {lv: {s: statistics.median(v) for s, v in sorted(pts.items())}
                for lv, pts in by_level.items()}
    for lv, pts in measured.items():
        if len(pts) < min_sizes:
            raise UserError(f"{results}: {lv} ping-pong at one size only; a latency/"
                            "bandwidth fit needs at least two sizes")
    return measured, notes


# One message at 2 ranks, as a collective run times it (platform calibrate --probe).
PROBE_COLLECTIVES: Final = ("bcast", "scatter", "gather")


def probe_medians(results: Path) -> dict[str, Points]:
    """Median avg_us per level and size of the 2-rank bcast/scatter/gather points of a
    results folder (every algorithm: at 2 ranks each is the root's one message)."""
    found = [r for r in points.read(Store(results), collectives=PROBE_COLLECTIVES, nprocs=2,
                                    ok=True) if r["avg_us"] is not None]
    by_level: dict[str, dict[int, list[float]]] = {}
    for r in found:
        mapping = r["mapping"] or ("node" if (r["nodes"] or 0) >= 2 else None)
        if mapping not in LEVEL_OF_MAPPING:
            raise UserError(f"--probe: {results}: 2-rank rows with mapping {mapping!r} cannot "
                            f"be placed on a level; valid: {', '.join(LEVEL_OF_MAPPING)}")
        by_level.setdefault(LEVEL_OF_MAPPING[mapping], {}).setdefault(
            int(r["size_bytes"]), []).append(float(r["avg_us"]))
    if not by_level:
        raise UserError(f"--probe: {results}: no ok 2-rank {'/'.join(PROBE_COLLECTIVES)} rows; "
                        "valid: a results folder with such rows (measured, or OSU output "
                        "ingested with --nprocs 2 and --mapping)")
    return {lv: {s: statistics.median(v) for s, v in sorted(pts.items())}
            for lv, pts in by_level.items()}


# Multi-pair bandwidth: P/2 pairs (rank i -> i + P/2) streaming at once, the pairs'
# aggregate in bandwidth_mbs (osu_mbw_mr or collbench's mbw_mr; IMB's Uniband).
MULTI_PAIR: Final = ("mbw_mr", "uniband")


def multipair_medians(results: Path) -> tuple[dict[tuple[int, int], float], list[str]]:
    """Median aggregate bandwidth (MB/s) per process count and size of the `--map-by core`
    multi-pair rows of a results folder (mbw_mr: collbench's or osu_mbw_mr ingested;
    uniband: IMB's), and notes (platform calibrate --multi-pair: the senders must fill
    whole sockets)."""
    found = [r for r in points.read(Store(results), collectives=MULTI_PAIR, ok=True)
             if r["bandwidth_mbs"] is not None and r["bandwidth_mbs"] > 0]
    points.narrow(found, MODEL_KEEP, str(results), "platform calibrate --multi-pair")
    by_point: dict[tuple[int, int], list[float]] = {}
    other: dict[str, int] = {}
    for r in found:
        if r["mapping"] != "core":
            other[str(r["mapping"])] = other.get(str(r["mapping"]), 0) + 1
            continue
        by_point.setdefault((int(r["nprocs"]), int(r["size_bytes"])), []).append(
            float(r["bandwidth_mbs"]))
    if not by_point:
        raise UserError(f"--multi-pair: {results}: no ok mbw_mr/uniband rows with a "
                        "bandwidth and mapping core"
                        f"{' (found: ' + ', '.join(other) + ')' if other else ''}; valid: "
                        "collective mbw_mr measured with map_by core, or osu_mbw_mr (IMB "
                        "Uniband) output ingested with --mapping core")
    notes = [f"--multi-pair: {n} mbw_mr/uniband rows with mapping {m} not used (the pairs' "
             "sockets are known with --map-by core only)" for m, n in sorted(other.items())]
    return {p: statistics.median(v) for p, v in sorted(by_point.items())}, notes
