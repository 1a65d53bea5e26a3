"""Live: adaptive tuning that measures with the real runner as it goes.

The campaign spec says what may be measured (collectives, algorithms, sizes, process
counts, iterations, placement) and `run.repetitions` is the most repetitions a point gets.
Its plan, built once with one repetition, holds every point in launch templates (one
launch per process count where MPI_T switches algorithms, else one per algorithm). A round
of requests keeps from each template only the points asked for, shuffled, as a launch of
its own; the runner stores it like any campaign launch. Launch ids hash the launch's
content and round, and rounds are deterministic given the data, so rerunning with --resume
skips every launch already stored and continues where the run stopped.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby
from typing import Any

from collbench.analyse.compare import algorithm_label
from collbench.campaign import Campaign
from collbench.catalog.collectives import COLLECTIVES, Kind
from collbench.plan import Launch, Plan, Point
from collbench.points import COLUMN_STATS as STATS
from collbench.runner import read_kernel_output
from collbench.tune.adaptive.engine import Context, Observation, Request
from collbench.tune.adaptive.precise import Precision
from collbench.tune.adaptive.replay import kernel_us, request_of


class Interrupted(Exception):
    """The run was interrupted (SIGINT/SIGTERM); finished launches are stored."""


def point_request(launch: Launch, p: Point) -> Request:
    return (p.collective, launch.nprocs, algorithm_label(p.algorithm, p.segsize, p.fanout),
            p.size_bytes)


def contexts(templates: Plan) -> dict[Context, tuple[list[int], list[str]]]:
    """(sizes, labels) per (collective, nprocs) of a one-repetition plan."""
    out: dict[Context, tuple[set[int], set[str]]] = {}
    for launch in templates.launches:
        for p in launch.points:
            coll, nprocs, label, size = point_request(launch, p)
            sizes, labels = out.setdefault((coll, nprocs), (set(), set()))
            sizes.add(size)
            labels.add(label)
    return {ctx: (sorted(s), sorted(ls)) for ctx, (s, ls) in sorted(out.items())}


def template_rows(templates: Plan) -> dict[Request, list[dict[str, Any]]]:
    """Per request, what the model needs to cost it (prune.from_rows): how it runs, where."""
    out: dict[Request, list[dict[str, Any]]] = {}
    for launch in templates.launches:
        for p in launch.points:
            out.setdefault(point_request(launch, p), [{
                "algorithm": p.algorithm, "segsize": p.segsize, "fanout": p.fanout,
                "nodes": -(-launch.nprocs // launch.ppn) if launch.ppn else None,
                "ppn": launch.ppn, "mapping": launch.mapping}])
    return out


def precise(templates: Plan, precision: Precision, max_seconds: float) -> Plan:
    """Every blocking point in the kernel's precision mode, from a first batch of
    `precision.first` up to the iterations the spec gives it (never more than exhaustive)."""
    def one(p: Point) -> Point:
        if p.test_calls is not None or COLLECTIVES[p.collective].kind is Kind.P2P:
            return p
        cap = p.max_iterations if p.precision is not None else p.iterations
        return replace(p, iterations=min(precision.first, cap), precision=precision.target,
                       max_iterations=cap, max_seconds=max_seconds)

    return replace(templates, launches=tuple(
        replace(la, points=tuple(one(p) for p in la.points)) for la in templates.launches))


def _shuffled(points: Sequence[Point], rng: random.Random) -> tuple[Point, ...]:
    """Algorithm blocks in random order, sizes ascending inside each (as plan does)."""
    def key(p: Point) -> tuple[Any, ...]:
        return p.collective, p.algorithm, p.algorithm_id, p.segsize, p.fanout

    blocks = [tuple(sorted(g, key=lambda p: p.size_bytes))
              for _, g in groupby(sorted(points, key=key), key=key)]
    rng.shuffle(blocks)
    return tuple(p for b in blocks for p in b)


def round_launches(templates: Plan, requests: Sequence[Request], round_: int,
                   seed: int) -> list[Launch]:
    """The launches that measure `requests` once (repetition index = round)."""
    wanted = set(requests)
    rng = random.Random(seed * 1_000_003 + round_)
    out: list[Launch] = []
    for launch in templates.launches:
        points = [p for p in launch.points if point_request(launch, p) in wanted]
        if not points:
            continue
        la = replace(launch, repetition=round_, points=_shuffled(points, rng), launch_id="")
        digest = hashlib.sha256(json.dumps(la.to_json(), sort_keys=True).encode()).hexdigest()
        out.append(replace(la, launch_id=f"r{round_:03d}-{len(out):02d}-{digest[:8]}"))
    rng.shuffle(out)
    return out


class LiveMeasurer:
    """Runs each round of requests as launches through the runner into `store`."""

    def __init__(self, templates: Plan, camp: Campaign[Any], seed: int, stat: str = "avg",
                 progress_stream: Any = None) -> None:
        self.templates, self.camp, self.seed = templates, camp, seed
        self.column = STATS[stat]
        self.stream = progress_stream
        self.round = 0
        self.launches = 0

    def measure(self, requests: Sequence[Request]) -> dict[Request, Observation | None]:
        launches = round_launches(self.templates, requests, self.round, self.seed)
        self.round += 1
        self.launches += len(launches)
        plan = replace(self.templates, launches=tuple(launches))
        summary = self.camp.run(plan=plan, progress=self.stream)
        if summary.interrupted:
            raise Interrupted
        out: dict[Request, Observation | None] = dict.fromkeys(requests)
        for launch in launches:
            for row in read_kernel_output(self.camp.store.launch_rows(launch.launch_id)):
                value = row.get(self.column)
                if row.get("status") == "ok" and value:
                    out[request_of(row)] = Observation(float(value), kernel_us(row))
        return out
