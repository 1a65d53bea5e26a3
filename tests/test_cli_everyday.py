"""Everyday command-line behaviour: one-line errors, -o files, one CSV spelling, MPICH
algorithms the layout rules out."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from collbench.catalog import mpich
from collbench.catalog.algorithms import Catalog
from collbench.cli import main
from collbench.errors import UserError
from collbench.plan import make_plan
from collbench.spec import parse_spec
from collbench.tables import csv_cell, csv_table
from tests.backend_support import private_mpi
from tests.ingest import OSU


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "r"
    for name in ("osu_bcast_validate_np4", "osu_bcast_np4"):
        assert main(["ingest", str(OSU / f"{name}.txt"), "--nprocs", "4", "--mpi", "openmpi",
                     "--mpi-version", "5.0.11", "-o", str(out)]) == 0
    return out


@pytest.mark.parametrize(("sql", "message"), [
    ("SELEC 1", 'query: Parser Error: syntax error at or near "SELEC"'),
    ("SELECT nope FROM measurements", "query: Binder Error: Referenced column \"nope\""),
    # fails while rows are fetched, not when the statement is prepared
    ("SELECT CASE WHEN range > 5000 THEN CAST('y' AS INT) ELSE 1 END FROM range(100000)",
     "query: Conversion Error: Could not convert string 'y' to INT32"),
    ("", "query: the SQL is empty"),
    ("-- only a comment", "query: the statement returns no table"),
])
def test_sql_errors_are_one_line(folder: Path, sql: str, message: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["query", str(folder), sql]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_show_unknown_collective_is_did_you_mean(folder: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["show", str(folder), "--collective", "bcats"]) == 2
    err = capsys.readouterr().err
    assert err == (f"collbench: error: {folder}: no measurements of collective 'bcats'; "
                   "present: bcast (did you mean bcast?)\n")


def test_show_takes_runs_short_filters(folder: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """-c and -n mean in `show` what they mean in `run` (collective, process count)."""
    capsys.readouterr()
    assert main(["show", str(folder), "--collective", "bcast", "--nprocs", "4"]) == 0
    long = capsys.readouterr().out
    assert main(["show", str(folder), "-c", "bcast", "-n", "4"]) == 0
    assert capsys.readouterr().out == long and "bcast" in long
    assert main(["show", str(folder), "-c", "bcats"]) == 2


def test_csv_is_spelled_as_export_spells_it(folder: Path, tmp_path: Path) -> None:
    sql = ("SELECT validated, avg_us, size_bytes FROM measurements WHERE validated "
           "IS NOT NULL ORDER BY size_bytes, avg_us")
    out = tmp_path / "q.csv"
    assert main(["query", str(folder), sql, "--format", "csv", "-o", str(out)]) == 0
    ours = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {r["validated"] for r in ours} == {"true"}
    exported = tmp_path / "all.csv"
    assert main(["export", str(folder), "-o", str(exported)]) == 0
    theirs = sorted(((r["validated"], r["avg_us"], r["size_bytes"])
                     for r in csv.DictReader(io.StringIO(exported.read_text()))
                     if r["validated"]), key=lambda t: (int(t[2]), float(t[1])))
    assert [(r["validated"], r["avg_us"], r["size_bytes"]) for r in ours] == theirs
    assert [csv_cell(v) for v in (None, True, False, 0.1, 1e-07, float("nan"), 3)] == [
        "", "true", "false", "0.1", "1e-07", "nan", "3"]
    assert csv_table([{"a": "x,y", "b": None}], ["a", "b"]) == 'a,b\n"x,y",'


def test_plan_and_algorithms_write_their_table_with_o(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.txt"
    assert main(["plan", "-c", "bcast", "-n", "2", "-m", "1:4", "-o", str(plan)]) == 0
    assert plan.read_text().startswith("campaign cli: 6 launches")  # 6 repetitions
    algs = tmp_path / "a.csv"
    assert main(["algorithms", "bcast", "--format", "csv", "-o", str(algs)]) == 0
    rows = list(csv.DictReader(io.StringIO(algs.read_text())))
    assert rows[0] == {"collective": "bcast", "id": "0", "algorithm": "default",
                       "switch": "mpit", "layout": ""}
    assert "wrote" in capsys.readouterr().err


def test_mpich_layout_rule() -> None:
    assert mpich.layout_problem("smp", 4, 1) is not None  # one node
    assert mpich.layout_problem("smp", 2, 2) is not None  # one rank per node
    assert mpich.layout_problem("smp", 4, 2) is None
    assert mpich.layout_problem("smp", 4, None) is None  # unknown until the launch
    assert mpich.layout_problem("binomial", 4, 1) is None


SPEC = """
[campaign]
name = "m"
[measure]
collectives = ["bcast", "allreduce"]
algorithms = {algorithms}
sizes = [8]
nprocs = [2, 4]
"""


def test_plan_skips_smp_on_one_node_and_refuses_it_named() -> None:
    catalog = Catalog("mpich", "5.0.2", "test", mpich.table())
    spec = parse_spec(SPEC.format(algorithms='"all"'), "s.toml")
    names = {p.algorithm for la in make_plan(spec, catalog, "s.toml", 4, nodes=None).launches
             for p in la.points}
    assert "smp" in names  # the node count is not known: nothing ruled out
    plan = make_plan(spec, catalog, "s.toml", 4, nodes=1)
    assert "smp" not in {p.algorithm for la in plan.launches for p in la.points}
    assert [n.split(":")[0] for n in plan.notes] == ["bcast smp at np=2,4",
                                                     "allreduce smp at np=2,4"]
    named = parse_spec(SPEC.format(algorithms='["binomial", "smp"]').replace(
        '"allreduce"', ""), "s.toml")
    with pytest.raises(UserError, match=r"^s.toml: measure.algorithms: bcast smp needs ranks "
                                        r"on 2\+ nodes"):
        make_plan(named, catalog, "s.toml", 4, nodes=1)


def test_mpich_here_marks_and_skips_smp(capsys: pytest.CaptureFixture[str]) -> None:
    mpich_prefix = private_mpi("mpich")
    assert main(["algorithms", "reduce", "--mpi", str(mpich_prefix)]) == 0
    out = capsys.readouterr().out
    smp = next(line for line in out.splitlines() if " smp " in line)
    assert "needs ranks on 2+ nodes" in smp
    assert main(["plan", "-c", "reduce", "-n", "2", "-m", "8", "--mpi", str(mpich_prefix)]) == 0
    assert "skipped: reduce smp at np=2: needs ranks on 2+ nodes" in capsys.readouterr().out
    assert main(["plan", "-c", "reduce", "-n", "2", "--algorithms", "smp", "--mpi",
                 str(mpich_prefix)]) == 2
    assert "--algorithms: reduce smp needs ranks" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["show", "{folder}"], ["schema"], ["mpi"],
                                  ["mpi", "list"], ["platforms"]])
def test_table_commands_write_to_o(argv: list[str], folder: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Every command that prints a table or document writes it to -o FILE instead."""
    args = [a.format(folder=folder) for a in argv]
    capsys.readouterr()
    assert main(args) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "out.txt"
    assert main([*args, "-o", str(out)]) == 0
    assert capsys.readouterr().out == "" and out.read_text() == printed


def test_show_stat_is_never_silently_ignored(folder: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["show", str(folder), "--stat", "p99"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--stat p99 goes with --best" in err
    assert main(["show", str(folder), "--best", "--stat", "p99"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'p99' is not valid; valid: avg, median, min" in err


def test_compare_o_file_writes_what_it_prints(folder: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["compare", str(folder), "--summary"]) == 0
    printed = capsys.readouterr().out
    out = tmp_path / "summary.txt"
    assert main(["compare", str(folder), "--summary", "-o", str(out)]) == 0
    assert out.read_text() == printed and f"wrote {out}" in capsys.readouterr().err


def test_top_level_help_starts_with_what_collbench_does(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    description = text.split("\n\n", 1)[1]
    assert description.startswith("collbench measures MPI collectives")
    assert "-o is a FILE for commands that print a table" in description
