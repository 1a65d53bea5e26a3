"""The rank guard (rankguard.c): every rank of a workload's program runs under it, with the
local and hosts backends (mpirun): it ends what the program leaves behind (a daemon holding
mpirun's pipes held the launch until its timeout and outlived it), and stops a rank that
prints more than its share of the launch's output limit (prterun keeps it all in memory).

It is a C program, not a Python one: it runs where the rank runs, remote hosts included,
which need only the shared build cache the kernel already needs; and it costs a rank a
process of a few hundred KiB, not an interpreter. Built once per compiler and cached.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from collbench.buildcache import BuildError, cache_key, cached_build, default_cache_dir
from collbench.kernel.build import mpi_fingerprint
from collbench.launch import process

if TYPE_CHECKING:
    from collbench.plan import Launch

NAME = "rankguard"


def source() -> Path:
    return Path(str(resources.files("collbench.launch").joinpath(f"{NAME}.c")))


def build(compiler: Path) -> Path:
    """The guard built with the MPI's C compiler wrapper (cached; no MPI library needed)."""
    cache_dir = default_cache_dir()
    src = source()
    key = cache_key(NAME, _identity(compiler), src.read_bytes())
    # --as-needed: the wrapper's MPI libraries are not loaded by a guard that calls none
    return cached_build("guard", NAME, key,
                        lambda out: [str(compiler), "-O2", "-Wl,--as-needed", "-o", str(out),
                                     str(src)],
                        "the rank guard", cache_dir, error=BuildError).path


@functools.cache
def _identity(compiler: Path) -> str:
    """The compiler's fingerprint, once per process (it asks the compiler three times)."""
    return mpi_fingerprint(compiler)


def share(nprocs: int) -> int:
    """Bytes one rank may print: its share of the launch's output limit."""
    return max(0, process.OUTPUT_LIMIT // max(1, nprocs))


def argv(compiler: Path, launch: Launch) -> list[str]:
    """What goes before each rank's command: the guard and the rank's share of the output
    limit for a workload's program; nothing for the kernel (collbench's own)."""
    if launch.program is None:
        return []
    return [str(build(compiler)), str(share(launch.nprocs))]
