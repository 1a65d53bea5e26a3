"""The algorithm table of an MPI installation: asked of the MPI, or built in."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from collbench.catalog import mpich, openmpi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import MpiInstall


def load_catalog(mpi: MpiInstall) -> Catalog:
    """The algorithm table of the MPI under study."""
    if mpi.implementation == "openmpi" and mpi.info_tool is not None:
        # Two ompi_info runs of ~50 ms each, side by side (every plan and run waits on them)
        with ThreadPoolExecutor(2) as pool:
            tuned = pool.submit(openmpi.query, mpi.info_tool)
            libnbc = pool.submit(openmpi.query_libnbc, mpi.info_tool)
            (algs, source), (nbc, nbc_source) = tuned.result(), libnbc.result()
        return Catalog("openmpi", mpi.version, f"{source}; {nbc_source}", {**algs, **nbc})
    if mpi.implementation == "mpich":
        return Catalog("mpich", mpi.version, "built-in table for MPICH 4.x/5.0", mpich.table())
    return Catalog(mpi.implementation, mpi.version, "none", {})
