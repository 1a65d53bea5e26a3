"""Compile the measurement kernel with the MPI under study, cached by fingerprint.

The binary lives at ``<cache>/kernels/<fingerprint>/collbench_kernel``, where the
fingerprint hashes the MPI wrapper compiler (its resolved path, what it runs and its
version), the kernel source and the extra flags. A different MPI, a changed source or
other flags therefore give a new binary; the same inputs reuse the old one.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from collbench.buildcache import BuildError, cache_key, cached_build

KERNEL_NAME = "collbench_kernel"
SOURCE_NAME = "collbench_kernel.c"
# Compiled into every kernel beside SOURCE_NAME (with their headers in the fingerprint):
# clock synchronisation and the completion-time loop.
SUPPORT_NAMES = ("clocksync.c",)
# A real MPI's kernel also links the coll component probe (collprobe.c), whose functions
# the executable exports (ld --dynamic-list) so that they take the place of Open MPI's.
PROBE_NAME = "collprobe.c"
PROBE_LIST = "collprobe.list"
_PROBE_TIMEOUT_S = 60


@dataclass(frozen=True)
class KernelBinary:
    path: Path
    fingerprint: str  # hash of the MPI fingerprint, the kernel source and the flags
    compile_command: list[str]
    fresh: bool = False  # compiled by this call, not taken from the cache


class KernelBuildError(BuildError):
    """The kernel did not compile; the message holds the command and compiler output."""


def _resolve(compiler: Path) -> Path:
    """The compiler's absolute path (a bare name is looked up on PATH)."""
    found = shutil.which(str(compiler))
    if found is None:
        raise KernelBuildError(f"MPI compiler not found: {compiler}")
    return Path(found).resolve()


def _probe(cmd: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def mpi_fingerprint(mpicc: Path) -> str:
    """sha256 of the resolved wrapper path, its `-show` line and `--version` output."""
    path = _resolve(mpicc)
    show = ""
    # Open MPI and MPICH wrappers print the underlying command with -show; some only
    # understand -showme.
    for flag in ("-show", "-showme"):
        res = _probe([str(path), flag])
        if res is not None and res.returncode == 0:
            show = res.stdout
            break
    version = _probe([str(path), "--version"])
    parts = [str(path), show, version.stdout if version is not None else ""]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def kernel_source() -> Path:
    """The kernel's C source shipped in this package."""
    return Path(str(resources.files("collbench.kernel").joinpath(SOURCE_NAME)))


def _package_dir() -> Path:
    return Path(str(resources.files("collbench.kernel")))


def support_sources() -> list[Path]:
    """The C sources every kernel build links in beside the kernel source."""
    return [_package_dir() / name for name in SUPPORT_NAMES]


def port_sources() -> list[Path]:
    """The C sources of collbench's ports of Open MPI's algorithms (kernel/ports/), without
    their test driver: what the SimGrid build links into the kernel."""
    ports = Path(str(resources.files("collbench.kernel").joinpath("ports")))
    return sorted(p for p in ports.glob("*.c") if p.name != "port_driver.c")


def _command(mpicc: Path, out: Path, src: Path, extra_cflags: Sequence[str],
             extra_sources: Sequence[Path] = ()) -> list[str]:
    # -I: the support headers are found wherever the kernel source is
    return [str(mpicc), "-O2", *extra_cflags, "-I", str(_package_dir()), "-o", str(out),
            str(src), *(str(p) for p in extra_sources), "-lm"]


def probe_flags() -> list[str]:
    """Link flags that export the probe's functions from the kernel executable."""
    return [f"-Wl,--dynamic-list={_package_dir() / PROBE_LIST}", "-ldl"]


def build_kernel(mpicc: Path, cache_dir: Path | None = None,
                 extra_cflags: Sequence[str] = (),
                 extra_sources: Sequence[Path] = (), probe: bool = False) -> KernelBinary:
    """Compile the kernel (or reuse the cached binary) and return where it is.

    The support sources and `extra_sources` (the SimGrid build's ports) are compiled and
    linked in, and with `probe` the coll component probe (a real MPI's build); their
    contents (and those of the headers beside them) are part of the fingerprint.
    """
    src = kernel_source()
    if probe:
        extra_cflags = [*extra_cflags, "-DCOLLBENCH_PROBE", *probe_flags()]
        extra_sources = [*extra_sources, _package_dir() / PROBE_NAME]
    parts: list[str | bytes] = [mpi_fingerprint(mpicc), src.read_bytes(),
                                 "\0".join(extra_cflags)]
    if probe:
        parts.append((_package_dir() / PROBE_LIST).read_bytes())
    extra_sources = [*support_sources(), *extra_sources]
    if extra_sources:
        folders = sorted({p.parent for p in extra_sources})
        headers = sorted(h for d in folders for h in d.glob("*.h"))
        parts += [p.read_bytes() for p in [*extra_sources, *headers]]
    key = cache_key(*parts)
    built = cached_build("kernels", KERNEL_NAME, key,
                         lambda out: _command(mpicc, out, src, extra_cflags, extra_sources),
                         "the kernel", cache_dir, error=KernelBuildError)
    return KernelBinary(built.path, key, built.command, built.fresh)
