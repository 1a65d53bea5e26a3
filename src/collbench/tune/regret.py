"""What a written Open MPI rules file runs, cell by cell, and its regret on a real folder
(`collbench tune ... --against REAL`; the measure is analyse.against.rules_regret). Where
the file keeps Open MPI's decision (ALG 0), the real folder's `default` point is what runs
there (same series: the fixed rules are those of 4.1.0-5.0.11); without one, the fixed
decision's algorithm."""

from __future__ import annotations

from collections.abc import Iterable

from collbench.analyse.against import Regret, rules_regret
from collbench.catalog import ompi_decisions
from collbench.catalog.algorithms import DEFAULT
from collbench.catalog.collectives import COLLECTIVES, rules_bytes
from collbench.models.accuracy import Key
from collbench.tune.rules import RulesFile
from collbench.tune.verify import comm_set, message_rule


def picked(rules: RulesFile, series: str, collective: str, nprocs: int, size: int,
           keep_default: bool = False) -> str | None:
    """The coll/tuned algorithm Open MPI runs with this file at one cell (collbench's size):
    the rule Open MPI looks up, or where the rule says 0 its fixed decision ("default" with
    `keep_default`); None where the file has no entry for the collective."""
    info = COLLECTIVES.get(collective)
    if info is None or info.ompi_rules_id is None:
        return None
    comm = comm_set(rules, info.ompi_rules_id, nprocs)
    if comm is None:
        return None
    alg = message_rule(comm, rules_bytes(collective, size, nprocs)).alg
    if alg == 0:
        if keep_default:
            return DEFAULT
        d = ompi_decisions.decide_osu(series, collective, nprocs, size)
        alg = d.algorithm_id
    return ompi_decisions.algorithm_name(series, collective, alg)


def regret(rules: RulesFile, series: str, real: dict[Key, float],
           tuned: Iterable[tuple[str, int]]) -> Regret:
    """The file's regret at the cells of `real` whose (collective, nprocs) it was tuned for
    (elsewhere it keeps Open MPI's fixed decision, or extrapolates: not its measure)."""
    keep = set(tuned)
    cells = {(k.collective, k.nprocs, k.mapping, k.size_bytes) for k in real
             if (k.collective, k.nprocs) in keep}
    measured_default = {(k.collective, k.nprocs, k.mapping, k.size_bytes) for k in real
                        if k.algorithm == DEFAULT}
    pick = {}
    for cell in cells:  # where the file keeps Open MPI's decision, REAL's default is it
        name = picked(rules, series, cell[0], cell[1], cell[3], cell in measured_default)
        if name is not None:
            pick[cell] = name
    return rules_regret(real, pick)
