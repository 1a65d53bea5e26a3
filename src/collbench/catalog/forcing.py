"""Which launch settings only force an algorithm (they are not experiment parameters).

The algorithm, segsize, fanout and selection columns already record what was forced, so
these settings are left out of the params column and out of grouping: a forced launch and
the default launch of the same experiment must compare with each other.
"""

from __future__ import annotations

import re
from typing import Final

_MCA: Final = re.compile(r"coll_tuned_(use_dynamic_rules|\w+_algorithm(_\w+)?)")
_ENV: Final = re.compile(
    r"OMPI_MCA_coll_tuned_(use_dynamic_rules|\w+_algorithm(_\w+)?)"
    r"|MPIR_CVAR_\w+_INTRA_ALGORITHM|MPIR_CVAR_DEVICE_COLLECTIVES|MPIR_CVAR_COLLECTIVE_FALLBACK")


def is_forcing_mca(name: str) -> bool:
    return _MCA.fullmatch(name) is not None


def is_forcing_env(name: str) -> bool:
    return _ENV.fullmatch(name) is not None
