"""Replay: adaptive tuning against a recorded exhaustive campaign instead of a live MPI.

A request for one more repetition of a point is served by one of that point's stored
repetitions, drawn without replacement in a seeded random order, so after n requests the
adaptive run has seen n distinct repetitions, and at the campaign's repetition count it has
seen exactly what the exhaustive sweep saw. The rows served are written to a results folder
of their own, which `collbench compare` and tune's selection read like any other.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from collbench import points
from collbench.analyse.compare import algorithm_label
from collbench.analyse.stability import SIMULATED
from collbench.analyse.stats import median
from collbench.campaign import create_folder
from collbench.errors import UserError, choice_error
from collbench.points import COLUMN_STATS as STATS
from collbench.records import COLUMNS
from collbench.store import Store
from collbench.tune.adaptive.engine import Context, Observation, Request
from collbench.tune.adaptive.precise import PREFIX_COLUMNS, Precision, prefix_row

SampleKey = tuple[str, str, str, int, int, int]  # launch, collective, algorithm, seg, fan, size


def kernel_us(row: Mapping[str, Any]) -> float:
    """Time the kernel spent on one point of one repetition (timed and warm-up iterations)."""
    return float((row["iterations"] or 0) + (row["warmup"] or 0)) * float(row["avg_us"] or 0)


def request_of(row: Mapping[str, Any]) -> Request:
    return (str(row["collective"]), int(row["nprocs"]),
            algorithm_label(str(row["algorithm"]), int(row["segsize"] or 0),
                            int(row["fanout"] or 0)), int(row["size_bytes"]))


@dataclass(frozen=True)
class Recorded:
    """The ok rows of a campaign per point, in repetition order."""

    root: Path
    column: str
    rows: Mapping[Request, tuple[dict[str, Any], ...]]
    # per-iteration samples of every row, when loaded for precision-driven replay
    samples: Mapping[SampleKey, tuple[float, ...]] | None = None

    def contexts(self) -> dict[Context, tuple[list[int], list[str]]]:
        """(sizes, algorithm labels) measured per (collective, nprocs)."""
        out: dict[Context, tuple[set[int], set[str]]] = {}
        for coll, nprocs, label, size in self.rows:
            sizes, labels = out.setdefault((coll, nprocs), (set(), set()))
            sizes.add(size)
            labels.add(label)
        return {ctx: (sorted(s), sorted(ls)) for ctx, (s, ls) in sorted(out.items())}

    def median(self, req: Request) -> float:
        return median([float(r[self.column]) for r in self.rows[req]])

    def repetitions(self) -> int:
        return max((len(rs) for rs in self.rows.values()), default=0)

    def kernel_us(self) -> float:
        return sum(kernel_us(r) for rs in self.rows.values() for r in rs)

    def points(self) -> int:
        return sum(len(rs) for rs in self.rows.values())

    @property
    def exact(self) -> bool:
        """Every row simulated: a repetition repeats the first to the last digit."""
        return all(r.get("backend") in SIMULATED for rs in self.rows.values() for r in rs)


def sample_key(row: Mapping[str, Any]) -> SampleKey:
    return (str(row["launch_id"]), str(row["collective"]), str(row["algorithm"]),
            int(row["segsize"] or 0), int(row["fanout"] or 0), int(row["size_bytes"]))


def load(store: Store, stat: str = "avg", collectives: Sequence[str] = (),
         samples: bool = False) -> Recorded:
    """The ok measurements of a results folder; one placement per (collective, nprocs).
    With `samples`, each row's per-iteration samples too (precision-driven replay)."""
    if stat not in STATS:
        raise choice_error("collbench tune --adaptive", "--stat", stat, STATS)
    column = STATS[stat]
    if samples and column not in PREFIX_COLUMNS:
        raise UserError(f"--precision with --stat {stat}: not possible; per-iteration samples "
                        "give only the avg and median statistics (valid: --stat avg, median)")
    rows = sorted((r for r in points.read(store, ok=True)
                   if r[column] is not None and r[column] > 0),
                  key=lambda r: (r["repetition"] is None, r["repetition"] or 0,
                                 r["launch_id"] or ""))
    placements: dict[Context, set[tuple[Any, ...]]] = {}
    by: dict[Request, list[dict[str, Any]]] = {}
    for r in rows:
        if collectives and r["collective"] not in collectives:
            continue
        req = request_of(r)
        placements.setdefault(req[:2], set()).add(
            (r["mapping"], r["binding"], r["nodes"], r["ppn"], r["context"], r["mpi"]))
        by.setdefault(req, []).append(r)
    for (coll, nprocs), seen in placements.items():
        if len(seen) > 1:
            raise UserError(f"{store.root}: {coll} np={nprocs} was measured in {len(seen)} "
                            "placements or parameter settings; adaptive replay needs one")
    if not by:
        raise UserError(f"{store.root}: no ok measurements"
                        f"{' of ' + ', '.join(collectives) if collectives else ''} to replay")
    recorded = Recorded(store.root, column, {k: tuple(v) for k, v in sorted(by.items())})
    return replace(recorded, samples=_samples(store, recorded)) if samples else recorded


