"""Open MPI's coll components: which one a row says served it, how a launch asks for one,
and when what ran is not what the row would say (docs/components.md).

Open MPI selects a component per communicator and per collective by priority (5.0: han 35,
tuned 30, libnbc 10, basic 10, adapt and sm 0; 4.1: han 0), minus exclusions (`--mca coll
^han`, the `ompi_comm_coll_preference` info key). The kernel's probe (kernel/collprobe.c)
records which component's entry served each point; these functions turn that into the
row's `component` and into a failed point where a forced setting did not take effect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from collbench.records import UNKNOWN_COMPONENT, mpi_implementation

# What `[measure] components` may name: the kernel's probe knows these (collprobe.c).
COMPONENTS: Final = ("tuned", "han", "basic", "sm", "self", "libnbc", "adapt", "ucc", "hcoll",
                     "xhc", "acoll")
DEFAULT: Final = "default"  # what Open MPI picks by itself (recorded, not asked for)
P2P: Final = "p2p"  # point-to-point benchmarks: no coll component serves them
SIMULATED_PORT: Final = "tuned"  # SimGrid: collbench's ports of coll/tuned's algorithms
SIMULATED_SMPI: Final = "smpi"  # SimGrid: SMPI's own collective
MODELLED: Final = "tuned"  # model predict: the models are of coll/tuned's algorithms
ENV: Final = "COLLBENCH_COMPONENT"  # tells the kernel which component the launch asked for
PRIORITY: Final = 100  # above every component's default (self: 75)
_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,31}")


# Components whose algorithms are the ones the algorithm column names (coll/tuned's, libnbc's
# for non-blocking collectives) or that say nothing more (unknown, p2p, another MPI, SMPI):
# a label names any other component beside the algorithm, "default@han".
_IMPLIED: Final = frozenset({"tuned", "libnbc", "unknown", P2P, SIMULATED_SMPI, "mpich",
                             "impi"})


def label_suffix(component: str | None) -> str:
    """'@han' for a variant served by coll/han, '' where the algorithm says it all."""
    if not component or component in _IMPLIED:
        return ""
    return f"@{component}"


def is_name(value: str) -> bool:
    return bool(_NAME.fullmatch(value))


def request_settings(component: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """(MCA, environment) of a launch that asks for `component` ([measure] components):
    its priority raised above every other's, and the kernel told (it keeps coll/han on the
    measured communicator when han is asked for). Nothing for "default"."""
    if component is None or component == DEFAULT:
        return {}, {}
    return {f"coll_{component}_priority": str(PRIORITY)}, {ENV: component}


def is_request_mca(key: str, component: str | None) -> bool:
    """The MCA key request_settings added for `component` (not part of a point's context)."""
    return component not in (None, DEFAULT) and key == f"coll_{component}_priority"


def row_component(mpi: str, collective_kind_p2p: bool, got: Mapping[str, Any],
                  expected: str | None) -> str:
    """The row's component: what the kernel's probe saw; in the SMPI build, whose code ran
    (its output's "implementation"); for MPIs without coll components, the implementation
    (mpich, impi, smpi); `expected` (what the launch asked for or forced) when the point did
    not run, else unknown."""
    if collective_kind_p2p:
        return P2P
    seen = got.get("component")
    if isinstance(seen, str) and is_name(seen):
        return seen
    impl = got.get("implementation")
    if impl == "port":
        return SIMULATED_PORT
    if impl == "smpi":
        return SIMULATED_SMPI
    implementation = mpi_implementation(mpi)
    if implementation not in ("openmpi", ""):
        return implementation
    return expected or UNKNOWN_COMPONENT


def expected(requested: str | None, forced_tuned: bool, forced_nonblocking: bool) -> str | None:
    """The component a point must be served by: the one its launch asked for, coll/tuned
    for a forced tuned algorithm, libnbc for a forced non-blocking one; None: any."""
    if requested not in (None, DEFAULT):
        return requested
    if forced_tuned:
        return "tuned"
    if forced_nonblocking:
        return "libnbc"
    return None


def served_problem(collective: str, algorithm: str, requested: str | None,
                   forced_tuned: bool, forced_nonblocking: bool,
                   got: Mapping[str, Any]) -> str | None:
    """Why a measured point did not measure what its row would say (None: it did).

    Only what the probe saw is judged: an MPI whose coll functions it cannot see (not Open
    MPI, hidden symbols) reports nothing, and the row then says unknown."""
    served = got.get("component")
    if not isinstance(served, str) or not served:
        return None
    want = expected(requested, forced_tuned, forced_nonblocking)
    if want is not None and served != want:
        why = (f"[measure] components asked for coll/{want}" if requested not in (None, DEFAULT)
               else f"{algorithm} is coll/{want}'s algorithm")
        return (f"coll/{served} served {collective}, not coll/{want} ({why}); Open MPI's "
                f"selection did not give coll/{want} this communicator (docs/components.md)")
    subs = str(got.get("sub_components") or "")
    if requested == "han" and forced_tuned and "tuned" not in subs.split(","):
        return (f"{algorithm} (coll/tuned) did not run on coll/han's sub-communicators: they "
                f"used {subs or 'no component the probe knows'} (coll_han_{collective}"
                "_low_module / _up_module choose them)")
    return None


_PARAM: Final = re.compile(r"^mca:coll:([a-z0-9_]+):param:(coll_[a-z0-9_]+):(value|help):(.*)$")


def knobs(ompi_info_text: str, collective: str | None) -> list[dict[str, str]]:
    """Each coll component of `ompi_info --all --parsable` with its priority, and (with a
    collective) the MCA knobs of that collective it has: `coll_han_bcast_low_module`,
    `coll_han_use_bcast_algorithm`, ... with their values and help."""
    values: dict[tuple[str, str], dict[str, str]] = {}
    for line in ompi_info_text.splitlines():
        m = _PARAM.match(line)
        if m:
            comp, name, field, text = m.groups()
            values.setdefault((comp, name), {})[field] = text
    rows = []
    for (comp, name), got in sorted(values.items()):
        if name == f"coll_{comp}_priority":
            rows.append({"component": comp, "knob": name, "value": got.get("value", ""),
                         "help": got.get("help", "")})
    if collective:
        wanted = re.compile(rf"coll_[a-z0-9]+_(?:use_(?:simple_)?)?{re.escape(collective)}"
                            r"(?:_[a-z0-9_]+)?")
        rows += [{"component": comp, "knob": name, "value": got.get("value", ""),
                  "help": got.get("help", "")}
                 for (comp, name), got in sorted(values.items())
                 if wanted.fullmatch(name) and name != f"coll_{comp}_priority"]
    return sorted(rows, key=lambda r: (r["component"], not r["knob"].endswith("_priority"),
                                       r["knob"]))
