"""Compile the measurement kernel with the MPI under study, cached by fingerprint.

The binary lives at ``<cache>/kernels/<fingerprint>/collbench_kernel``, where the
fingerprint hashes the MPI wrapper compiler (its resolved path, what it runs and its
version), the kernel source and the extra flags. A different MPI, a changed source or
other flags therefore give a new binary; the same inputs reuse the old one.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from collbench.errors import UserError

KERNEL_NAME = "collbench_kernel"
SOURCE_NAME = "collbench_kernel.c"
_PROBE_TIMEOUT_S = 60
_COMPILE_TIMEOUT_S = 600


@dataclass(frozen=True)
class KernelBinary:
    path: Path
    fingerprint: str  # hash of the MPI fingerprint, the kernel source and the flags
    compile_command: list[str]


class KernelBuildError(UserError):
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


def default_cache_dir() -> Path:
    env = os.environ.get("COLLBENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "collbench"


def _command(mpicc: Path, out: Path, src: Path, extra_cflags: Sequence[str]) -> list[str]:
    return [str(mpicc), "-O2", *extra_cflags, "-o", str(out), str(src), "-lm"]


def build_kernel(mpicc: Path, cache_dir: Path | None = None,
                 extra_cflags: Sequence[str] = ()) -> KernelBinary:
    """Compile the kernel (or reuse the cached binary) and return where it is."""
    src = kernel_source()
    digest = hashlib.sha256()
    digest.update(mpi_fingerprint(mpicc).encode())
    digest.update(src.read_bytes())
    digest.update("\0".join(extra_cflags).encode())
    fingerprint = digest.hexdigest()[:24]

    out_dir = (cache_dir or default_cache_dir()) / "kernels" / fingerprint
    out = out_dir / KERNEL_NAME
    command = _command(mpicc, out, src, extra_cflags)
    if out.is_file() and os.access(out, os.X_OK):
        return KernelBinary(out, fingerprint, command)

    out_dir.mkdir(parents=True, exist_ok=True)
    # Compile to a private name, then rename: concurrent builds each publish a whole file.
    fd, tmp_name = tempfile.mkstemp(prefix=f".{KERNEL_NAME}.", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    run = _command(mpicc, tmp, src, extra_cflags)
    try:
        res = subprocess.run(run, capture_output=True, text=True, timeout=_COMPILE_TIMEOUT_S,
                             check=False)
        if res.returncode != 0:
            raise KernelBuildError(
                f"compiling the kernel failed (exit {res.returncode}): {shlex.join(run)}\n"
                f"{res.stdout}{res.stderr}".rstrip())
        tmp.chmod(0o755)
        tmp.replace(out)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KernelBuildError(f"compiling the kernel failed: {shlex.join(run)}\n{exc}") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return KernelBinary(out, fingerprint, command)
