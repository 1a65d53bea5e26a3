"""Rules never silently reach beyond what was measured (issue 27), rules from a SimGrid
campaign of the Open MPI ports, and their regret on a real folder (issue 25)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from collbench.analyse.against import rules_regret
from collbench.cli import main
from collbench.models.accuracy import Key
from collbench.store import Store
from collbench.tune.regret import picked
from collbench.tune.rules import parse_rules
from collbench.tune.select import select
from collbench.tune.verify import comm_set
from collbench.tune.writer import build
from tests.simgrid_support import needs_smpi, sim_env, smpi_cache, smpi_kernel, smpi_tools

__all__ = ["sim_env", "smpi_cache", "smpi_kernel", "smpi_tools"]
EPYC = Path(__file__).resolve().parents[3] / "shared" / "data" / "orfeo-epyc"


def test_beyond_the_measured_counts_the_file_keeps_the_fixed_decision(
        bcast_store: Callable[..., Store]) -> None:
    sel = select(bcast_store(nprocs=(4, 8)))
    rules = parse_rules(build(sel, version=2, source="res").text).rules
    assert rules is not None
    for n, alg in ((2, 0), (3, 0), (4, 6), (7, 6), (8, 6), (9, 0), (1024, 0)):
        comm = comm_set(rules, 7, n)
        assert comm is not None and comm.rules[0].alg == alg, n
    assert picked(rules, "5.0", "bcast", 1024, 1024) == "knomial"  # the fixed decision's


def test_extrapolate_is_explicit_and_said(bcast_store: Callable[..., Store]) -> None:
    sel = select(bcast_store(nprocs=(4,)))
    written = build(sel, version=2, source="res", extrapolate=True)
    assert written.rules.preamble[2].startswith("EXTRAPOLATED (--extrapolate): measured at "
                                                "np 4; Open MPI applies the np=4 rules to "
                                                "every larger communicator (np=1,024 too)")
    rules = parse_rules(written.text).rules
    assert rules is not None
    assert comm_set(rules, 7, 1024) == comm_set(rules, 7, 4)
    assert comm_set(rules, 7, 1024).rules[0].alg == 6  # type: ignore[union-attr]
    assert "EXTRAPOLATED beyond np 4" in written.text


def test_tune_prints_the_reach(bcast_store: Callable[..., Store], tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    store = bcast_store(nprocs=(4,))
    assert main(["tune", str(store.root), "-o", str(tmp_path / "t.rules")]) == 0
    out = capsys.readouterr().out
    assert "note: measured at np 4; outside np 4 this file keeps Open MPI's fixed " \
           "decision (--extrapolate" in out
    assert main(["tune", str(store.root), "-o", str(tmp_path / "x.rules"),
                 "--extrapolate"]) == 0
    assert "np=1,024 too" in capsys.readouterr().out
    assert "np=1,024 too" in (tmp_path / "x.rules").read_text()


def test_regret_is_the_real_latency_of_the_pick_over_the_real_best() -> None:
    real = {Key("bcast", "binomial", 4, "core", 8): 2.0,
            Key("bcast", "pipeline", 4, "core", 8): 3.0,
            Key("bcast", "binomial", 4, "core", 64): 5.0,
            Key("bcast", "pipeline", 4, "core", 64): 4.0,
            Key("bcast", "default", 4, "core", 64): 1.0}  # not a forced algorithm
    got = rules_regret(real, {("bcast", 4, "core", 8): "pipeline",
                              ("bcast", 4, "core", 64): "pipeline"})
    assert got.same_fraction == 0.5 and got.penalty is not None
    assert [round((s.penalty - 1) * 100, 6) for s in got.selections] == [50.0, 0.0]
    # a file that keeps the default there: A's default runs, and competes for the best
    kept = rules_regret(real, {("bcast", 4, "core", 64): "default"})
    assert kept.same_fraction == 1.0 and kept.selections[0].penalty == 1.0
    none = rules_regret(real, {("bcast", 4, "core", 8): "knomial"})
    assert none.penalty is None and none.unmeasured == 1


SIM = """\
[campaign]
name = "sim-rules"
[measure]
collectives = ["bcast"]
algorithms = ["default", "basic_linear", "binary_tree", "pipeline"]
sizes = [4, 1024, 65536, 262144]
nprocs = [4]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
repetitions = 1
[run.simgrid]
platform = "orfeo-epyc"
ompi_version = "4.1"
"""


@needs_smpi
@pytest.mark.slow
@pytest.mark.skipif(not EPYC.is_dir(), reason="shared orfeo-epyc data not present")
def test_rules_from_a_simulation_and_their_regret_on_real_data(
        tmp_path: Path, sim_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "sim.toml"
    spec.write_text(SIM)
    assert main(["run", str(spec), "-o", str(tmp_path / "sim")]) == 0
    real = tmp_path / "epyc"
    assert main(["ingest", str(EPYC / "collectives.csv"), "--where",
                 "source_repo=eruoppolo/HPC_2023", "--column", "collective=collective",
                 "--column", "algorithm=algorithm", "--column", "nprocs=nprocs", "--column",
                 "mapping=map_by", "--column", "size_bytes=size_bytes", "--column",
                 "avg_us=avg_us", "--ppn", "128", "--mpi", "openmpi", "--mpi-version",
                 "4.1.6", "-o", str(real)]) == 0
    capsys.readouterr()
    rules = tmp_path / "sim.rules"
    assert main(["tune", str(tmp_path / "sim"), "-o", str(rules), "--against",
                 str(real)]) == 0
    out = capsys.readouterr().out
    text = rules.read_text()
    assert "PREDICTED, not measured: simulated with SimGrid" in text
    assert "collbench's ports of Open MPI 4.1's coll/tuned" in text
    m = re.search(r"against .*: the rules pick its best algorithm at ([\d.]+) % of (\d+) "
                  r"cells; regret .*median ([\d.]+) %", out)
    assert m is not None, out
    # every cell of the real folder at np 4 with 2 or more forced algorithms: the rules
    # pick at every size, not only at the simulated ones
    from collbench.analyse.against import read_points

    points = read_points(Store(real))
    cells = {(k.mapping, k.size_bytes) for k in points
             if k.nprocs == 4 and k.algorithm != "default"}
    multi = [c for c in cells if sum((k.mapping, k.size_bytes) == c and k.nprocs == 4
                                     and k.algorithm != "default" for k in points) >= 2]
    unmeasured = re.search(r"; (\d+) picks it did not measure", out)
    assert int(m.group(2)) + (int(unmeasured.group(1)) if unmeasured else 0) == len(multi) > 4
    reading = parse_rules(text)
    assert reading.rules is not None and not reading.problems
