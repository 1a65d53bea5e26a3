"""A Selection as an MPICH collective-selection ("csel") JSON file.

MPICH reads MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE *instead of* its built-in MPIR table,
so the file must decide every collective. We start from that built-in table, read out of
the MPICH library in use (it is compiled in as a JSON string), and replace the intra-
communicator branch of each tuned collective with:

    comm_size<N1 -> MPICH's own branch,  comm_size<N2 -> sizes measured at N1, ...,
    comm_size<Nk+1 -> at Nk (the largest),  comm_size=any -> MPICH's own branch
      each: avg_msg_size<T (bcast, reduce, allreduce) or total_msg_size<T (the others) per
            range, in ascending order, the last "=any"; a range that keeps the default holds
            MPICH's own intra branch, so the default stays the default.

So the measured sets reach no communicator smaller than the smallest measured or larger
than the largest (MPICH's own choice there, as Open MPI's fixed decision in collbench's
Open MPI files); `extrapolate` (tune --extrapolate) drops the two outer branches: the
first set applies below it too, the last to any larger size. Siblings are tried in
order, the first match wins (csel.c). MPICH's device layer (ch4) would override the MPIR
choice, so tuned collectives need their MPIR_CVAR_<COLL>_DEVICE_COLLECTIVE=0 (printed by
activation()).
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.collectives import COLLECTIVES, RulesBytes
from collbench.catalog.mpi import MpiInstall
from collbench.catalog.mpich_csel import AVG_SIZE, builtin_table, csel_bytes
from collbench.errors import UserError
from collbench.tune.select import Choice, Selection

# csel containers whose parameters collbench fills from the forcing CVARs' defaults: the
# container is not zeroed by MPICH, so a parameter left out would be garbage.
PARAMS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "MPIR_Bcast_intra_tree": (("tree_type", "BCAST_TREE_TYPE"), ("k", "BCAST_TREE_KVAL"),
                              ("is_non_blocking", "BCAST_IS_NON_BLOCKING")),
    "MPIR_Bcast_intra_pipelined_tree": (
        ("tree_type", "BCAST_TREE_TYPE"), ("k", "BCAST_TREE_KVAL"),
        ("is_non_blocking", "BCAST_IS_NON_BLOCKING"),
        ("chunk_size", "BCAST_TREE_PIPELINE_CHUNK_SIZE"),
        ("recv_pre_posted", "BCAST_RECV_PRE_POST")),
    "MPIR_Barrier_intra_k_dissemination": (("k", "BARRIER_DISSEM_KVAL"),),
}
# Containers that take parameters collbench does not know for MPICH 5.0: refused.
UNKNOWN_PARAMS: Final = re.compile(r"_(k_\w+|recexch\w*|tree|recursive_multiplying|ccl)$")


@dataclass(frozen=True)
class WrittenJson:
    text: str
    tuned: tuple[str, ...]  # collectives whose branch collbench wrote
    notes: tuple[str, ...]


def cvar_defaults(mpi: MpiInstall) -> dict[str, str]:
    """MPIR_CVAR_* defaults as `mpivars` prints them (without the prefix)."""
    tool = mpi.bindir / "mpivars"
    try:
        out = subprocess.run([str(tool)], capture_output=True, text=True, timeout=60,
                             check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    values: dict[str, str] = {}
    for m in re.finditer(r"^\s+MPIR_CVAR_(\w+)\s*=(\S*)", out, re.M):
        values.setdefault(m.group(1), m.group(2))
    return values


def container(coll: str, algorithm: str, known: set[str]) -> str:
    prefix = coll[0].upper() + coll[1:]
    name = (f"MPIR_{prefix}_allcomm_nb" if algorithm == "nb"
            else f"MPIR_{prefix}_intra_{algorithm}")
    if name not in known:
        raise UserError(f"{coll} {algorithm}: MPICH's selection file has no container {name} "
                        "in this library; valid: "
                        + ", ".join(sorted(n for n in known if n.startswith(f"MPIR_{prefix}_"))))
    if name not in PARAMS and UNKNOWN_PARAMS.search(name):
        raise UserError(f"{coll} {algorithm}: the csel container {name} takes parameters "
                        "collbench does not know for this MPICH; leave this algorithm out of "
                        "the campaign (measure.algorithms) or force it with "
                        f"MPIR_CVAR_{coll.upper()}_INTRA_ALGORITHM")
    return name


def _leaf(name: str, cvars: Mapping[str, str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key, cvar in PARAMS.get(name, ()):
        if cvar not in cvars:
            raise UserError(f"{name}: MPIR_CVAR_{cvar} not found by mpivars; cannot fill "
                            f"the container's {key}")
        params[f"{key}={cvars[cvar]}"] = {}
    return {f"algorithm={name}": params}


def _size_key(coll: str, op: str, value: int | None) -> str:
    what = "avg_msg_size" if coll in AVG_SIZE else "total_msg_size"
    return f"{what}=any" if value is None else f"{what}{op}{value}"


def _branch(coll: str, nprocs: int, choices: Sequence[Choice], default: Any,
            known: set[str], cvars: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, ch in enumerate(choices):
        nxt = choices[i + 1].threshold if i + 1 < len(choices) else None
        key = _size_key(coll, "<", csel_bytes(coll, nxt, nprocs) if nxt is not None else None)
        out[key] = (copy.deepcopy(default) if ch.algorithm == DEFAULT
                    else _leaf(container(coll, ch.algorithm, known), cvars))
    return out


def measured_cvars(provenance: Mapping[str, Any]) -> dict[str, str]:
    """MPIR_CVAR_* settings in force when the campaign was measured (provenance.json)."""
    env = provenance.get("environment") or {}
    return {k.removeprefix("MPIR_CVAR_"): str(v) for k, v in env.items()
            if k.startswith("MPIR_CVAR_")}


def build(selection: Selection, mpi: MpiInstall, source: str,
          measured: Mapping[str, str] | None = None, extrapolate: bool = False) -> WrittenJson:
    """The JSON file; container parameters are the CVAR values in force when the forced
    algorithms were measured (`measured`, from provenance), else this MPICH's defaults."""
    if selection.mpi != "mpich":
        raise UserError(f"{source}: measured with {selection.mpi} {selection.mpi_version}; "
                        "an MPICH tuning file needs MPICH measurements (collbench run "
                        "--mpi <MPICH prefix>)")
    if mpi.implementation != "mpich":
        raise UserError(f"--mpich: {mpi.bindir} is {mpi.implementation}; point --mpi at the "
                        "MPICH whose defaults the file must carry")
    table, known = builtin_table(mpi)
    cvars = {**cvar_defaults(mpi), **(measured or {})}
    notes = []
    tuned = []
    for coll in sorted({c for c, _ in selection.tables}):
        sets = sorted((n, cs) for (c, n), cs in selection.tables.items() if c == coll)
        if all(ch.algorithm == DEFAULT for _, cs in sets for ch in cs):
            continue
        key = f"collective={coll}"
        if key not in table or "comm_type=intra" not in table[key]:
            notes.append(f"{coll}: not in MPICH's table; left out")
            continue
        if COLLECTIVES[coll].rules_bytes is RulesBytes.ZERO:
            notes.append(f"{coll}: no message size to select on; left at MPICH's choice")
            continue
        default = table[key]["comm_type=intra"]
        intra: dict[str, Any] = {}
        if not extrapolate and sets[0][0] > 1:  # below the smallest measured: MPICH's own
            intra[f"comm_size<{sets[0][0]}"] = copy.deepcopy(default)
        for i, (nprocs, choices) in enumerate(sets):
            cond = (f"comm_size<{sets[i + 1][0]}" if i + 1 < len(sets) else
                    "comm_size=any" if extrapolate else f"comm_size<{nprocs + 1}")
            intra[cond] = _branch(coll, nprocs, choices, default, known, cvars)
        if not extrapolate:  # above the largest measured: MPICH's own
            intra["comm_size=any"] = copy.deepcopy(default)
        table[key] = {"comm_type=intra": intra,
                      **{k: v for k, v in table[key].items() if k != "comm_type=intra"}}
        tuned.append(coll)
    notes.append("tuned collectives run with the device (ch4) override off "
                 "(MPIR_CVAR_<COLL>_DEVICE_COLLECTIVE=0), as their forced algorithms were "
                 "measured; their default ranges then use MPICH's MPIR-level choice")
    # No comment or metadata key: csel aborts on any key it does not know.
    return WrittenJson(json.dumps(table, indent=1) + "\n", tuple(tuned), tuple(notes))


def activation(path: Path, tuned: Sequence[str]) -> list[tuple[str, str]]:
    env = [("MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE", str(path.resolve())),
           ("MPIR_CVAR_DEVICE_COLLECTIVES", "percoll")]
    env += [(f"MPIR_CVAR_{c.upper()}_DEVICE_COLLECTIVE", "0") for c in tuned]
    return env
