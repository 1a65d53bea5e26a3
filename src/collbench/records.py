"""The tidy data model: one row per measured point.

Every result (measured by the kernel, imported from OSU/IMB, simulated) is stored as
rows with exactly these columns, so every analysis is one query over a results folder.
Sizes are bytes per rank as OSU counts them (see catalog.collectives for how Open MPI's
rules files count differently).
"""

from __future__ import annotations

from typing import Any, Final

FORMAT_VERSION: Final = 3
# What each results-folder format version holds. A reader reads the versions in
# READABLE_FORMATS; a new version adds a line here (and an upgrade step in store.py when
# an older folder cannot be read as it is; campaign.json's format_version says which one
# a folder is).
FORMAT_HISTORY: Final[dict[int, str]] = {
    1: "the layout store.py documents; rows with the COLUMNS below (metrics as a JSON "
       "string), samples with SAMPLE_COLUMNS, the plan in PLAN_FORMAT 1",
    2: "as 1, but a kernel row's mpi is the MPI's key '<implementation>-<version>' "
       "(openmpi-4.1.8; it was the implementation alone), so that rows of several MPIs in "
       "one campaign ([measure] mpi) differ in one column; provenance.json adds mpis (key "
       "-> that MPI's description and kernel) for such campaigns; the plan in PLAN_FORMAT "
       "2. Version 1 folders are read as they are (mpi_implementation reads both).",
    3: "as 2, with a component column: the coll component that served a kernel row, as "
       "Open MPI reported it at run time (tuned, han, libnbc, ...; docs/components.md), "
       "what a simulation or a model simulated (tuned, smpi), the implementation for other "
       "MPIs (mpich), p2p for point-to-point benchmarks. Version 1 and 2 folders are read "
       "as they are, their component as unknown (nothing recorded what served them).",
}
READABLE_FORMATS: Final = (1, 2, 3)
# The component of a row whose MPI did not say (format 1-2 rows, ingested files).
UNKNOWN_COMPONENT: Final = "unknown"

# Column name -> DuckDB type. Order is the order of columns in exports.
COLUMNS: Final[dict[str, str]] = {
    "campaign": "VARCHAR",
    "launch_id": "VARCHAR",
    "repetition": "INTEGER",
    "backend": "VARCHAR",
    "source": "VARCHAR",  # "kernel", "osu", "imb", ...
    "mpi": "VARCHAR",
    "mpi_version": "VARCHAR",
    "collective": "VARCHAR",
    "component": "VARCHAR",  # coll component that served it (tuned, han, ...): format 3
    "algorithm": "VARCHAR",  # name as the MPI spells it, "default" for the MPI's own choice
    "algorithm_id": "INTEGER",  # Open MPI id; 0 = default; NULL where ids do not exist
    "segsize": "BIGINT",  # 0 = unsegmented / MPI default
    "fanout": "INTEGER",  # 0 = MPI default
    "selection": "VARCHAR",  # how the algorithm was forced: "mpit", "launch", "none"
    "params": "VARCHAR",  # JSON object: MCA settings and other launch parameters
    "nprocs": "INTEGER",
    "nodes": "INTEGER",
    "ppn": "INTEGER",
    "mapping": "VARCHAR",  # --map-by value
    "binding": "VARCHAR",  # --bind-to value
    "size_bytes": "BIGINT",
    "iterations": "INTEGER",
    "warmup": "INTEGER",
    "avg_us": "DOUBLE",
    "min_us": "DOUBLE",
    "max_us": "DOUBLE",
    "median_us": "DOUBLE",
    "bandwidth_mbs": "DOUBLE",  # point-to-point bandwidth (MB/s, OSU's 1e6); NULL otherwise
    "metrics": "VARCHAR",  # JSON object of further figures: tail percentiles (p50_us, p99_us),
    # non-blocking overlap (overall_us, compute_us, pure_us, overlap_pct, ...), IMB's mbytes_s,
    # completion time (completion_us, completion_ci, sync_error_us, ...), precision reached
    "validated": "BOOLEAN",
    "status": "VARCHAR",  # ok | invalid | failed | timeout | skipped
    "error": "VARCHAR",
}

STATUSES: Final = ("ok", "invalid", "failed", "timeout", "skipped")

# Raw per-iteration samples (side table): one row per timed iteration.
SAMPLE_COLUMNS: Final[dict[str, str]] = {
    "launch_id": "VARCHAR",
    "collective": "VARCHAR",
    "component": "VARCHAR",  # coll component that served it (tuned, han, ...): format 3
    "algorithm": "VARCHAR",
    "segsize": "BIGINT",
    "fanout": "INTEGER",
    "size_bytes": "BIGINT",
    "iteration": "INTEGER",
    "sample_us": "DOUBLE",  # this iteration's time averaged over ranks
}


def mpi_key(implementation: str, version: str) -> str:
    """The name of one MPI in rows, plans and folders: `openmpi-4.1.8`."""
    return f"{implementation}-{version}"


def mpi_implementation(mpi: str) -> str:
    """The implementation in a row's mpi column: `openmpi-4.1.8` (format 2) or `openmpi`
    (format 1, ingested rows) -> `openmpi`."""
    return mpi.split("-", 1)[0]


def ranks_per_node(nprocs: int, nodes: int, ppn: int | None = None) -> int:
    """The `ppn` column: the launch's ranks per node when it asked for some ([measure] ppn;
    never more than its ranks), else its ranks spread evenly over the nodes it used."""
    if ppn:
        return min(ppn, nprocs)
    return max(1, nprocs // max(nodes, 1))


def make_row(**fields: Any) -> dict[str, Any]:
    """A complete row: unknown keys are an error, missing keys are None."""
    unknown = set(fields) - set(COLUMNS)
    if unknown:
        raise KeyError(f"unknown row fields: {sorted(unknown)}")
    return {name: fields.get(name) for name in COLUMNS}
