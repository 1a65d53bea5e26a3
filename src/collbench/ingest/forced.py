"""Which algorithm an ingested run forced, and that MPI version's names for the ids.

OSU's recorder writes the run's command line (`### cmd: mpirun --mca
coll_tuned_bcast_algorithm 6 ... osu_bcast`): an algorithm forced there ran, so its rows
are that algorithm's, never `default`. Ids are named with the table of the Open MPI
version the file came from (`--mpi-version`): the installed MPI's own (ompi_info), or the
built-in 5.0 table; MPICH forces by name (`MPIR_CVAR_<COLL>_INTRA_ALGORITHM`).
"""

from __future__ import annotations

import re
import shlex
from typing import Final

from collbench.catalog import mpich
from collbench.catalog.algorithms import Algorithm, Catalog
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import MpiInstall
from collbench.catalog.openmpi import FALLBACK_5_0, LIBNBC_FALLBACK_5_0, SEGMENTED
from collbench.errors import UserError

_MCA_FLAGS: Final = ("--mca", "-mca", "--gmca", "-gmca")
_ENV_FLAGS: Final = ("-x", "--x")  # mpirun -x NAME=VALUE
_MPICH_ENV_FLAGS: Final = ("-env", "-genv")  # mpiexec (hydra) -env NAME VALUE
_PROGRAM: Final = re.compile(r"(osu_|IMB-)\S*")
_MPICH_CVAR: Final = re.compile(r"MPIR_CVAR_(\w+?)_INTRA_ALGORITHM")
OPENMPI_NAMES: Final = ("openmpi", "open mpi", "open-mpi", "ompi")


def recorded_mca(command: str | None) -> dict[str, str]:
    """MCA settings of a recorded launch command (`--mca K V`, `-mca`, `-x OMPI_MCA_K=V`,
    an `OMPI_MCA_K=V` prefix), up to the benchmark program; MPICH's forcing variables
    (`-env`/`-genv NAME VALUE`, `NAME=VALUE` prefixes) are kept under their own names."""
    if not command:
        return {}
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote: read it word by word
        words = command.split()
    found: dict[str, str] = {}
    i = 0
    while i < len(words):
        word = words[i]
        if _PROGRAM.fullmatch(word.rsplit("/", 1)[-1]):
            break  # the benchmark's own arguments follow
        if word in _MCA_FLAGS and i + 2 < len(words):
            found[words[i + 1]] = words[i + 2]
            i += 3
            continue
        if word in _MPICH_ENV_FLAGS and i + 2 < len(words):
            _env(f"{words[i + 1]}={words[i + 2]}", found)
            i += 3
            continue
        if word in _ENV_FLAGS and i + 1 < len(words):
            _env(words[i + 1], found)
            i += 2
            continue
        _env(word, found)
        i += 1
    return found


def _env(assignment: str, found: dict[str, str]) -> None:
    name, eq, value = assignment.partition("=")
    if not eq:
        return
    if name.startswith("OMPI_MCA_"):
        found[name.removeprefix("OMPI_MCA_")] = value
    elif _MPICH_CVAR.fullmatch(name):
        found[name] = value


def merged_mca(given: tuple[tuple[str, str], ...], recorded: dict[str, str],
               where: str) -> dict[str, str]:
    """--mca settings and the recorded command's; the two must agree where both speak."""
    out = dict(recorded)
    for key, value in given:
        if key in recorded and recorded[key].strip() != value.strip():
            raise UserError(f"{where}: --mca {key} {value} contradicts the recorded command "
                            f"({key} {recorded[key]})")
        out[key] = value
    return out


def mpich_forced(mca: dict[str, str]) -> dict[str, str]:
    """collective -> algorithm name forced with MPIR_CVAR_<COLL>_INTRA_ALGORITHM."""
    return {m.group(1).lower(): value for key, value in mca.items()
            if (m := _MPICH_CVAR.fullmatch(key))}


def _series(version: str) -> str | None:
    m = re.match(r"^v?(\d+)\.(\d+)", version.strip())
    return f"{int(m.group(1))}.{int(m.group(2))}" if m else None


def _builtin_5_0(version: str) -> Catalog:
    names = {**FALLBACK_5_0, **LIBNBC_FALLBACK_5_0}
    return Catalog("openmpi", version, "built-in table for Open MPI 5.0", {
        coll: tuple(Algorithm(coll, n, i + 1, True, coll in SEGMENTED)
                    for i, n in enumerate(ns))
        for coll, ns in names.items()})


def is_openmpi(mpi: str) -> bool:
    return mpi.strip().lower() in OPENMPI_NAMES


def catalog_for(mpi: str, version: str, installed: MpiInstall | None) -> Catalog | None:
    """The algorithm table of `mpi` `version`: the installed MPI's when it is that series,
    the built-in Open MPI 5.0 or MPICH table, else None (collbench has none)."""
    series = _series(version)
    if installed is not None and series is not None and \
            installed.implementation == _implementation(mpi) and \
            _series(installed.version) == series:
        return load_catalog(installed)
    if is_openmpi(mpi) and series == "5.0":
        return _builtin_5_0(version)
    if _implementation(mpi) == "mpich" and series is not None and int(series[0]) >= 4:
        return Catalog("mpich", version, "built-in table for MPICH 4.x/5.0", mpich.table())
    return None


def _implementation(mpi: str) -> str:
    return "openmpi" if is_openmpi(mpi) else mpi.strip().lower()


def known_tables(installed: MpiInstall | None) -> str:
    here = f"{installed.implementation} {installed.version} (installed), " \
        if installed is not None else ""
    return f"{here}openmpi 5.0.x, mpich 4.x-5.x"


def forced_ids(mca: dict[str, str]) -> tuple[dict[str, tuple[str, int]], dict[str, int],
                                         dict[str, int]]:
    """Per collective: the algorithm forced with --mca (key, id), segment size, fanout."""
    ids: dict[str, tuple[str, int]] = {}
    extra: tuple[dict[str, int], dict[str, int]] = ({}, {})
    pattern = re.compile(r"coll_(?:tuned|libnbc)_(\w+?)_algorithm"
                         r"(?:_(segmentsize)|_(tree_fanout|chain_fanout))?")
    for key, value in mca.items():
        if not (m := pattern.fullmatch(key)):
            continue
        if not re.fullmatch(r"\d{1,9}", value.strip()):
            raise UserError(f"--mca {key}={value}: expected a whole number")
        if m.group(2) or m.group(3):
            extra[0 if m.group(2) else 1][m.group(1)] = int(value)
        else:
            ids[m.group(1)] = (key, int(value))
    return ids, extra[0], extra[1]
