"""The study spec: structure, checks against the MPI's parameters, and the stage campaigns."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.catalog.mpi import find_mpi
from collbench.errors import UserError
from collbench.spec import parse_spec
from collbench.study import toml
from collbench.study.mca import parse_params
from collbench.study.run import preflight
from collbench.study.spec import STUDY_REPETITIONS, parse_study, resolve, stage_spec
from tests.study.test_mca import SAMPLE

MPI = "openmpi 5.0.11"
BASE = """\
[campaign]
name = "s"

[measure]
collectives = ["bcast", "allreduce"]
sizes = [8, "64K"]
nprocs = [2, 4]
{measure}

[mca]
fixed = {{ pml_ob1_priority = 30 }}

[run]
timeout = 30
{run}

[study]
{study}

[[study.parameters]]
name = "bind_to"
values = ["socket", "none"]

[[study.parameters]]
name = "mpi_leave_pinned"
values = ["true", "false"]

[[study.parameters]]
name = "btl_vader_eager_limit"
values = ["4K", "16K"]
"""


def study_text(measure: str = "", run: str = "", study: str = "", extra: str = "") -> str:
    return BASE.format(measure=measure, run=run, study=study) + extra


def test_defaults_thirty_repetitions_and_the_default_algorithm() -> None:
    s = parse_study(study_text(), "s.toml")
    assert s.spec.run.repetitions == STUDY_REPETITIONS == 30
    assert [a.name for a in s.spec.measure.algorithms] == ["default"]  # type: ignore[union-attr]
    assert (s.table.statistic, s.table.confidence, s.table.min_gain) == ("avg", 0.95, 0.0)
    assert parse_study(study_text(run="repetitions = 10"), "s.toml").spec.run.repetitions == 10


@pytest.mark.parametrize(("text", "message"), [
    (study_text(study="confidance = 0.9"),
     "s.toml: study: unknown key 'confidance'.*did you mean confidence"),
    (study_text(extra="\n[[study.parameters]]\nname = 'x'\nvalue = 1\n"),
     r"s.toml: study.parameters\[3\]: unknown key 'value'.*did you mean values"),
    (study_text(study="confidence = 1.5"),
     "s.toml: study.confidence: should be less than 1, got 1.5"),
    (study_text(extra="\n[[study.parameters]]\nname = 'x'\nvalues = [1, 1]\n"),
     r"s.toml: study.parameters\[3\]: '1' is listed twice"),
    (study_text(extra="\n[[study.parameters]]\nname = 'OMPI_MCA_x'\nvalues = 1\n"),
     "without OMPI_MCA_"),
    (study_text(measure='bind_to = ["core", "none"]'),
     "s.toml: measure.bind_to: give one value"),
    (study_text(extra="\n[mca.sweep]\nbtl = ['self,sm']\n"), "s.toml: mca.sweep: "),
    (study_text(measure="map_by = 'sockett'"), r"s.toml: measure.map_by\[0\]: 'sockett'"),
    ("[campaign]\nname='x'\n[measure]\ncollectives='bcast'\nnprocs=2\n",
     "s.toml: study: required table is missing"),
])
def test_structural_problems_are_one_line_naming_file_and_key(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message) as e:
        parse_study(text, "s.toml")
    assert "\n" not in str(e.value)


def test_resolve_takes_baselines_from_open_mpi_and_drops_them_from_candidates() -> None:
    s = parse_study(study_text(), "s.toml")
    p = resolve(s, parse_params(SAMPLE), MPI)
    assert [(x.name, x.kind, x.baseline, x.candidates, x.mpi_default) for x in p] == [
        ("bind_to", "launcher", "core", ("socket", "none"), "core"),
        ("mpi_leave_pinned", "mca", "auto", ("true", "false"), "auto"),
        ("btl_vader_eager_limit", "mca", "4096", ("16384",), "4096"),  # 4K is the default
    ]


@pytest.mark.parametrize(("extra", "measure", "message"), [
    ("\n[[study.parameters]]\nname = 'mpi_leave_pined'\nvalues = 1\n", "",
     r"study.parameters\[3\].name: 'mpi_leave_pined' is not an MCA parameter.*did you mean"),
    ("\n[[study.parameters]]\nname = 'btl_sm_eager_limit'\nvalues = 1\n", "",
     r"study.parameters\[3\].name: 'btl_sm_eager_limit' is studied twice"),
    ("\n[[study.parameters]]\nname = 'pml_ob1_priority'\nvalues = 1\n", "",
     "also set in mca.fixed"),
    ("\n[[study.parameters]]\nname = 'mpi_leave_pinned'\nvalues = 'sometimes'\n", "",
     r"parameters\[3\].values\[0\]: 'sometimes' is not a value of mpi_leave_pinned"),
    ("\n[[study.parameters]]\nname = 'map_by'\nvalues = 'sockett'\n", "",
     r"values\[0\]: 'sockett' is not valid for mpirun --map-by.*did you mean socket"),
    ("\n[[study.parameters]]\nname = 'btl_tcp_if_include'\nvalues = 'lo'\n", "",
     r"baseline: btl_tcp_if_include has an empty default"),
    ("\n[[study.parameters]]\nname = 'mpi_yield_when_idle'\nvalues = ['0', 'no']\n", "",
     "every value equals the baseline"),
])
def test_checks_against_the_mpi_before_anything_runs(extra: str, measure: str,
                                                     message: str) -> None:
    s = parse_study(study_text(measure=measure, extra=extra), "s.toml")
    with pytest.raises(UserError, match=message):
        resolve(s, parse_params(SAMPLE), MPI)


def test_mca_fixed_is_checked_too() -> None:
    text = study_text().replace("pml_ob1_priority = 30", "pml_ob1_priorty = 30")
    with pytest.raises(UserError, match=r"s.toml: mca.fixed.pml_ob1_priorty: .*did you mean"):
        resolve(parse_study(text, "s.toml"), parse_params(SAMPLE), MPI)


def test_stage_specs_are_campaign_specs_with_kept_settings_fixed() -> None:
    s = parse_study(study_text(run="seed = 40"), "s.toml")
    params = resolve(s, parse_params(SAMPLE), MPI)
    kept = {"bind_to": "none", "mpi_leave_pinned": "true"}
    text = toml.dumps(stage_spec(s, params, 2, kept, 42), header="stage 3")
    spec = parse_spec(text, "stage.toml")
    assert text.startswith("# stage 3\n")
    assert spec.campaign.name == "s-03-btl_vader_eager_limit"
    assert spec.measure.bind_to == ["none"]
    assert spec.mca.fixed == {"pml_ob1_priority": "30", "mpi_leave_pinned": "true"}
    assert spec.mca.sweep == {"btl_vader_eager_limit": ["4096", "16384"]}
    assert (spec.run.seed, spec.run.repetitions, spec.run.timeout) == (42, 30, 30.0)
    first = parse_spec(toml.dumps(stage_spec(s, params, 0, {}, 40)), "stage.toml")
    assert first.measure.bind_to == ["core", "socket", "none"] and not first.mca.sweep


def test_preflight_plans_every_stage(tmp_path: Path) -> None:
    s = parse_study(study_text(run="repetitions = 3"), "s.toml")
    params = resolve(s, parse_params(SAMPLE), MPI)
    plans = [stage.plan for stage in preflight(s, params, find_mpi(None, False), 1, tmp_path)]
    # settings × repetitions × process counts; "default" needs one launch each
    assert [len(p.launches) for p in plans] == [3 * 3 * 2, 3 * 3 * 2, 2 * 3 * 2]
