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

import shutil
from importlib import resources
from pathlib import Path
from typing import Final

from collbench.buildcache import cache_key, cached_build, compiler_identity
from collbench.errors import UserError
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


def build_loader(simgrid_version: str, cache_dir: Path | None = None) -> Path:
    """The compiled loader (built once per source, compiler and SimGrid version)."""
    cxx, src = _compiler(), loader_source()
    key = cache_key(cxx, compiler_identity(cxx), simgrid_version, src.read_bytes())

    def command(out: Path) -> list[str]:
        return [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", str(src), "-o", str(out),
                "-lsimgrid"]

    return cached_build("platform-loader", LIBRARY, key, command, "the platform loader",
                        cache_dir).path


def platform_args(cluster: Cluster, xml: Path, simgrid_version: str,
                  cache_dir: Path | None = None) -> tuple[list[str], dict[str, str]]:
    """(smpirun arguments, extra environment) that load this cluster's platform."""
    if cluster.calibrated():
        return (["-platform", str(build_loader(simgrid_version, cache_dir))],
                {XML_ENV: str(xml)})
    return ["-platform", str(xml), *UNIT_FACTORS], {}
