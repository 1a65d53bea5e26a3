from pathlib import Path

import pytest

from collbench.catalog import openmpi
from collbench.catalog.algorithms import Catalog
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError

PARSABLE = """\
mca:coll:tuned:param:coll_tuned_bcast_algorithm:status:writeable
mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:0:ignore
mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:1:basic_linear
mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:6:binomial
mca:coll:tuned:param:coll_tuned_allgatherv_algorithm:status:read-only
mca:coll:tuned:param:coll_tuned_allgatherv_algorithm:enumerator:value:1:default
mca:coll:tuned:param:coll_tuned_allgatherv_algorithm:enumerator:value:2:bruck
"""


def test_parse_ompi_info_ids_names_and_writability() -> None:
    algs = openmpi.parse_ompi_info(PARSABLE)
    assert [(a.id, a.name) for a in algs["bcast"]] == [(1, "basic_linear"), (6, "binomial")]
    assert all(a.runtime_switchable for a in algs["bcast"])
    assert not any(a.runtime_switchable for a in algs["allgatherv"])
    # Open MPI's allgatherv algorithm 1 is called "default": kept apart from the MPI's choice
    assert algs["allgatherv"][0].name == "default_algorithm"


def test_real_ompi_info_matches_research_table() -> None:
    catalog = load_catalog(find_mpi())
    assert catalog.implementation == "openmpi"
    assert "ompi_info" in catalog.source
    bcast = {a.name: a.id for a in catalog.of("bcast")}
    assert bcast["binomial"] == 6 and bcast["scatter_allgather_ring"] == 9
    assert {a.name for a in catalog.of("gather")} == {"basic_linear", "binomial", "linear_sync"}


def test_fallback_table_has_every_tuned_collective() -> None:
    fb = openmpi.fallback()
    assert set(fb) == set(openmpi.FALLBACK_5_0)
    assert [a.id for a in fb["bcast"]] == list(range(1, 10))


def test_query_falls_back_when_ompi_info_is_missing(tmp_path: Path) -> None:
    algs, source = openmpi.query(tmp_path / "ompi_info")
    assert "built-in" in source and "bcast" in algs


@pytest.fixture
def catalog() -> Catalog:
    return Catalog("openmpi", "5.0.11", "test", openmpi.parse_ompi_info(PARSABLE))


def test_resolve_by_name_id_and_default(catalog: Catalog) -> None:
    assert catalog.resolve("bcast", "binomial", "x").id == 6
    assert catalog.resolve("bcast", 6, "x").name == "binomial"
    assert catalog.resolve("bcast", "6", "x").name == "binomial"
    assert catalog.resolve("bcast", "default", "x").id == 0
    assert catalog.resolve("bcast", 0, "x").name == "default"


def test_resolve_unknown_names_valid_choices_and_suggests(catalog: Catalog) -> None:
    with pytest.raises(UserError) as e:
        catalog.resolve("bcast", "binomal", "spec.toml: measure.algorithms.bcast[0]")
    msg = str(e.value)
    assert msg.startswith("spec.toml: measure.algorithms.bcast[0]: 'binomal'")
    assert "basic_linear (1)" in msg and "did you mean binomial?" in msg
    with pytest.raises(UserError, match="valid: default"):
        catalog.resolve("bcast", 42, "cli")


def test_collective_without_choice_only_has_default(catalog: Catalog) -> None:
    assert catalog.resolve("gatherv", "default", "x").name == "default"
    with pytest.raises(UserError, match="no algorithm choice for gatherv"):
        catalog.resolve("gatherv", "linear", "x")


def test_default_is_switchable_only_if_every_algorithm_is(catalog: Catalog) -> None:
    assert catalog.default("bcast").runtime_switchable
    assert not catalog.default("allgatherv").runtime_switchable
