"""How smpirun loads a platform: the XML itself, or collbench's loader for calibrated ones.

A calibrated cluster has size-dependent factors per placement level, which SMPI's options
cannot express (one table for the whole platform). collbench_platform.cpp, compiled once
into a shared library (cached by source, compiler and SimGrid version), loads the XML and
installs per-level factor callbacks; smpirun takes it as `-platform LIB.so` with the XML's
path in $COLLBENCH_PLATFORM_XML. An uncalibrated cluster needs no compiler: the XML goes
to smpirun directly, with SMPI's default factors (fitted on another machine) set to 1 so
that a ping-pong takes exactly the description's latency and bandwidth.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path
from typing import Final

from collbench.errors import UserError
from collbench.kernel.build import default_cache_dir
from collbench.platforms.model import Cluster

SOURCE: Final = "collbench_platform.cpp"
LIBRARY: Final = "libcollbench_platform.so"
# "size:factor" form: a bare "1" crashes SMPI 3.32 (empty factor table).
UNIT_FACTORS: Final = ("--cfg=smpi/lat-factor:0:1", "--cfg=smpi/bw-factor:0:1")
XML_ENV: Final = "COLLBENCH_PLATFORM_XML"


def loader_source() -> Path:
    return Path(str(resources.files("collbench.platforms").joinpath(SOURCE)))


def _compiler() -> str:
    for name in ("g++", "c++", "clang++"):
        found = shutil.which(name)
        if found:
            return found
    raise UserError("a calibrated platform needs a C++ compiler to build collbench's "
                    "SimGrid platform loader; install one (Debian/Ubuntu: apt-get install g++)")


def _version(cxx: str) -> str:
    try:
        return subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60,
                              check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def build_loader(simgrid_version: str, cache_dir: Path | None = None) -> Path:
    """The compiled loader (built once per source, compiler and SimGrid version)."""
    cxx, src = _compiler(), loader_source()
    key = hashlib.sha256("\0".join([cxx, _version(cxx), simgrid_version]).encode()
                         + src.read_bytes()).hexdigest()[:24]
    out_dir = (cache_dir or default_cache_dir()) / "platform-loader" / key
    out = out_dir / LIBRARY
    if out.is_file():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{LIBRARY}.", dir=out_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", str(src), "-o", str(tmp), "-lsimgrid"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise UserError(f"building the platform loader failed (exit {done.returncode}): "
                            f"{shlex.join(cmd)}\n{done.stdout}{done.stderr}".rstrip())
        tmp.replace(out)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"building the platform loader failed: {shlex.join(cmd)}: {e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return out


def platform_args(cluster: Cluster, xml: Path, simgrid_version: str,
                  cache_dir: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """(smpirun arguments, extra environment) that load this cluster's platform."""
    if cluster.calibrated():
        return (["-platform", str(build_loader(simgrid_version, cache_dir))],
                {XML_ENV: str(xml)})
    return ["-platform", str(xml), *UNIT_FACTORS], {}
