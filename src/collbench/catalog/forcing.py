"""Which launch settings only force an algorithm (they are not experiment parameters).

The algorithm, segsize, fanout and selection columns already record what was forced, so
these settings are left out of the params column and out of grouping: a forced launch and
the default launch of the same experiment must compare with each other.
"""

from __future__ import annotations

import re
from typing import Final

from collbench.catalog import impi

# coll/tuned's forcing keys, and libnbc's coll_libnbc_i<coll>_algorithm (its k-nomial radix,
# coll_libnbc_ibcast_knomial_radix, is a tunable like any other: it stays a parameter).
_MCA: Final = re.compile(r"coll_tuned_(use_dynamic_rules|\w+_algorithm(_\w+)?)"
                         r"|coll_libnbc_\w+_algorithm")
_ENV: Final = re.compile(
    r"OMPI_MCA_coll_tuned_(use_dynamic_rules|\w+_algorithm(_\w+)?)"
    r"|OMPI_MCA_coll_libnbc_\w+_algorithm"
    r"|MPIR_CVAR_\w+_INTRA_ALGORITHM|MPIR_CVAR_DEVICE_COLLECTIVES|MPIR_CVAR_COLLECTIVE_FALLBACK")


# The transport label of a launch that sets no MCA parameter or environment variable (the
# point-to-point models and the read door both name it; numpy-free here).
DEFAULT_TRANSPORT: Final = "default"


def is_forcing_mca(name: str) -> bool:
    return _MCA.fullmatch(name) is not None


def is_forcing_env(name: str) -> bool:
    # Intel MPI: I_MPI_ADJUST_<COLL> and its fallback switch (its _RADIX / _SEGSIZE knobs
    # of one preset stay parameters, as libnbc's radix does)
    return _ENV.fullmatch(name) is not None or impi.is_forcing_env(name)
