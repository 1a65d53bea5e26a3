"""How a block of points is forced: MCA parameters, MPI_T, MPICH CVARs, and the
user's own settings checked against them."""

from __future__ import annotations

from collections.abc import Mapping

from collbench.catalog import impi
from collbench.catalog.algorithms import DEFAULT, Algorithm, Catalog
from collbench.catalog.collectives import COLLECTIVES
from collbench.catalog.openmpi import libnbc_mca
from collbench.errors import UserError
from collbench.plan import han_levels
from collbench.plan.model import MPIT, NONE
from collbench.plan.variants import _Block
from collbench.sizes import parse_size
from collbench.spec import Spec


def _truthy(value: str) -> str:
    low = value.strip().lower()
    return {"true": "1", "yes": "1", "on": "1", "false": "0", "no": "0", "off": "0"}.get(low, low)


def _forcing(selection: str, block: _Block, catalog: Catalog, source: str,
             layout: tuple[int, int | None] = (0, None)) -> tuple[dict[str, str], dict[str, str]]:
    """(mca, env) that make the MPI run this block's algorithm; `layout` is the launch's
    (nprocs, ppn), which a coll/tuned algorithm forced on one of han's levels needs."""
    if selection == NONE:
        return {}, {}
    han = block.variant.han
    if han is not None:  # coll/han's own: read once, for every communicator
        levels = han_levels.forcing(han, block.collective, *layout)
        return {**han.mca(block.collective, block.variant.segsize), **levels}, {}
    # With dynamic rules on, algorithm 0 means "the fixed decision rules", i.e. the default.
    dynamic = {"coll_tuned_use_dynamic_rules": "1"}
    if selection == MPIT:
        return dynamic, {}
    coll, v = block.collective, block.variant
    if v.algorithm.id is None and catalog.implementation == "openmpi":
        return dynamic, {}  # e.g. SMPI's own algorithms: the backend forces those itself
    if catalog.implementation == "openmpi" and COLLECTIVES[coll].nonblocking:
        return {libnbc_mca(coll): str(v.algorithm.id)}, {}  # libnbc: no segsize, fanout
    if catalog.implementation == "openmpi":
        prefix = f"coll_tuned_{coll}_algorithm"
        mca = {**dynamic, prefix: str(v.algorithm.id)}
        if v.segsize:
            mca[f"{prefix}_segmentsize"] = str(v.segsize)
        if v.fanout:
            mca[f"{prefix}_tree_fanout"] = mca[f"{prefix}_chain_fanout"] = str(v.fanout)
            if coll == "bcast":
                mca[f"{prefix}_knomial_radix"] = str(v.fanout)
        return mca, {}
    if catalog.implementation == "impi" and v.algorithm.id is not None:
        return {}, impi.forcing_env(coll, v.algorithm)  # I_MPI_ADJUST_<COLL>, no fallback
    cvar = COLLECTIVES[coll].mpich_cvar
    if catalog.implementation == "mpich" and cvar:
        # Without these, the ch4 device may override the choice, and an algorithm that
        # cannot run silently falls back to another one, recorded under the wrong name.
        return {}, {cvar: v.algorithm.name, "MPIR_CVAR_DEVICE_COLLECTIVES": "none",
                    "MPIR_CVAR_COLLECTIVE_FALLBACK": "error"}
    raise UserError(f"{source}: measure.algorithms: collbench cannot force {coll} algorithms "
                    f"of {catalog.implementation} {catalog.version}; use 'default'")


def _moves_data(coll: str, size: int, nprocs: int) -> bool:
    # OSU's reduce_scatter_block gives each rank size/P bytes: below P it moves nothing.
    return not (coll in ("reduce_scatter_block", "ireduce_scatter_block") and size < nprocs)


def _check_mca_allowed(spec: Spec, catalog: Catalog, source: str) -> None:
    if (spec.mca.fixed or spec.mca.sweep) and catalog.implementation != "openmpi":
        raise UserError(f"{source}: mca: {catalog.implementation} {catalog.version} has no MCA "
                        "parameters; remove the [mca] table")


def _merge_mca(spec: Spec, swept: dict[str, str], forcing: dict[str, str],
               source: str) -> dict[str, str]:
    user = {**spec.mca.fixed, **swept}
    for key, value in forcing.items():
        if key in user and _truthy(user[key]) != _truthy(value):
            table = "sweep" if key in swept else "fixed"
            raise UserError(
                f"{source}: mca.{table}.{key}: {user[key]!r} conflicts with the algorithm "
                f"forcing ({key} = {value}); leave it to run.selection")
    return {**user, **forcing}


def _user_forced(coll: str, mca: Mapping[str, str], catalog: Catalog,
                 source: str) -> tuple[Algorithm, int, int] | None:
    """(algorithm, segsize, fanout) that the user's own MCA settings force on `coll` (Open
    MPI obeys coll_tuned_<coll>_algorithm only with dynamic rules on), else None."""
    if COLLECTIVES[coll].nonblocking:  # libnbc obeys its parameter without dynamic rules
        value = mca.get(libnbc_mca(coll))
        if value is None:
            return None
        ref_nb: str | int = int(value) if value.strip().isdigit() else value
        alg_nb = catalog.resolve(coll, ref_nb, f"{source}: mca: {libnbc_mca(coll)}")
        return None if alg_nb.name == DEFAULT else (alg_nb, 0, 0)
    prefix = f"coll_tuned_{coll}_algorithm"
    value = mca.get(prefix)
    if value is None or _truthy(mca.get("coll_tuned_use_dynamic_rules", "0")) != "1":
        return None
    ref: str | int = int(value) if value.strip().isdigit() else value
    alg = catalog.resolve(coll, ref, f"{source}: mca: {prefix}")
    if alg.name == DEFAULT:
        return None

    def number(key: str) -> int:
        text = mca.get(key, "0").strip()
        try:
            return parse_size(text)
        except ValueError:
            raise UserError(f"{source}: mca: {key}: {text!r} is not a whole number of "
                            "bytes (or a count)") from None

    fanout = max(number(f"{prefix}_{k}") for k in ("tree_fanout", "chain_fanout",
                                                    "knomial_radix"))
    return alg, number(f"{prefix}_segmentsize"), fanout
