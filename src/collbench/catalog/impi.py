"""Intel MPI: its environment, its `I_MPI_ADJUST_<COLL>` presets and how forcing one shows.

Since 2021.13 `I_MPI_ADJUST_<COLL>` selects a *preset*: an algorithm with its parameters
("presets are algorithmic derivatives; the number of presets surpasses the number of
algorithms", Intel MPI Developer Reference 2021.13+). Neither `impi_info` nor the
documentation names the algorithm behind each preset id: `impi_info -a` gives the range
of ids the installed library accepts (`range: 0-22` for bcast in 2021.18). So the
catalogue holds `preset1` .. `presetN` with those ids (0 is Intel's own choice,
"default"), and nothing else: an id outside the range is refused when planning.

Forcing is `I_MPI_ADJUST_<COLL>=<id>` with `I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK=1`:
Intel MPI silently replaces a preset that cannot run here (e.g. a topology-aware one on
one node) unless that is set; with it the job aborts naming the collective and the preset
(`I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK BCAST: algo #12 has fallback`), which
`fallback_problem` turns into the failed launch's one-line reason.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from collbench.catalog.algorithms import Algorithm, Catalog
from collbench.catalog.collectives import COLLECTIVES, Kind

INFO_TIMEOUT_S: Final = 60
MAX_PRESETS: Final = 256  # bound on an id range read from impi_info
PRESET: Final = "preset"
FALLBACK_VAR: Final = "I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK"
FABRICS_VAR: Final = "I_MPI_FABRICS"
TUNING_VAR: Final = "I_MPI_TUNING"  # a JSON tuning file (tune/impi.py)
# Intel's run-time autotuner: on, where it dumps its choices, a dump to run with
# (tune/impi_autotuner.py)
AUTOTUNE_MODE_VAR: Final = "I_MPI_TUNING_MODE"
AUTOTUNE_DUMP_VAR: Final = "I_MPI_TUNING_BIN_DUMP"
AUTOTUNE_BIN_VAR: Final = "I_MPI_TUNING_BIN"
_TUNING_FILES: Final = (TUNING_VAR, AUTOTUNE_MODE_VAR, AUTOTUNE_DUMP_VAR, AUTOTUNE_BIN_VAR)
_BLOCK: Final = re.compile(r"^(I_MPI_\w+)\s*$")
_RANGE: Final = re.compile(r"range:\s*(\d{1,6})\s*-\s*(\d{1,6})")
_FALLBACK: Final = re.compile(FALLBACK_VAR + r"\s+([A-Z_]{1,40}): algo #(-?\d{1,6}) has fallback")


def adjust_var(collective: str) -> str:
    """`bcast` -> `I_MPI_ADJUST_BCAST` (every collective collbench measures has one)."""
    return f"I_MPI_ADJUST_{collective.upper()}"


def prefix_of(bindir: Path) -> Path:
    return bindir.parent


def environment(bindir: Path) -> dict[str, str]:
    """What Intel MPI's tools and programs need beyond PATH: the wheel ships neither
    `mpivars.sh` nor rpaths on its tools (`impi_info` does not start without the library
    path), and its compiler wrappers take the prefix from I_MPI_ROOT. Set from the
    install's own prefix, so that a module's I_MPI_ROOT of another Intel MPI cannot leak
    in; FI_PROVIDER_PATH only when the user has not chosen providers."""
    prefix = prefix_of(bindir)
    lib = str(prefix / "lib")
    env = {"I_MPI_ROOT": str(prefix),
           "LD_LIBRARY_PATH": os.pathsep.join(
               p for p in (lib, str(prefix / "lib" / "release"),
                           os.environ.get("LD_LIBRARY_PATH", "")) if p)}
    if "FI_PROVIDER_PATH" not in os.environ:
        env["FI_PROVIDER_PATH"] = lib
    return env


def recorded_environment(bindir: Path) -> dict[str, str]:
    """The install's part of `environment` (what a marker or provenance records)."""
    prefix = prefix_of(bindir)
    return {"I_MPI_ROOT": str(prefix), "LD_LIBRARY_PATH": str(prefix / "lib"),
            "FI_PROVIDER_PATH": str(prefix / "lib")}


# Set on every launch unless the user chose fabrics (I_MPI_FABRICS in the spec's env or the
# environment). On one host Intel MPI runs shm alone and loads its shm-only tuning file,
# whose own choices routinely fall back to another preset (barrier at 2 ranks, 2021.18.1):
# with I_MPI_ADJUST_FAILURE_ON_COLL_FALLBACK=1 (forcing) that aborts every launch. shm:ofi
# is what a multi-node job runs anyway; on one host ranks still talk through shared memory.
STARTUP_ENV: Final = {FABRICS_VAR: "shm:ofi"}


