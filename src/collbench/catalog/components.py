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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
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
MODELLED_HAN: Final = "han"  # model predict: "default" as han's hierarchy (5.0, >= 2 nodes)
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


# --- coll/han's own settings (Open MPI 5.0: ompi/mca/coll/han/coll_han_component.c,
# coll_han_algorithms.c) ------------------------------------------------------------------
# A han setting is a variant of component han, named in the algorithm column:
#   NAME := HAN_ALGORITHM ["+low=" (tuned|sm|tuned:ALG)] ["+up=" (libnbc|adapt|tuned:ALG)]
# HAN_ALGORITHM is a value of coll_han_use_<coll>_algorithm (intra, simple, reproducible);
# low and up pick the component of han's intra-node and inter-node level (coll_han_<coll>_
# low_module, _up_module: 0 or 1, which only han's "intra" algorithms read); "tuned:ALG"
# forces coll/tuned's algorithm ALG on that level only (TUNED_LEVELS: where han calls tuned;
# a tuned rules file keyed by the level's communicator size, plan.han_levels); the segsize
# column is coll_han_<coll>_segsize. Labels add the component: "simple@han",
# "intra+up=adapt@han", "simple+low=tuned:binomial+up=tuned:pipeline@han",
# "intra[seg=16384]@han". A coll/tuned algorithm under han ("binomial@han") is not a han
# setting: it is forced on every communicator tuned serves, both levels alike.
HAN_LOW: Final = ("tuned", "sm")  # coll_han_<coll>_low_module 0, 1
HAN_UP: Final = ("libnbc", "adapt")  # coll_han_<coll>_up_module 0, 1
# Collectives whose "intra" algorithm runs on the low/up module's sub-communicators (the
# others register the knobs but do not read them, 5.0.10 source), and that read a segsize.
HAN_LEVELS: Final = frozenset({"bcast", "reduce", "allreduce", "gather", "scatter"})
HAN_SEGMENTED: Final = frozenset({"bcast", "reduce", "allreduce"})
# The one blocking collective han's algorithm calls on a level, where coll/tuned serves it
# (v5.0.10 coll_han_<coll>.c). Left out: intra's up level of bcast, reduce and allreduce
# (libnbc's or adapt's non-blocking calls; bcast's first segment aside), and levels that run
# two collectives (allreduce's low level: reduce, then bcast).
TUNED_LEVELS: Final[dict[tuple[str, str], dict[str, str]]] = {
    ("bcast", "intra"): {"low": "bcast"},
    ("bcast", "simple"): {"low": "bcast", "up": "bcast"},
    ("reduce", "intra"): {"low": "reduce"},
    ("reduce", "simple"): {"low": "reduce", "up": "reduce"},
    ("allreduce", "simple"): {"up": "allreduce"},
    ("gather", "intra"): {"low": "gather", "up": "gather"},
    ("gather", "simple"): {"low": "gather", "up": "gather"},
    ("scatter", "intra"): {"low": "scatter", "up": "scatter"},
    ("scatter", "simple"): {"low": "scatter", "up": "scatter"},
}
_TUNED: Final = "tuned:"


@dataclass(frozen=True)
class HanSetting:
    algorithm: str  # coll_han_use_<coll>_algorithm
    low: str | None = None  # HAN_LOW, None: han's default (tuned)
    up: str | None = None  # HAN_UP, None: han's default (libnbc)
    low_tuned: str | None = None  # coll/tuned's algorithm forced on the low level only
    up_tuned: str | None = None  # ... on the up level only

    @property
    def name(self) -> str:
        low = f"{_TUNED}{self.low_tuned}" if self.low_tuned else self.low
        up = f"{_TUNED}{self.up_tuned}" if self.up_tuned else self.up
        return self.algorithm + (f"+low={low}" if low else "") + (f"+up={up}" if up else "")

    @property
    def levels(self) -> dict[str, str]:
        """{"low"|"up": coll/tuned algorithm} forced per level ({} for none)."""
        got = {"low": self.low_tuned, "up": self.up_tuned}
        return {k: v for k, v in got.items() if v}

    def mca(self, collective: str, segsize: int) -> dict[str, str]:
        """The launch's MCA settings (han reads them once, for every communicator)."""
        out = {f"coll_han_use_{collective}_algorithm": self.algorithm}
        if self.low:
            out[f"coll_han_{collective}_low_module"] = str(HAN_LOW.index(self.low))
        if self.up and not self.up_tuned:
            out[f"coll_han_{collective}_up_module"] = str(HAN_UP.index(self.up))
        if segsize:
            out[f"coll_han_{collective}_segsize"] = str(segsize)
        return out


