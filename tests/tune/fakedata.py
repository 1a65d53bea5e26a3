"""Results folders written directly (no MPI run): controlled timings for tune's tests."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

from collbench.records import make_row
from collbench.store import Store

# (collective, algorithm, algorithm_id, segsize, fanout) -> time in us at (size, nprocs)
Timing = Callable[[str, str, int, int], float]


def write_store(root: Path, *, mpi: str, version: str, collectives: Sequence[str],
                algorithms: Sequence[tuple[str, int | None]], sizes: Sequence[int],
                nprocs: Sequence[int], repetitions: int, timing: Timing,
                seed: int = 1, noise: float = 0.02,
                environment: dict[str, str] | None = None) -> Store:
    """One launch per repetition and process count; each value = timing * (1 +- noise)."""
    rng = random.Random(seed)
    store = Store(root)
    store.create({"name": "fake", "seed": seed, "backend": "fake", "spec_source": "test"},
                 "# written by tests/tune/fakedata.py\n", {"format": 1, "launches": []},
                 {"cores": 2, "mpi": {"implementation": mpi, "version": version},
                  "environment": environment or {}})
    for rep in range(repetitions):
        for n in nprocs:
            lid = f"{rep:02d}-np{n}"
            rows = []
            for coll in collectives:
                for alg, alg_id in algorithms:
                    for size in sizes:
                        t = timing(coll, alg, size, n) * (1 + rng.uniform(-noise, noise))
                        rows.append(make_row(
                            campaign="fake", launch_id=lid, repetition=rep, backend="fake",
                            source="kernel", mpi=mpi, mpi_version=version, collective=coll,
                            algorithm=alg, algorithm_id=alg_id, segsize=0, fanout=0,
                            selection="mpit", params="{}", nprocs=n, nodes=1, ppn=n,
                            mapping="core", binding="core", size_bytes=size, iterations=100,
                            warmup=10, avg_us=t, min_us=t * 0.9, max_us=t * 1.1,
                            median_us=t, validated=True, status="ok"))
            store.write_launch(lid, rows, {"launch_id": lid, "status": "ok"})
    return store
