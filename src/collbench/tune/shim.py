"""The algtrace LD_PRELOAD library: build it with the MPI's mpicc (cached) and read its traces.

Cached like the kernel: ``<cache>/algtrace/<fingerprint>/libalgtrace.so``, the fingerprint
hashing the MPI wrapper compiler (collbench.kernel.build.mpi_fingerprint) and the source.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from collbench.kernel.build import KernelBuildError, default_cache_dir, mpi_fingerprint

SOURCE_NAME = "algtrace.c"
LIBRARY_NAME = "libalgtrace.so"
ENV_VAR = "COLLBENCH_ALGTRACE"
_COMPILE_TIMEOUT_S = 300


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
    digest = hashlib.sha256(mpi_fingerprint(mpicc).encode() + src.read_bytes()).hexdigest()
    out_dir = (cache_dir or default_cache_dir()) / "algtrace" / digest[:24]
    out = out_dir / LIBRARY_NAME
    if out.is_file():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{LIBRARY_NAME}.", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [str(mpicc), "-shared", "-fPIC", "-O2", "-Wall", "-o", str(tmp), str(src), "-ldl"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S,
                             check=False)
        if res.returncode != 0:
            raise KernelBuildError(f"compiling the algtrace library failed (exit "
                                   f"{res.returncode}): {shlex.join(cmd)}\n"
                                   f"{res.stdout}{res.stderr}".rstrip())
        tmp.replace(out)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KernelBuildError(f"compiling the algtrace library failed: {shlex.join(cmd)}\n"
                               f"{exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return out


def parse_trace(text: str, rank: int) -> Trace:
    calls, dups, dropped = [], 0, 0
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["DUPS"]:
            dups = int(f[1])
        elif f[:1] == ["DROPPED"]:
            dropped = int(f[1])
        elif len(f) == 8:
            calls.append(Call(int(f[0]), f[1] == "W", f[2], int(f[3]), int(f[4]), int(f[5]),
                              int(f[6]), int(f[7])))
    return Trace(rank, tuple(calls), dups, dropped)


def read_traces(prefix: Path, ranks: Iterable[int]) -> list[Trace]:
    """The trace of each rank that wrote one (a rank that crashed writes none)."""
    out = []
    for rank in ranks:
        path = Path(f"{prefix}.{rank}")
        if path.exists():
            out.append(parse_trace(path.read_text(), rank))
    return out