def parse_han_setting(name: str, collective: str, algorithms: tuple[str, ...],
                      tuned_names: Callable[[str], Sequence[str]] | None = None
                      ) -> HanSetting | str:
    """The han setting `name` names for `collective` (han's `algorithms` there), or why it
    is none (a sentence naming the valid choices). `tuned_names(coll)`: coll/tuned's
    algorithms of a collective, which a level's `tuned:ALG` must name (None: unchecked)."""
    head, *mods = name.strip().lower().split("+")
    if head not in algorithms:
        return (f"{head!r} is not a coll/han {collective} algorithm; valid: "
                f"{', '.join(algorithms) or 'none'}")
    knobs: dict[str, str] = {}
    tuned: dict[str, str] = {}
    for mod in mods:
        key, _, value = mod.partition("=")
        valid = {"low": HAN_LOW, "up": HAN_UP}.get(key)
        if valid is None or key in knobs:
            return f"{mod!r}: valid modifiers are +low=({'|'.join(HAN_LOW)}|tuned:ALG), " \
                   f"+up=({'|'.join(HAN_UP)}|tuned:ALG), each once"
        if value.startswith(_TUNED):
            why = _level_problem(collective, head, key, value[len(_TUNED):], tuned_names)
            if why:
                return why
            tuned[key] = value[len(_TUNED):]
            value = "tuned" if key == "low" else ""
        elif value not in valid:
            return f"{key}={value!r}: valid: {', '.join(valid)}, tuned:ALG"
        knobs[key] = value
    plain = {k for k in knobs if k not in tuned}
    if plain and (head != "intra" or collective not in HAN_LEVELS):
        return (f"+low/+up choose the levels of han's intra algorithm, read for "
                f"{', '.join(sorted(HAN_LEVELS))} only")
    return HanSetting(head, knobs.get("low"), knobs.get("up") or None, tuned.get("low"),
                      tuned.get("up"))


def _level_problem(collective: str, head: str, level: str, algorithm: str,
                   tuned: Callable[[str], Sequence[str]] | None) -> str | None:
    """Why coll/tuned's `algorithm` cannot be forced on han's `level` (None: it can)."""
    where = TUNED_LEVELS.get((collective, head), {})
    if level not in where:
        valid = ", ".join(f"{a}+{lv}" for (c, a), lvs in TUNED_LEVELS.items()
                          if c == collective for lv in lvs)
        return (f"{level}=tuned:{algorithm}: han's {head} {collective} runs no single "
                f"coll/tuned collective on its {level} level; valid: {valid or 'none'}")
    names = tuple(tuned(where[level])) if tuned else (algorithm,)
    if not algorithm or algorithm not in names:
        return (f"{level}=tuned:{algorithm!r}: not a coll/tuned {where[level]} algorithm "
                f"(han's {level} level runs {where[level]}); valid: {', '.join(names)}")
    return None


def han_setting_of(name: str) -> HanSetting | None:
    """The han setting a stored algorithm name says (None: a coll/tuned name or default)."""
    head, *mods = name.split("+")
    if head not in ("intra", "simple", "reproducible"):
        return None
    knobs = dict(m.partition("=")[::2] for m in mods)
    tuned = {k: v[len(_TUNED):] for k, v in knobs.items() if v.startswith(_TUNED)}
    low = "tuned" if "low" in tuned else knobs.get("low")
    up = None if "up" in tuned else knobs.get("up")
    return HanSetting(head, low, up, tuned.get("low"), tuned.get("up"))


def level_sizes(nprocs: int, ppn: int) -> dict[str, set[int]]:
    """The sizes of han's communicators per level when `nprocs` ranks fill nodes of `ppn`
    in order: low, one per node (the last node may hold fewer; 1-rank ones are
    coll/self's), and up, one leader per node."""
    nodes = -(-nprocs // ppn)
    low = {ppn, nprocs - (nodes - 1) * ppn} - {1}
    return {"low": low, "up": {nodes}}


def levels_problem(setting: HanSetting, nprocs: int, ppn: int | None) -> str | None:
    """Why `setting`'s per-level coll/tuned algorithms cannot be forced on this layout
    (None: they can, or it forces none). tuned's rules file knows a communicator by its
    size only, so a forced level must differ in size from every level forced otherwise."""
    forced = setting.levels
    if not forced:
        return None
    if not ppn or nprocs <= ppn:
        return (f"{setting.name} forces han's levels: it needs ranks on 2 or more nodes "
                "([measure] ppn below nprocs)")
    sizes = level_sizes(nprocs, ppn)
    for level, alg in forced.items():
        if not sizes[level]:
            return f"{level}=tuned:{alg}: one rank per node, han has no {level} level"
        for other in sizes:
            common = sizes[level] & sizes[other]
            if other != level and common and forced.get(other) != alg:
                return (f"han's {level} and {other} levels both have {min(common)} ranks "
                        f"(nprocs {nprocs}, ppn {ppn}): coll/tuned's rules, keyed by "
                        f"communicator size, cannot force {level}=tuned:{alg} on one only; "
                        "choose a ppn that differs from the number of nodes")
    return None


def han_problem(collective: str, setting: HanSetting, got: Mapping[str, Any]) -> str | None:
    """Why a point measured under han did not run `setting` (None: nothing says so). The
    probe's sub-components are the witness: han's "simple" algorithms call blocking
    collectives only (no libnbc or adapt below them); +low=sm must show sm, +up=adapt
    adapt (both seen on 2 emulated hosts at 8 B and 1 MiB)."""
    subs = [s for s in str(got.get("sub_components") or "").split(",") if s]
    if setting.levels and "tuned" not in subs:
        return (f"coll/tuned did not serve coll/han's sub-communicators (they used "
                f"{','.join(subs) or 'none the probe saw'}): {setting.name} did not take effect")
    if not subs:
        return None  # the probe saw no sub-communicator: nothing to judge
    knob = f"coll_han_{collective}"
    if setting.algorithm == "simple" and {"libnbc", "adapt"} & set(subs):
        return (f"coll/han ran {collective} with a non-blocking level ({','.join(subs)}), "
                f"not its simple algorithm ({knob.replace('han_', 'han_use_')}_algorithm "
                "did not take effect)")
    for level, want in (("low", setting.low), ("up", setting.up)):
        if want and want not in subs:
            return (f"coll/han's {level} level did not use coll/{want}: its sub-"
                    f"communicators used {','.join(subs)} ({knob}_{level}_module did not "
                    "take effect)")
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
