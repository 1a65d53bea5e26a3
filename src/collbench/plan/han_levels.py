"""A coll/tuned algorithm forced on one of coll/han's levels only ("+low=tuned:ALG",
catalog.components): a coll/tuned dynamic rules file keyed by communicator size.

Forcing `coll_tuned_<coll>_algorithm` reaches every communicator tuned serves, han's low
(ppn ranks) and up (one leader per node) communicators alike. A rules file instead gives
each communicator size its own rule, and tuned applies the set of the largest size <= its
communicator's (the first set below that): one set per level size with the level's
forced algorithm, each followed (and the first preceded) by a set of 0, tuned's fixed
decision, so that no communicator of another size is forced. Where two levels have the
same size the forcing cannot tell them apart (components.levels_problem): no file is
written and every point of the launch fails with that reason (served.py). tuned consults
its rules file only where no algorithm is forced by MCA or MPI_T
(coll_tuned_decision_dynamic.c), so the launch forces none. The file is content-addressed
in collbench's cache, where every host of the job reads it (the cache must be on a shared
file system for multi-host launches).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from collbench.buildcache import cache_key, default_cache_dir
from collbench.catalog import components
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.ompi_decisions import ALGORITHMS
from collbench.errors import UserError

FANINOUT: Final = 4  # coll_tuned_<coll>_algorithm_{tree,chain}_fanout's default in 4.1-5.0
FILENAME_KEY: Final = "coll_tuned_dynamic_rules_filename"
MCA_KEYS: Final = ("coll_tuned_use_dynamic_rules", FILENAME_KEY)


def rules_text(setting: components.HanSetting, collective: str, nprocs: int,
               ppn: int) -> str:
    """The coll/tuned rules file (classic format, read by 4.1 and 5.0) forcing `setting`'s
    levels: a set per level size, algorithm 0 everywhere else."""
    level_coll = components.TUNED_LEVELS[(collective, setting.algorithm)]
    colls = sorted({level_coll[lv] for lv in setting.levels})
    sizes = components.level_sizes(nprocs, ppn)
    lines = [f"# collbench: {setting.name} on {collective}, {nprocs} ranks, {ppn} per node",
             str(len(colls))]
    for coll in colls:
        alg_of: dict[int, int] = {}
        for level, alg in setting.levels.items():
            if level_coll[level] == coll:
                ident = ALGORITHMS[coll].index(alg) + 1
                alg_of.update(dict.fromkeys(sizes[level], ident))
        frame = {size + 1: 0 for size in alg_of}  # a size between levels: not forced
        if min(alg_of) > 2:
            frame[2] = 0
        sets = sorted({**frame, **alg_of}.items())
        lines += [f"{COLLECTIVES[coll].ompi_rules_id}  # {coll}", str(len(sets))]
        for size, ident in sets:
            what = ALGORITHMS[coll][ident - 1] if ident else "fixed decision"
            lines += [f"{size}  # communicators of {size}+ ranks: {what}", "1",
                      f"0 {ident} {FANINOUT if ident else 0} 0"]
    return "\n".join(lines) + "\n"


def forcing(setting: components.HanSetting, collective: str, nprocs: int,
            ppn: int | None, cache_dir: Path | None = None) -> dict[str, str]:
    """The MCA settings that force `setting`'s levels on this layout ({}: it forces none,
    or the layout cannot tell its levels apart and the points fail)."""
    if not setting.levels or ppn is None or components.levels_problem(setting, nprocs, ppn):
        return {}
    text = rules_text(setting, collective, nprocs, ppn)
    path = (cache_dir or default_cache_dir()) / "han-levels" / cache_key(text) / "tuned.rules"
    try:
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tuned.rules.", dir=path.parent)
            with os.fdopen(fd, "w") as out:
                out.write(text)
            Path(tmp).replace(path)
    except OSError as exc:
        raise UserError(f"{path}: cannot write the coll/tuned rules file that forces "
                        f"{setting.name}: {exc.strerror or exc}") from None
    return {"coll_tuned_use_dynamic_rules": "1", FILENAME_KEY: str(path)}


def rank0_sizes(nprocs: int, ppn: int) -> dict[str, int]:
    """The sizes of the level communicators rank 0 (the kernel's reporting rank, a node
    leader and the root) is on: its node's low one and the leaders' up one."""
    return {"low": min(ppn, nprocs), "up": -(-nprocs // ppn)}


MAX_TRACED: Final = 64  # entries of a probe's sub_algorithms read (the probe keeps 16)
_NUMBER: Final = re.compile(r"[0-9]{1,7}")  # a communicator size or an algorithm id


def traced(text: str) -> set[tuple[str, int, int]] | None:
    """The (collective, communicator size, algorithm id) of the probe's "sub_algorithms"
    ("bcast@3=1,bcast@2=6", kernel/collprobe.h); None when unreadable (or "?": more than
    the probe kept)."""
    out: set[tuple[str, int, int]] = set()
    for entry in [e for e in text.split(",") if e][:MAX_TRACED + 1]:
        coll, _, rest = entry.partition("@")
        size, _, alg = rest.partition("=")
        if (coll not in COLLECTIVES or not _NUMBER.fullmatch(size)
                or not _NUMBER.fullmatch(alg) or int(size) == 0):
            return None
        out.add((coll, int(size), int(alg)))
    return None if len(out) > MAX_TRACED else out


def traced_problem(setting: components.HanSetting, collective: str, nprocs: int, ppn: int,
                   got: Mapping[str, Any]) -> str | None:
    """Why the probe does not show `setting`'s forced coll/tuned algorithm on each of its
    levels (None: it shows every one, alone on that level's communicator size). The probe
    records the algorithm id each ompi_coll_tuned_<coll>_intra_do_this call below the
    measured call received, with its communicator's size (kernel/collprobe.c)."""
    if not setting.levels:
        return None
    seen = traced(str(got.get("sub_algorithms") or ""))
    if seen is None:
        return (f"the probe's sub_algorithms {str(got.get('sub_algorithms'))[:80]!r} cannot "
                f"be read: {setting.name} is not shown to have run")
    level_coll = components.TUNED_LEVELS[(collective, setting.algorithm)]
    sizes = rank0_sizes(nprocs, ppn)
    for level, alg in sorted(setting.levels.items()):
        coll, size = level_coll[level], sizes[level]
        names = ALGORITHMS[coll]
        ran = sorted(a for c, s, a in seen if c == coll and s == size)
        if not ran:
            return (f"the probe saw no coll/tuned {coll} algorithm on han's {level} "
                    f"communicator ({size} ranks): {level}=tuned:{alg} is not shown to have run")
        if ran != [names.index(alg) + 1]:
            what = ",".join(names[a - 1] if 0 < a <= len(names) else str(a) for a in ran)
            return (f"coll/tuned ran {coll} {what} on han's {level} communicator ({size} "
                    f"ranks), not {alg}: {setting.name} did not take effect")
    return None