def _samples(store: Store, recorded: Recorded) -> dict[SampleKey, tuple[float, ...]]:
    """Every replayed row's per-iteration samples, checked against its iteration count."""
    import duckdb

    def scan(con: duckdb.DuckDBPyConnection) -> list[tuple[Any, ...]]:
        return con.execute("SELECT launch_id, collective, algorithm, coalesce(segsize, 0), "
                           "coalesce(fanout, 0), size_bytes, list(sample_us ORDER BY "
                           "iteration) FROM samples GROUP BY ALL").fetchall()

    try:  # read again if a run rewrites the folder meanwhile
        got = store.reading(scan)
    except duckdb.Error as e:  # a damaged samples file: one line, not a traceback
        raise UserError(f"{store.root}/samples: unreadable ({str(e).strip().splitlines()[0]}); "
                        "--precision replays the per-iteration samples") from None
    by: dict[SampleKey, tuple[float, ...]] = {
        (str(a), str(b), str(c), int(d), int(e), int(f)): tuple(float(x) for x in g)
        for a, b, c, d, e, f, g in got}
    rows = [r for rs in recorded.rows.values() for r in rs]
    missing = [r for r in rows if len(by.get(sample_key(r), ())) != int(r["iterations"] or 0)]
    if missing:
        r = missing[0]
        raise UserError(
            f"{store.root}: --precision replays per-iteration samples; {len(missing)} of "
            f"{len(rows)} measurements have none or not one per iteration (e.g. launch "
            f"{r['launch_id']} {r['collective']} {r['algorithm']} {r['size_bytes']} B); "
            "record the campaign with [measure] samples = true")
    return by


class ReplayMeasurer:
    """Serves stored repetitions in a seeded random order, without replacement."""

    def __init__(self, recorded: Recorded, seed: int = 0,
                 precision: Precision | None = None) -> None:
        self.recorded = recorded
        self.precision = precision
        if precision is not None and recorded.samples is None:
            raise ValueError("precision-driven replay needs load(..., samples=True)")
        rng = random.Random(seed)
        self._queues: dict[Request, list[dict[str, Any]]] = {}
        for req, rows in recorded.rows.items():
            order = list(rows)
            rng.shuffle(order)
            self._queues[req] = order
        self.served: list[list[dict[str, Any]]] = []  # rows per round

    def measure(self, requests: Sequence[Request]) -> dict[Request, Observation | None]:
        out: dict[Request, Observation | None] = {}
        batch = []
        for req in requests:
            queue = self._queues.get(req)
            if not queue:
                out[req] = None
                continue
            row = queue.pop()
            if self.precision is not None and self.recorded.samples is not None:
                row = prefix_row(row, self.recorded.samples[sample_key(row)], self.precision)
            batch.append(row)
            out[req] = Observation(float(row[self.recorded.column]), kernel_us(row))
        self.served.append(batch)
        return out


def write_served(measurer: ReplayMeasurer, source: Store, root: Path) -> Store:
    """The served rows as a results folder (one launch file per round) for selection."""
    store = Store(root)
    campaign = dict(source.campaign())
    campaign.pop("format_version", None)
    campaign.pop("collbench_version", None)
    campaign.update(name=f"{campaign.get('name', 'campaign')}-adaptive-replay",
                    replay_of=str(source.root))
    try:
        prov = source.provenance()
    except UserError:
        prov = {}
    create_folder(store, campaign, source.spec_text() if source.has_spec() else "",
                  {"format": 1, "campaign": campaign["name"], "seed": 0,
                   "backend": "replay", "launches": []}, prov)
    for i, rows in enumerate(measurer.served):
        if not rows:
            continue
        lid = f"replay-{i:04d}"
        store.write_launch(lid, [{k: r[k] for k in COLUMNS} | {"launch_id": lid}
                                 for r in rows], {"launch_id": lid, "status": "ok",
                                                  "points": len(rows)})
    return store
