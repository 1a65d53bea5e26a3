"""collbench: measure, explain and tune MPI collective operations.

The public API is what this module exports; everything else is internal and may change
(docs/architecture.md):

    import collbench
    results = collbench.open_results("results/quick")     # a results folder (Store)
    con = results.connect()                               # DuckDB: measurements, samples
    cmp = collbench.compare(results, baseline="default")  # ratios, CIs, best per size
    source = collbench.SpecSource.from_file(Path("examples/quickstart.toml"))
    mpi = collbench.find_mpi()                            # the Open MPI wheel by default
    plan = collbench.prepare(source, mpi, collbench.Request(Path("results/x"))).plan
    camp = collbench.open_campaign(source, mpi, collbench.Request(Path("results/x")))
    summary = camp.run()
    df = collbench.open("results/quick").measurements()   # pandas DataFrame (notebooks)

Names are imported on first use, so `import collbench` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from collbench.version import __version__

_API: dict[str, str] = {
    "Campaign": "collbench.campaign",
    "Request": "collbench.campaign",
    "SpecSource": "collbench.campaign",
    "open_campaign": "collbench.campaign",
    "prepare": "collbench.campaign",
    "load_spec": "collbench.spec",
    "Spec": "collbench.spec",
    "find_mpi": "collbench.catalog.mpi",
    "open_results": "collbench.store",
    "Store": "collbench.store",
    "compare": "collbench.analyse.compare",
    "open": "collbench.api",
    "Results": "collbench.api",
    "UserError": "collbench.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'collbench' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
