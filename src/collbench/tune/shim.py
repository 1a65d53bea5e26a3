"""The algtrace LD_PRELOAD library: build it with the MPI's mpicc (cached) and read its traces.

Cached like the kernel: ``<cache>/algtrace/<fingerprint>/libalgtrace.so``, the fingerprint
hashing the MPI wrapper compiler (collbench.kernel.build.mpi_fingerprint) and the source.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from collbench.buildcache import cache_key, cached_build
from collbench.kernel.build import KernelBuildError, mpi_fingerprint

SOURCE_NAME = "algtrace.c"
LIBRARY_NAME = "libalgtrace.so"
ENV_VAR = "COLLBENCH_ALGTRACE"


@dataclass(frozen=True)
class Call:
    """Calls of one collective with one decision, counted on one rank."""

    epoch: int  # MPI_Comm_dup calls before these calls
    world: bool  # on MPI_COMM_WORLD (the kernel's bookkeeping) or on a dup (measured)
    collective: str
    bytes: int  # message size as Open MPI's dynamic rules count it
    algorithm: int
    faninout: int
    segsize: int
    calls: int
    comm_size: int = 0  # the communicator's size (0: a trace written before it was recorded)


@dataclass(frozen=True)
class Trace:
    rank: int
    calls: tuple[Call, ...]
    dups: int
    dropped: int = 0


def source() -> Path:
    return Path(str(resources.files("collbench.tune").joinpath(SOURCE_NAME)))


def build_shim(mpicc: Path, cache_dir: Path | None = None) -> Path:
    """Compile libalgtrace.so with this MPI's wrapper compiler (or reuse the cached one)."""
    src = source()
    key = cache_key(mpi_fingerprint(mpicc), src.read_bytes())

    def command(out: Path) -> list[str]:
        return [str(mpicc), "-shared", "-fPIC", "-O2", "-Wall", "-o", str(out), str(src),
                "-ldl"]

    return cached_build("algtrace", LIBRARY_NAME, key, command, "the algtrace library",
                        cache_dir, error=KernelBuildError).path


def parse_trace(text: str, rank: int) -> Trace:
    calls, dups, dropped = [], 0, 0
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["DUPS"]:
            dups = int(f[1])
        elif f[:1] == ["DROPPED"]:
            dropped = int(f[1])
        elif len(f) in (8, 9):
            calls.append(Call(int(f[0]), f[1] == "W", f[2], int(f[3]), int(f[4]), int(f[5]),
                              int(f[6]), int(f[7]), int(f[8]) if len(f) == 9 else 0))
    return Trace(rank, tuple(calls), dups, dropped)


def read_traces(prefix: Path, ranks: Iterable[int]) -> list[Trace]:
    """The trace of each rank that wrote one (a rank that crashed writes none)."""
    out = []
    for rank in ranks:
        path = Path(f"{prefix}.{rank}")
        if path.exists():
            out.append(parse_trace(path.read_text(), rank))
    return out
