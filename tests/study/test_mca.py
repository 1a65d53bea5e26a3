"""MCA parameters from `ompi_info --all --parsable`, and the checks a study makes with them."""

from __future__ import annotations

import pytest

from collbench.errors import UserError
from collbench.study.mca import canonical, check_name, check_value, parse_params, query_params
from tests.conftest import mpi_tool

# Lines as Open MPI 5.0.11 prints them (help texts shortened).
SAMPLE = """\
ompi:version:full:5.0.11
mca:btl:sm:param:btl_sm_eager_limit:value:4096
mca:btl:sm:param:btl_sm_eager_limit:help:Maximum size of "short" messages (must be >= 1).
mca:btl:sm:param:btl_sm_eager_limit:type:size_t
mca:btl:sm:param:btl_sm_eager_limit:synonym:name:btl_vader_eager_limit
mca:btl:sm:param:btl_sm_eager_limit:disabled:false
mca:btl:vader:param:btl_vader_eager_limit:value:4096
mca:btl:vader:param:btl_vader_eager_limit:type:size_t
mca:btl:vader:param:btl_vader_eager_limit:synonym_of:name:btl_sm_eager_limit
mca:mpi:base:param:mpi_leave_pinned:value:auto
mca:mpi:base:param:mpi_leave_pinned:help:Whether to use the "leave pinned" protocol: a, b
mca:mpi:base:param:mpi_leave_pinned:enumerator:value:0:false
mca:mpi:base:param:mpi_leave_pinned:enumerator:value:1:true
mca:mpi:base:param:mpi_leave_pinned:enumerator:value:-1:auto
mca:mpi:base:param:mpi_leave_pinned:type:int
mca:mpi:base:param:mpi_yield_when_idle:value:false
mca:mpi:base:param:mpi_yield_when_idle:enumerator:value:0:false
mca:mpi:base:param:mpi_yield_when_idle:enumerator:value:1:true
mca:mpi:base:param:mpi_yield_when_idle:type:bool
mca:btl:tcp:param:btl_tcp_if_include:value:
mca:btl:tcp:param:btl_tcp_if_include:type:string
mca:pml:ob1:param:pml_ob1_priority:value:20
mca:pml:ob1:param:pml_ob1_priority:type:int
mca:coll:hcoll:param:coll_hcoll_enable:value:1
mca:coll:hcoll:param:coll_hcoll_enable:type:int
mca:coll:hcoll:param:coll_hcoll_enable:disabled:true
"""
MPI = "openmpi 5.0.11"


def params() -> dict:  # type: ignore[type-arg]
    return parse_params(SAMPLE)


def test_parse_reads_type_default_enumerators_bounds_and_synonyms() -> None:
    p = params()
    sm = p["btl_sm_eager_limit"]
    assert (sm.type, sm.value, sm.at_least, sm.synonym_of) == ("size_t", "4096", 1, None)
    assert p["btl_vader_eager_limit"].synonym_of == "btl_sm_eager_limit"
    assert canonical(p, "btl_vader_eager_limit") == "btl_sm_eager_limit"
    assert p["mpi_leave_pinned"].enumerators == {"false": "0", "true": "1", "auto": "-1"}
    assert p["btl_tcp_if_include"].value == ""
    assert "ompi" not in p and len(p) == 7


@pytest.mark.parametrize(("name", "message"), [
    ("mpi_leave_pined", "did you mean mpi_leave_pinned"),
    ("hwloc_base_binding_policy", "use name = 'bind_to'"),
    ("coll_hcoll_enable", "disabled"),
])
def test_names_open_mpi_would_ignore_are_rejected(name: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        check_name(params(), name, "s.toml: study.parameters[0].name", MPI)
    assert str(e.value).startswith("s.toml: study.parameters[0].name: ")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("mpi_leave_pinned", "auto", "auto"),
    ("mpi_leave_pinned", "-1", "-1"),
    ("mpi_leave_pinned", "TRUE", "TRUE"),
    ("mpi_yield_when_idle", "yes", "true"),
    ("mpi_yield_when_idle", "0", "false"),
    ("btl_sm_eager_limit", "8K", "8192"),
    ("btl_sm_eager_limit", "65536", "65536"),
    ("pml_ob1_priority", "-5", "-5"),
    ("btl_tcp_if_include", "lo", "lo"),
])
def test_valid_values_come_back_as_the_command_line_takes_them(
        name: str, value: str, expected: str) -> None:
    assert check_value(params()[name], value, "w") == expected


