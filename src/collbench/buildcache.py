"""Compile once, reuse forever: the one on-demand builder behind the kernel, the trace shim
and the SimGrid platform loader.

A product lives at ``<cache>/<kind>/<key>/<name>``, where the key hashes everything that
decides the binary (compiler identity, sources, flags). It is compiled under a private name
and renamed into place, so concurrent builds each publish a whole file and a killed build
leaves nothing a later run would take for finished.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from collbench.errors import UserError

COMPILE_TIMEOUT_S = 600


class BuildError(UserError):
    """A compilation failed; the message holds the command and the compiler's output."""


@dataclass(frozen=True)
class Built:
    path: Path
    key: str  # the cache key (hash of every input)
    command: list[str]  # the command that builds it (at its final path)
    fresh: bool  # compiled by this call (False: taken from the cache)


def default_cache_dir() -> Path:
    env = os.environ.get("COLLBENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "collbench"


def cache_key(*parts: str | bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def cached_build(kind: str, name: str, key: str, command: Callable[[Path], list[str]],
                 what: str, cache_dir: Path | None = None, mode: int = 0o755,
                 timeout_s: float = COMPILE_TIMEOUT_S,
                 error: type[UserError] = BuildError, product: str | None = None) -> Built:
    """The product `name` of `command(output_path)`, built unless cached under `key`.

    `what` names it in errors ("the kernel", "the algtrace library", ...). With `product`
    (a user's build command, which names its own output), the command runs in a private
    empty folder and the file `product` it leaves there is the result."""
    out = (cache_dir or default_cache_dir()) / kind / key / name
    if out.is_file() and os.access(out, os.R_OK):
        return Built(out, key, command(out), fresh=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    run = command(tmp)
    try:
        with tempfile.TemporaryDirectory(prefix=f".{name}.", dir=out.parent) as folder:
            res = subprocess.run(run, capture_output=True, text=True, timeout=timeout_s,
                                 check=False, cwd=folder if product else None)
            if res.returncode != 0:
                raise error(f"compiling {what} failed (exit {res.returncode}): "
                            f"{shlex.join(run)}\n{res.stdout}{res.stderr}".rstrip())
            if product is not None:
                made = Path(folder) / product
                if not made.is_file():
                    raise error(f"compiling {what}: {shlex.join(run)} succeeded but left no "
                                f"{product} (the program the run command starts)")
                made.replace(tmp)
        tmp.chmod(mode)
        tmp.replace(out)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise error(f"compiling {what} failed: {shlex.join(run)}\n{exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return Built(out, key, command(out), fresh=True)


def compiler_identity(tool: str, flags: Sequence[str] = ("--version",)) -> str:
    """What a compiler says of itself (empty when it cannot be asked)."""
    try:
        return subprocess.run([tool, *flags], capture_output=True, text=True, timeout=60,
                              check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