def startup_env(launch_env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    chosen = FABRICS_VAR in launch_env or FABRICS_VAR in os.environ
    return () if chosen else tuple(STARTUP_ENV.items())


def version(bindir: Path) -> str | None:
    """The library's version: `I_MPI_VERSION` in its mpi.h, else `mpiexec.hydra -V`."""
    header = prefix_of(bindir) / "include" / "mpi.h"
    try:
        text = header.read_text(errors="replace")[:200_000]
    except OSError:
        text = ""
    m = re.search(r'#define\s+I_MPI_VERSION\s+"([0-9][0-9A-Za-z.]{0,30})"', text)
    if m:
        return m.group(1)
    out = _run([str(bindir / "mpiexec.hydra"), "-V"], bindir)
    m = re.search(r"Version\s+([0-9][0-9.]{0,30}[0-9])", out)
    return m.group(1) if m else None


def _run(argv: list[str], bindir: Path) -> str:
    env = {**os.environ, **environment(bindir)}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=INFO_TIMEOUT_S,
                              check=False, env=env, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr


def parse_ranges(text: str) -> dict[str, int]:
    """`impi_info -a` -> {variable: highest preset id} for the I_MPI_ADJUST_<COLL> blocks
    that state a range (bounded: an id above MAX_PRESETS is not believed)."""
    out: dict[str, int] = {}
    current: str | None = None
    for line in text.splitlines():
        if m := _BLOCK.match(line):
            current = m.group(1)
            continue
        if current and current.startswith("I_MPI_ADJUST_") and (r := _RANGE.search(line)):
            low, high = int(r.group(1)), int(r.group(2))
            if low == 0 and 0 < high <= MAX_PRESETS:
                out[current] = high
            current = None
    return out


def presets(ranges: dict[str, int]) -> dict[str, tuple[Algorithm, ...]]:
    """The catalogue: `presetN` (id N) for every collective collbench measures."""
    table = {}
    for coll, c in COLLECTIVES.items():
        high = ranges.get(adjust_var(coll)) if c.kind is not Kind.P2P else None
        if high:
            # Forced per launch through the environment: not switchable inside one, and a
            # preset carries its own segment size and radix.
            table[coll] = tuple(Algorithm(coll, f"{PRESET}{i}", i, False, False)
                                for i in range(1, high + 1))
    return table


def catalog(info_tool: Path, version_text: str) -> Catalog:
    """The presets the installed library accepts, asked of its `impi_info -a`."""
    ranges = parse_ranges(_run([str(info_tool), "-a"], info_tool.parent))
    source = (f"{info_tool} -a (preset id ranges; Intel documents no algorithm name per "
              "preset id)" if ranges else f"{info_tool} -a gave no preset ranges")
    return Catalog("impi", version_text, source, presets(ranges))


def forcing_env(collective: str, algorithm: Algorithm) -> dict[str, str]:
    """The environment that makes Intel MPI run `algorithm`, or fail the launch saying it
    could not (never silently another preset)."""
    return {adjust_var(collective): str(algorithm.id), FALLBACK_VAR: "1"}


def is_forcing_env(name: str) -> bool:
    """I_MPI_ADJUST_<COLL> of a collective, the fallback switch forcing sets, or a tuning
    file (I_MPI_TUNING, the autotuner's I_MPI_TUNING_BIN...: the tuned and autotuner arms of
    `tune validate --impi`, whose rows differ from the default's by their algorithm label
    only, as Open MPI's rules file)."""
    if name in (FALLBACK_VAR, *_TUNING_FILES):
        return True
    coll = COLLECTIVES.get(name.removeprefix("I_MPI_ADJUST_").lower())
    return name.startswith("I_MPI_ADJUST_") and coll is not None and coll.kind is not Kind.P2P


def environment_problem(environ: Mapping[str, str]) -> str | None:
    """Why a campaign must not start with Intel MPI forcing settings in the environment:
    they would run under another label ("default" or another preset). One line."""
    found = sorted(k for k in environ if k not in (FALLBACK_VAR, *_TUNING_FILES)
                   and is_forcing_env(k))
    if not found:
        return None
    key = found[0]
    coll = key.removeprefix("I_MPI_ADJUST_").lower()
    value = environ[key][:40]
    example = f' (algorithms = ["{PRESET}{value}"])' if value.isdigit() else ""
    return (f"{key}={value!r} in the environment forces Intel MPI's {coll} on every launch, "
            "and rows would name another algorithm; unset it and list the preset in "
            f"measure.algorithms instead{example}")


def fallback_problem(text: str, env: Mapping[str, str]) -> str | None:
    """The one-line reason a forced launch stopped on a fallback, from its output; `env`
    is the launch's environment (which preset was forced). The `algo #N` Intel MPI prints
    is its internal algorithm number, not the preset id."""
    m = _FALLBACK.search(text)
    if m is None:
        return None
    coll, internal = m.group(1).lower(), int(m.group(2))
    inner = f" (its algorithm #{internal})" if internal >= 0 else ""
    forced = env.get(adjust_var(coll))
    if forced is None:  # Intel MPI's own choice for a collective the kernel also calls
        return (f"Intel MPI's own {coll} choice falls back to another preset here{inner}, "
                f"and {FALLBACK_VAR}=1 (set to check the forcing) stopped the launch; set "
                f"{FABRICS_VAR} or force {adjust_var(coll)} too")
    return (f"Intel MPI {adjust_var(coll)}={forced[:20]}: {coll} {PRESET}{forced[:20]} cannot "
            f"run here{inner} and would fall back to another; {FALLBACK_VAR}=1 stopped the "
            "launch, so the forcing did not take effect")
