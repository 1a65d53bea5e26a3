"""Fixtures of tune's tests: measured-looking results folders with known winners."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from collbench.store import Store
from tests.tune.fakedata import write_store

OMPI_BCAST = [("default", 0), ("binomial", 6), ("pipeline", 3)]


def bcast_timing(coll: str, alg: str, size: int, nprocs: int) -> float:
    """binomial wins below 8 KiB, pipeline from 8 KiB on; the default is 1.5x the best."""
    binomial, pipeline = 5 + size / 400, 20 + size / 2000
    if alg == "binomial":
        return binomial
    if alg == "pipeline":
        return pipeline
    return 1.5 * min(binomial, pipeline)


@pytest.fixture
def bcast_store(tmp_path: Path) -> Callable[..., Store]:
    def make(repetitions: int = 6, version: str = "5.0.11", nprocs: tuple[int, ...] = (2, 4),
             collectives: tuple[str, ...] = ("bcast",), name: str = "res") -> Store:
        return write_store(tmp_path / name, mpi="openmpi", version=version,
                           collectives=collectives, algorithms=OMPI_BCAST,
                           sizes=[1024, 2048, 4096, 8192, 16384, 65536], nprocs=nprocs,
                           repetitions=repetitions, timing=bcast_timing)
    return make
