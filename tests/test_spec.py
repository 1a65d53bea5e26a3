"""The TOML spec: loading, normalising, one-line errors with key paths, JSON schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.errors import UserError
from collbench.spec import (
    Counts,
    Spec,
    load_spec,
    parse_spec,
    spec_from_dict,
    spec_json_schema,
    spec_json_schema_text,
)

ROOT = Path(__file__).resolve().parent.parent
SPECS = [ROOT / "examples" / "quickstart.toml", *sorted((ROOT / "tests/data/specs").glob("*.toml"))]
BASE = '[campaign]\nname = "t"\n[measure]\ncollectives = ["bcast"]\nnprocs = [2, 4]\n'


def spec(extra: str = "", before: str = "") -> Spec:
    return parse_spec(before + BASE + extra, "spec.toml")


def error(extra: str = "", before: str = "") -> str:
    with pytest.raises(UserError) as e:
        spec(extra, before)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("spec.toml"), msg
    return msg


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.name)
def test_examples_load_and_dump_round_trips(path: Path) -> None:
    s = load_spec(path)
    assert spec_from_dict(s.model_dump(by_alias=True), "dump") == s
    assert spec_from_dict(s.model_dump(mode="json", by_alias=True), "json") == s


def test_defaults() -> None:
    s = spec()
    m = s.measure
    assert m.sizes == [2**k for k in range(21)]
    assert [a.name for a in m.algorithms] == ["all"]  # type: ignore[union-attr]
    assert (m.map_by, m.bind_to, m.check_results, m.samples) == (["core"], ["core"], False, False)
    assert m.iterations == Counts(small=0, large=0)
    r = s.run
    assert (r.backend, r.repetitions, r.timeout, r.order, r.seed) == ("local", 1, 600.0,
                                                                      "random", None)
    assert (r.oversubscribe, r.selection, s.zip, s.exclude) == ("auto", "auto", [], [])


def test_bare_values_become_lists_and_tables() -> None:
    s = parse_spec('[campaign]\nname = "t"\n[measure]\ncollectives = "bcast"\nnprocs = 2\n'
                   'map_by = "socket"\nsizes = "4K"\niterations = 50\nwarmup = {large = 3}\n'
                   'algorithms = "binomial"\n[mca]\nfixed = {a_b = true, c = 1.5}\n', "x")
    m = s.measure
    assert (m.collectives, m.nprocs, m.map_by, m.sizes) == (["bcast"], [2], ["socket"], [4096])
    assert m.iterations.at(1) == m.iterations.at(2**20) == 50
    assert (m.warmup.at(8192), m.warmup.at(8193)) == (0, 3)
    assert [a.name for a in m.algorithms] == ["binomial"]  # type: ignore[union-attr]
    assert s.mca.fixed == {"a_b": "true", "c": "1.5"}


def test_per_collective_algorithms() -> None:
    s = spec('algorithms = {bcast = ["default", 6, {name = "chain", segsize = ["8K", 0], '
             "fanout = 2}]}\n")
    algs = s.measure.algorithms
    assert isinstance(algs, dict)
    chain = algs["bcast"][2]
    assert (algs["bcast"][1].name, chain.segsize, chain.fanout) == (6, [8192, 0], [2])


@pytest.mark.parametrize(("extra", "before", "expected"), [
    ("", "", None),  # the base spec itself is valid
    ('map_by = ["core", "sockt"]\n', "",
     "spec.toml: measure.map_by[1]: 'sockt' is not valid; valid: core, socket, numa, node, "
     "slot, hwthread (did you mean socket?)"),
    ("colectives = 1\n", "",
     "spec.toml: measure.colectives: unknown key 'colectives'; valid: collectives, algorithms, "
     "sizes, nprocs, map_by, bind_to, ppn, iterations, warmup, validate, samples, precision, "
     "min_iterations, max_iterations, max_seconds, timing, nonblocking, mpi, components "
     "(did you mean collectives?)"),
    ('[mesure]\n', "", "spec.toml: mesure: unknown key 'mesure'; valid: campaign, measure, mca, "
                       "run, workload, zip, exclude (did you mean measure?)"),
    ("validate = 1\n", "", "spec.toml: measure.validate: expected true or false, got 1"),
    ('[run]\ntimeout = "long"\n', "", "spec.toml: run.timeout: expected a number, got 'long'"),
    ("[run]\ntimeout = 0\n", "", "spec.toml: run.timeout: must be greater than 0, got 0"),
    ("[run]\nrepetitions = 0\n", "", "spec.toml: run.repetitions: must be at least 1, got 0"),
    ('[run]\nbackend = "slrum"\n', "",
     "spec.toml: run.backend: 'slrum' is not valid; valid: local, slurm, simgrid, fake, "
     "hosts (did you mean slurm?)"),
    ('[run]\noversubscribe = "yes"\n', "",
     'spec.toml: run.oversubscribe: expected "auto", true or false, got \'yes\''),
    ("sizes = 1.5\n", "", "spec.toml: measure.sizes: expected a byte count"),
    ('sizes = "1:1Q"\n', "", "spec.toml: measure.sizes: '1Q' is not a size; valid: "),
    ("algorithms = 2.5\n", "", 'spec.toml: measure.algorithms: expected "all", "default"'),
    ('algorithms = {bcat = "all"}\n', "",
     "spec.toml: measure.algorithms.bcat: 'bcat' is not valid; valid: barrier, bcast"),
    ('algorithms = {bcast = [{name = "chain", segsize = "x"}]}\n', "",
     "spec.toml: measure.algorithms.bcast[0].segsize[0]: 'x' is not a size"),
    ('algorithms = [{name = "all", fanout = 2}]\n', "",
     "spec.toml: measure.algorithms[0].fanout: segsize and fanout need a named algorithm"),
    ('algorithms = [{nme = "chain"}]\n', "",
     "spec.toml: measure.algorithms[0].nme: unknown key 'nme'; valid: name, segsize, fanout "
     "(did you mean name?)"),
    ("iterations = {smal = 3}\n", "", "spec.toml: measure.iterations.smal: unknown key"),
    ('iterations = "many"\n', "", "spec.toml: measure.iterations: expected an integer or a table"),
    ('map_by = ["core", "core"]\n', "", "spec.toml: measure.map_by[1]: 'core' is listed twice"),
    ('[mca]\nfixed = {"OMPI_MCA_btl" = "x"}\n', "",
     "spec.toml: mca.fixed.OMPI_MCA_btl: 'OMPI_MCA_btl': write the parameter name without"),
    ("[mca]\nfixed = {x = 1}\nsweep = {x = [1, 2]}\n", "",
     "spec.toml: mca.sweep.x: 'x' is also in mca.fixed"),
    ("[run]\nzip = []\n", "", "spec.toml: run.zip: 'zip' is a top-level key"),
    ("", 'zip = [["nprocs", "map_by"]]\n',
     "spec.toml: zip[0]: nprocs has 2 values but map_by has 1; zipped dimensions need the same"),
    ("", 'zip = [["nprocs", "mapby"]]\n',
     "spec.toml: zip[0][1]: 'mapby' is not valid; valid: nprocs, map_by, bind_to "
     "(did you mean map_by?)"),
    ("", "exclude = [{}]\n", "spec.toml: exclude[0]: an empty entry would exclude everything"),
    ("", 'exclude = [{colective = "bcast"}]\n',
     "spec.toml: exclude[0].colective: unknown key 'colective'; valid: collective, algorithm"),
    ("", 'exclude = [{size = "3K"}]\n', "spec.toml: exclude[0].size: 3K is not measured; valid: "
                                         "1, 2, 4,"),
    ("", "exclude = [{nprocs = 8}]\n", "spec.toml: exclude[0].nprocs: 8 is not measured; "
                                       "valid: 2, 4"),
])
def test_errors_are_one_line_with_key_path(extra: str, before: str, expected: str | None) -> None:
    if expected is None:
        spec(extra, before)
        return
    msg = error(extra, before)
    assert msg.startswith(expected), msg


def test_max_iterations_without_precision_is_refused() -> None:
    """Only precision reads it: alone it was accepted and did nothing."""
    assert error("max_iterations = 5000\n") == (
        "spec.toml: measure.max_iterations: 5000 is read only with precision (it caps "
        "precision's batches); add precision (e.g. precision = 0.02), or remove max_iterations "
        "and set iterations")
    assert spec("precision = 0.02\nmax_iterations = 5000\n").measure.max_iterations == 5000
    spec("max_iterations = 100000\n")  # the default: a dumped spec loads again
    # the first batch and the time cap also serve `tune --adaptive --precision`
    assert spec("min_iterations = 30\nmax_seconds = 2\n").measure.min_iterations == 30


def test_bad_collective_names_valid_choices() -> None:
    with pytest.raises(UserError) as e:
        parse_spec(BASE.replace('["bcast"]', '["bcast", "bcat"]'), "spec.toml")
    assert str(e.value) == (
        "spec.toml: measure.collectives[1]: 'bcat' is not valid; valid: barrier, bcast, gather, "
        "gatherv, scatter, scatterv, reduce, allreduce, allgather, allgatherv, alltoall, "
        "alltoallv, reduce_scatter, reduce_scatter_block, latency, bw, mbw_mr, ibarrier, ibcast, "
        "igather, igatherv, iscatter, iscatterv, ireduce, iallreduce, iallgather, iallgatherv, "
        "ialltoall, ialltoallv, ireduce_scatter, ireduce_scatter_block (did you mean bcast?)")


def test_point_to_point_needs_two_processes() -> None:
    with pytest.raises(UserError, match=r"^spec.toml: measure.nprocs\[0\]: latency needs at "
                                        "least 2 processes, got 1$"):
        parse_spec(BASE.replace('["bcast"]', '["latency"]').replace("[2, 4]", "[1, 2]"),
                   "spec.toml")


def test_missing_keys() -> None:
    with pytest.raises(UserError, match=r"^spec\.toml: campaign\.name: required key is missing$"):
        parse_spec('[campaign]\n[measure]\ncollectives = "bcast"\nnprocs = 2\n', "spec.toml")
    with pytest.raises(UserError, match=r"^spec.toml: measure: required key is missing$"):
        parse_spec('[campaign]\nname = "x"\n', "spec.toml")


def test_bad_campaign_name() -> None:
    with pytest.raises(UserError, match=r"campaign.name: 'a b' is not a valid name"):
        parse_spec(BASE.replace('"t"', '"a b"'), "spec.toml")


def test_several_problems_report_the_first_and_count() -> None:
    assert error('map_by = 5\n[run]\nseed = "x"\n').endswith("(and 1 more)")


def test_toml_syntax_error_names_line_and_column() -> None:
    with pytest.raises(UserError) as e:
        parse_spec('[campaign]\nname = "x"\n[measure]\nnprocs = [2\nsizes = 1\n', "spec.toml")
    assert str(e.value).startswith("spec.toml:5:1: TOML syntax error: ")
    with pytest.raises(UserError, match=r"^spec.toml: TOML syntax error: .*end of document"):
        parse_spec('[campaign]\nname = "x"\n[measure]\nnprocs = [2\n', "spec.toml")


def test_exclude_values_are_normalised() -> None:
    s = spec("[mca.sweep]\nbtl_eager = [4096, true]\n",
             'exclude = [{size = "1M", btl_eager = [true]}, {algorithm = ["chain", 6]}]\n')
    assert s.exclude[0].criteria() == {"size": [2**20], "btl_eager": ["true"]}
    assert s.exclude[1].criteria() == {"algorithm": ["chain", 6]}
    msg = error("[mca.sweep]\nbtl_eager = [4096]\n", "exclude = [{btl_eager = 1}]\n")
    assert msg == "spec.toml: exclude[0].btl_eager: 1 is not measured; valid: 4096"
    msg = error("[mca.sweep]\nbtl_eager = [4096]\n", "exclude = [{btl_eager = {a = 1}}]\n")
    assert msg == ("spec.toml: exclude[0].btl_eager: expected a string, number or true/false, "
                   "got {'a': 1}")


def test_load_spec_reports_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nope.toml: cannot read the spec: No such file"):
        load_spec(tmp_path / "nope.toml")


def test_schema_file_is_up_to_date() -> None:
    committed = (ROOT / "docs" / "spec.schema.json").read_text()
    assert committed == spec_json_schema_text(), "regenerate: python -m collbench.spec > " \
                                                 "docs/spec.schema.json"


def test_schema_describes_the_toml_shape() -> None:
    schema = spec_json_schema()
    assert schema["required"] == ["campaign", "measure"]
    measure = schema["$defs"]["Measure"]["properties"]
    assert "validate" in measure and "check_results" not in measure
    # a bare value is accepted where a list is
    assert {"type": "integer", "minimum": 1, "maximum": 2**20} in measure["nprocs"]["anyOf"]
    assert schema["$defs"]["Measure"]["additionalProperties"] is False
