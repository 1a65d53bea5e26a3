"""Model-guided pruning: do not race algorithms the p2p model says are clearly slower.

Before a race starts at a size, every candidate's latency is predicted from a p2p model
(models.predict.predict_point: Open MPI's schedule of the algorithm costed hop by hop).
A candidate is pruned when even the model's error cannot make it a winner:

    predicted(c) · (1 − e)  >  predicted(best) · (1 + e)

where e is the model's relative error bound (`--prune-error`, e.g. its measured p95 error:
3.5 % against SimGrid with `--network smpi`, 163 % on the oversubscribed machine here —
docs/models.md). The default is never pruned, nor an algorithm the model cannot cost (it
races as before). Simulated data is costed with the `smpi` network, measurements with
`mpi` (docs/models.md, "--network").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collbench.catalog.algorithms import DEFAULT
from collbench.errors import UserError
from collbench.models.networks import NETWORKS, Network
from collbench.models.p2p import P2PModel
from collbench.models.predict import Shape, predict_point, topology
from collbench.tune.adaptive.engine import Context

# How one algorithm label of a context runs: (algorithm, segsize, fanout)
Variant = tuple[str, int, int]


@dataclass(frozen=True)
class Placement:
    """Where a context's ranks sat: what the model needs to cost a schedule."""

    nodes: int | None
    ppn: int | None
    mapping: str | None


@dataclass
class ModelPruner:
    model: P2PModel
    shape: Shape
    network: Network
    error: float  # relative error bound e of the model's predictions
    placements: Mapping[Context, Placement]
    variants: Mapping[Context, Mapping[str, Variant]]  # label -> how it runs
    pruned: int = 0  # (context, size, label) triples not raced

    def predicted(self, ctx: Context, size: int, label: str) -> float | None:
        """The model's latency in µs, None where it cannot cost this algorithm."""
        variant = self.variants.get(ctx, {}).get(label)
        place = self.placements.get(ctx)
        if variant is None or place is None:
            return None
        alg, segsize, fanout = variant
        try:
            topo = topology(ctx[1], place.nodes, place.ppn, place.mapping, self.shape)
            avg, _, _ = predict_point(self.model, topo, ctx[0], alg, size, segsize, fanout,
                                      self.network)
        except (UserError, KeyError, ValueError):
            return None
        return avg if avg > 0 else None

    def __call__(self, ctx: Context, size: int, labels: Sequence[str]) -> list[str]:
        pred = {c: self.predicted(ctx, size, c) for c in labels}
        costed = [v for v in pred.values() if v is not None]
        if not costed:
            return list(labels)
        bound = min(costed) * (1 + self.error)
        keep = [c for c in labels if c == DEFAULT or pred[c] is None
                or pred[c] * (1 - self.error) <= bound]  # type: ignore[operator]
        self.pruned += len(labels) - len(keep)
        return keep


def from_rows(model: P2PModel, shape: Shape, error: float, simulated: bool,
              rows: Mapping[tuple[str, int, str, int], Sequence[Mapping[str, Any]]]
              ) -> ModelPruner:
    """A pruner for the points of `rows` (request -> stored or template rows)."""
    placements: dict[Context, Placement] = {}
    variants: dict[Context, dict[str, Variant]] = {}
    for (coll, nprocs, label, _), rs in rows.items():
        if not rs:
            continue
        r = rs[0]
        placements.setdefault((coll, nprocs), Placement(r.get("nodes"), r.get("ppn"),
                                                        r.get("mapping")))
        variants.setdefault((coll, nprocs), {})[label] = (
            str(r["algorithm"]), int(r.get("segsize") or 0), int(r.get("fanout") or 0))
    for (_, nprocs), place in placements.items():  # a level missing would prune nothing
        for level in topology(nprocs, place.nodes, place.ppn, place.mapping,
                              shape).levels_used():
            model.level(level)
    return ModelPruner(model, shape, NETWORKS["smpi" if simulated else "mpi"], error,
                       placements, variants)