@pytest.mark.parametrize(("name", "value", "message"), [
    ("mpi_leave_pinned", "maybe", "valid: false \\(0\\), true \\(1\\), auto \\(-1\\)"),
    ("mpi_yield_when_idle", "perhaps", "valid: true, false"),
    ("btl_sm_eager_limit", "0", "out of range.*valid: 1 to"),
    ("btl_sm_eager_limit", "-4", "out of range"),
    ("btl_sm_eager_limit", "lots", "not an integer"),
    ("pml_ob1_priority", "4294967296", "out of range"),
])
def test_invalid_values_name_the_valid_ones(name: str, value: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        check_value(params()[name], value, "s.toml: study.parameters[1].values[0]")


def test_the_real_ompi_info_lists_the_classic_study_parameters() -> None:
    ompi_info = mpi_tool("ompi_info")
    if ompi_info is None:
        pytest.skip("no ompi_info")
    real = query_params(ompi_info)
    for name in ("mpi_leave_pinned", "btl_sm_eager_limit", "btl_tcp_eager_limit",
                 "coll_tuned_bcast_algorithm"):
        assert name in real
    assert canonical(real, "btl_vader_eager_limit") == "btl_sm_eager_limit"
    assert check_value(real["coll_tuned_bcast_algorithm"], "binomial", "w") == "binomial"
    # Open MPI 5 moved binding to the launcher: ompi_info has no such parameter.
    assert "hwloc_base_binding_policy" not in real


COMPONENTS = SAMPLE + """\
mca:btl:base:param:btl:value:
mca:btl:base:param:btl:type:string
mca:btl:self:version:"mca:2.1.0"
mca:btl:sm:version:"mca:2.1.0"
mca:btl:tcp:version:"mca:2.1.0"
"""


def test_component_lists_are_checked_against_the_mpis_components() -> None:
    """`btl = ^vader` and `^sm` are one setting in Open MPI 5 (vader is sm's old name, seen
    through its parameters' synonyms); a component the MPI lacks is refused."""
    from collbench.study.mca import component_set
    btl = parse_params(COMPONENTS)["btl"]
    assert btl.components == {"self": "self", "sm": "sm", "tcp": "tcp", "vader": "sm"}
    assert component_set(btl, "^vader") == component_set(btl, "^sm") == (True,
                                                                          frozenset({"sm"}))
    assert check_value(btl, "self,vader,tcp", "w") == "self,vader,tcp"
    assert check_value(btl, "", "w") == ""  # every component
    with pytest.raises(UserError, match=r"w: 'openib' is not a btl component of this MPI "
                                        r"\(ompi_info\); valid: self, sm, tcp"):
        check_value(btl, "^openib", "w")


def test_a_study_refuses_one_component_list_under_two_names() -> None:
    from collbench.study.spec import parse_study, resolve
    from tests.study.test_spec import study_text
    extra = ("\n[[study.parameters]]\nname = 'btl'\nbaseline = 'self,sm,tcp'\n"
             "values = ['^vader', '^tcp', '^sm']\n")
    with pytest.raises(UserError, match=r"values\[2\]: '\^sm' is the same setting as "
                                        r"values\[0\] '\^vader'"):
        resolve(parse_study(study_text(extra=extra), "s.toml"), parse_params(COMPONENTS), MPI)
