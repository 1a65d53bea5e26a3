"""The algorithm table of an MPI installation: asked of the MPI, or built in."""

from __future__ import annotations

from collbench.catalog import impi, mpich, openmpi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import MpiInstall


def load_catalog(mpi: MpiInstall) -> Catalog:
    """The algorithm table of the MPI under study."""
    if mpi.implementation == "openmpi" and mpi.info_tool is not None:
        # both read the one ompi_info listing (catalog/ompi_info.py)
        (algs, source), (nbc, nbc_source) = (openmpi.query(mpi.info_tool),
                                             openmpi.query_libnbc(mpi.info_tool))
        return Catalog("openmpi", mpi.version, f"{source}; {nbc_source}", {**algs, **nbc},
                       openmpi.query_han(mpi.info_tool, mpi.version))
    if mpi.implementation == "mpich":
        return Catalog("mpich", mpi.version, "built-in table for MPICH 4.x/5.0", mpich.table())
    if mpi.implementation == "impi" and mpi.info_tool is not None:
        return impi.catalog(mpi.info_tool, mpi.version)  # its impi_info's preset ranges
    return Catalog(mpi.implementation, mpi.version, "none", {})
