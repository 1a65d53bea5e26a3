"""Results folders built by hand for the report tests (no MPI needed)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collbench.records import make_row
from collbench.store import Store

SIZES = (1, 64, 4096, 65536, 1 << 20)
# Relative speed per algorithm: binomial is clearly faster at small sizes, pipeline at
# large ones, so that 5 repetitions make some differences significant.
SPEED = {"default": (1.0, 1.0), "binomial": (0.5, 1.2), "pipeline": (1.4, 0.6)}


def latency(algorithm: str, size: int, nprocs: int) -> float:
    small, large = SPEED.get(algorithm, (1.0, 1.0))
    return (2.0 * small + size / 2000.0 * large) * (1 + 0.5 * (nprocs > 2))


def make_results(root: Path, *, campaign: str = "t",
                 algorithms: Sequence[str] = ("default", "binomial", "pipeline"),
                 collectives: Sequence[str] = ("bcast",), sizes: Sequence[int] = SIZES,
                 nprocs: Sequence[int] = (2, 4), repetitions: int = 5, status: str = "ok",
                 samples: bool = False, provenance: dict[str, Any] | None = None,
                 outlier: bool = False) -> Path:
    """A results folder: one launch per (nprocs, repetition), ±5 % noise per repetition."""
    store = Store(root)
    prov = provenance if provenance is not None else {
        "host": "node1", "cores": 64, "cpu_model": "Test CPU", "created": "2024-01-01T00:00:00",
        "mpi": {"implementation": "openmpi", "version": "5.0.3"},
        "environment": {"OMPI_MCA_btl": "self,vader"},
        "warnings": ["OMPI_MCA_mpi_yield_when_idle is set: do not read these as tuned"]}
    store.create({"name": campaign, "seed": 1}, "", {"launches": []}, dict(prov))
    rng = random.Random(7)
    for np_ in nprocs:
        for rep in range(repetitions):
            lid = f"np{np_}-r{rep}"
            rows, lines = [], []
            for coll in collectives:
                for alg in algorithms:
                    for size in sizes:
                        t = latency(alg, size, np_) * rng.uniform(0.95, 1.05)
                        if outlier and rep == 0 and alg == algorithms[0]:
                            t *= 5  # one repetition far above the others
                        rows.append(row(campaign, lid, rep, coll, alg, np_, size, t, status))
                        lines += [json.dumps({
                            "launch_id": lid, "collective": coll, "algorithm": alg,
                            "segsize": 0, "fanout": 0, "size_bytes": size, "iteration": i,
                            "sample_us": t * (3.0 if i == 0 else rng.uniform(0.9, 1.1))})
                            for i in range(50)] if samples else []
            jsonl = None
            if lines:
                jsonl = root.parent / f".{root.name}-{lid}.jsonl"
                jsonl.write_text("\n".join(lines) + "\n")
            store.write_launch(lid, rows, {"status": "ok" if status == "ok" else "failed"},
                               jsonl)
    return root


def row(campaign: str, lid: str, rep: int, coll: str, alg: str, nprocs: int, size: int,
         t: float, status: str) -> dict[str, Any]:
    ok = status == "ok"
    return make_row(
        campaign=campaign, launch_id=lid, repetition=rep, backend="fake", source="kernel",
        mpi="openmpi", mpi_version="5.0.3", collective=coll, algorithm=alg, segsize=0,
        fanout=0, params=json.dumps({"env": {}, "mca": {}, "swept": {}}), nprocs=nprocs,
        nodes=1, ppn=nprocs, mapping="core", binding="core", size_bytes=size,
        iterations=1000, warmup=100, avg_us=t if ok else None,
        min_us=0.9 * t if ok else None, max_us=1.2 * t if ok else None,
        median_us=t if ok else None, status=status,
        error=None if ok else "launch exited with status 1 before this point")
