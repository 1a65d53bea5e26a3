"""Ingest keeps the algorithm a run forced: from the `### cmd:` line or --mca, named with
the table of the run's MPI version, so `tune` works on ingested data."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collbench.cli import main
from collbench.ingest.forced import recorded_mca
from collbench.store import Store
from tests.ingest import OSU


def rows(out: Path) -> list[tuple[object, ...]]:
    con = Store(out).connect()
    try:
        return con.execute("SELECT DISTINCT algorithm, algorithm_id, selection, "
                           "json_extract_string(params, '$.mca') FROM measurements "
                           "ORDER BY 2").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize(("command", "mca"), [
    ("mpirun -np 4 --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_bcast_algorithm 6 "
     "osu_bcast -f", {"coll_tuned_use_dynamic_rules": "1", "coll_tuned_bcast_algorithm": "6"}),
    ("mpirun -mca coll_tuned_bcast_algorithm 7 -np 2 ./osu_bcast",
     {"coll_tuned_bcast_algorithm": "7"}),
    ("mpirun -x OMPI_MCA_coll_tuned_bcast_algorithm=3 -np 2 /opt/osu/osu_bcast",
     {"coll_tuned_bcast_algorithm": "3"}),
    ("OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_scatter_algorithm=2 "
     "mpirun -np 4 osu_scatter", {"coll_tuned_use_dynamic_rules": "1",
                                  "coll_tuned_scatter_algorithm": "2"}),
    ("mpiexec -genv MPIR_CVAR_BCAST_INTRA_ALGORITHM binomial -n 4 osu_bcast",
     {"MPIR_CVAR_BCAST_INTRA_ALGORITHM": "binomial"}),
    # The benchmark's own options are not the launcher's: -x is OSU's warm-up count.
    ("mpirun -np 2 osu_bcast -x 10 --mca coll_tuned_bcast_algorithm 6", {}),
    ("mpirun -np 2 osu_bcast 'unbalanced", {}),
    (None, {}),
])
def test_recorded_command_settings(command: str | None, mca: dict[str, str]) -> None:
    assert recorded_mca(command) == mca


def test_forcing_on_the_cmd_line_is_that_algorithm_never_default(tmp_path: Path) -> None:
    out = tmp_path / "r"
    for name in ("osu_bcast_np4", "osu_bcast_alg1_np4", "osu_bcast_alg6_np4",
                 "osu_bcast_alg9_np4"):
        assert main(["ingest", str(OSU / f"{name}.txt"), "--nprocs", "4", "--mpi", "openmpi",
                     "--mpi-version", "5.0.11", "-o", str(out)]) == 0
    # One experiment (the forcing keys are no parameters), four algorithms.
    assert rows(out) == [("default", 0, "none", "{}"), ("basic_linear", 1, "launch", "{}"),
                         ("binomial", 6, "launch", "{}"),
                         ("scatter_allgather_ring", 9, "launch", "{}")]
    rules = tmp_path / "t.rules"
    assert main(["tune", str(out), "--no-significance", "-o", str(rules)]) == 0
    assert "# bcast" in rules.read_text()


def test_mca_as_mpirun_spells_it_and_files_after_it(tmp_path: Path) -> None:
    out = tmp_path / "r"
    assert main(["ingest", "--nprocs", "2", "--mca", "coll_tuned_bcast_algorithm", "7",
                 str(OSU / "osu_bcast_np2.txt"), "-o", str(out)]) == 0
    assert rows(out) == [("knomial", 7, "launch", "{}")]


def test_algorithm_names_and_ids_of_the_version(tmp_path: Path) -> None:
    assert main(["ingest", str(OSU / "osu_bcast_np2.txt"), "--nprocs", "2", "--algorithm",
                 "pipeline", "--mpi-version", "5.0.3", "--mpi", "openmpi",
                 "-o", str(tmp_path / "a")]) == 0
    assert rows(tmp_path / "a") == [("pipeline", 3, "none", "{}")]
    assert main(["ingest", str(OSU / "osu_bcast_np2.txt"), "--nprocs", "2", "--algorithm",
                 "8", "-o", str(tmp_path / "b")]) == 0  # the installed MPI's table
    assert rows(tmp_path / "b") == [("scatter_allgather", 8, "none", "{}")]


@pytest.mark.parametrize(("argv", "message"), [
    (["osu_bcast_np2", "--algorithm", "binomal"],
     "--algorithm: 'binomal' is not a bcast algorithm of openmpi 5.0.11; valid: default, "
     "basic_linear (1), "),
    (["osu_bcast_alg6_np2", "--algorithm", "chain"],
     "the run forced coll_tuned_bcast_algorithm 6, which is 'binomial' in openmpi 5.0.11"),
    (["osu_bcast_alg6_np2", "--mca", "coll_tuned_bcast_algorithm", "7"],
     "--mca coll_tuned_bcast_algorithm 7 contradicts the recorded command "
     "(coll_tuned_bcast_algorithm 6)"),
    (["osu_bcast_alg6_np2", "--mpi-version", "4.0.7"],
     "coll_tuned_bcast_algorithm 6: collbench has no algorithm table for openmpi 4.0.7"),
])
def test_refusals_are_one_line(tmp_path: Path, argv: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    file, *rest = argv
    base = ["--nprocs", "2", "--mpi", "openmpi", "--mpi-version", "5.0.11"]
    if "--mpi-version" in rest:
        base = base[:4]
    assert main(["ingest", str(OSU / f"{file}.txt"), *base, *rest,
                 "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "r").exists()


def test_mpich_runs_are_named_by_their_cvar(tmp_path: Path) -> None:
    text = (OSU / "osu_bcast_np4.txt").read_text().splitlines()
    text[0] = "### cmd: mpiexec -n 4 -genv MPIR_CVAR_BCAST_INTRA_ALGORITHM scatter_recursive_" \
              "doubling_allgather osu_bcast -f -m 1:1048576"
    crafted = tmp_path / "mpich_bcast.txt"
    crafted.write_text("\n".join(text) + "\n")
    assert main(["ingest", str(crafted), "--nprocs", "4", "--mpi", "mpich",
                 "--mpi-version", "4.2.0", "-o", str(tmp_path / "r")]) == 0
    assert rows(tmp_path / "r") == [("scatter_recursive_doubling_allgather", None, "launch",
                                     "{}")]


@given(st.text(max_size=300))
def test_any_recorded_command_reads_without_a_traceback(command: str) -> None:
    found = recorded_mca(command)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in found.items())
