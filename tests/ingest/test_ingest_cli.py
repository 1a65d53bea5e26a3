"""`collbench ingest` end to end: files into a results folder, queried with SQL."""

import argparse
import json
from pathlib import Path

import pytest

from collbench.analyse.show import show
from collbench.commands.ingest import add_parser
from collbench.errors import UserError
from collbench.records import COLUMNS
from collbench.store import Store
from tests.ingest import IMB, OSU, needs_samples

pytestmark = needs_samples


def ingest(*argv: str | Path) -> int:
    top = argparse.ArgumentParser(prog="collbench")
    add_parser(top.add_subparsers())
    args = top.parse_args(["ingest", *map(str, argv)])
    return int(args.func(args))


def query(out: Path, sql: str) -> list[tuple[object, ...]]:
    con = Store(out).connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_osu_file_lands_as_one_launch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "orfeo"
    assert ingest(OSU / "osu_bcast_alg6_np4.txt", "--nprocs", "4", "--nodes", "2",
                  "--mca", "coll_tuned_bcast_algorithm=6", "--mapping", "core",
                  "--binding", "core", "--mpi", "openmpi", "--mpi-version", "5.0.11",
                  "-o", out) == 0
    assert "21 rows (bcast) -> launch osu-" in capsys.readouterr().out
    con = Store(out).connect()
    assert [d[0] for d in con.execute("SELECT * FROM measurements").description] == list(COLUMNS)
    con.close()
    assert query(out, """
        SELECT count(*), any_value(campaign), any_value(source), any_value(backend),
               any_value(algorithm), any_value(algorithm_id), any_value(selection),
               any_value(nprocs), any_value(nodes), any_value(ppn), any_value(mapping),
               any_value(mpi), min(size_bytes), max(size_bytes), count(DISTINCT launch_id)
        FROM measurements""") == [(21, "orfeo", "osu", "ingest", "binomial", 6, "launch", 4, 2,
                                   2, "core", "openmpi", 1, 1048576, 1)]
    assert query(out, "SELECT avg_us, min_us, max_us, iterations, status FROM measurements "
                      "WHERE size_bytes = 1048576") == [(220.25, 151.02, 321.70, 100, "ok")]
    (params,) = query(out, "SELECT DISTINCT params FROM measurements")[0]
    # Forcing keys are not parameters: the algorithm columns say what ran (catalog/forcing).
    assert json.loads(str(params)) == {
        "mca": {}, "osu": {"version": "7.4", "datatype": "MPI_CHAR"}}
    campaign = Store(out).campaign()
    assert (campaign["kind"], campaign["backend"], campaign["name"]) == ("ingest", "ingest",
                                                                        "orfeo")
    (meta_path,) = (out / "launches").glob("*.meta.json")
    meta = json.loads(meta_path.read_text())
    assert meta["status"] == "ok" and meta["command"].startswith("mpirun")
    assert meta["options"]["nprocs"] == 4 and len(meta["sha256"]) == 64
    assert "bcast" in show(Store(out))


def test_same_file_same_options_twice_is_a_no_op(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    args = (OSU / "osu_bcast_np2.txt", "--nprocs", "2", "-o", out)
    ingest(*args)
    lid = next((out / "launches").glob("*.jsonl")).stem
    capsys.readouterr()
    ingest(*args)
    assert f"already ingested as {lid}" in capsys.readouterr().out
    assert query(out, "SELECT count(*) FROM measurements") == [(21,)]
    ingest(*args, "--repetition", "1")  # other options: another launch, with a note
    assert f"the same file is stored as {lid}" in capsys.readouterr().out
    assert query(out, "SELECT repetition, count(*) FROM measurements GROUP BY 1 ORDER BY 1") == [
        (0, 21), (1, 21)]


def test_several_files_validation_and_nonblocking(tmp_path: Path) -> None:
    out = tmp_path / "r"
    ingest(OSU / "osu_allreduce_validate_np4.txt", OSU / "osu_iallgather_np4.txt",
           OSU / "osu_bcast_tail_np4.txt", "--nprocs", "4", "-o", out)
    assert query(out, "SELECT collective, status, count(*), count(validated) FROM measurements "
                      "GROUP BY ALL ORDER BY ALL") == [
        ("allreduce", "invalid", 1, 1), ("allreduce", "ok", 4, 4), ("bcast", "ok", 21, 0),
        ("iallgather", "ok", 21, 0)]
    assert query(out, "SELECT avg_us, error FROM measurements WHERE status = 'invalid'") == [
        (None, "OSU validation (-c) reported Fail")]
    assert query(out, "SELECT median_us, CAST(json_extract(metrics, '$.p99_us') AS DOUBLE) "
                      "FROM measurements WHERE collective = 'bcast' AND size_bytes = 1") == [
        (0.47, 0.76)]
    assert query(out, "SELECT avg_us, CAST(json_extract(metrics, '$.overall_us') AS DOUBLE) "
                      "FROM measurements WHERE collective = 'iallgather' "
                      "AND size_bytes = 1048576") == [(859.19, 2236.59)]


def test_imb_file_with_two_process_counts(tmp_path: Path) -> None:
    out = tmp_path / "imb"
    ingest(IMB / "IMB-MPI1_np4.txt", "-o", out, "--nprocs", "4")
    assert query(out, "SELECT collective, nprocs, count(*) FROM measurements "
                      "GROUP BY ALL ORDER BY ALL") == [
        ("allreduce", 2, 22), ("allreduce", 4, 22), ("bcast", 2, 24), ("bcast", 4, 24),
        ("gather", 2, 24), ("gather", 4, 24), ("latency", 2, 24)]
    assert query(out, "SELECT DISTINCT source, ppn, algorithm, selection FROM measurements") == [
        ("imb", 4, "default", "none")]
    assert query(out, "SELECT avg_us, bandwidth_mbs, iterations FROM measurements "
                      "WHERE collective = 'latency' AND size_bytes = 4194304") == [
        (433.92, 9665.98, 10)]
    params = json.loads(str(query(out, "SELECT any_value(params) FROM measurements")[0][0]))
    assert params["imb"]["imb_version"] == "2021.11" and params["imb"]["world_nprocs"] == 4
    assert params["imb"]["MPI Version"] == "3.1"


def test_imb_collective_is_a_filter_and_algorithm_needs_one(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="would name the algorithm of every benchmark"):
        ingest(IMB / "IMB-MPI1_np2.txt", "--algorithm", "ring", "-o", tmp_path / "a")
    ingest(IMB / "IMB-MPI1_np2.txt", "--collective", "bcast", "--algorithm", "binomial",
           "-o", tmp_path / "a")
    assert query(tmp_path / "a", "SELECT DISTINCT collective, algorithm FROM measurements") == [
        ("bcast", "binomial")]
    with pytest.raises(UserError, match=r"no ibcast results; the file has: latency, bcast"):
        ingest(IMB / "IMB-MPI1_np2.txt", "--collective", "ibcast", "-o", tmp_path / "b")


@pytest.mark.parametrize(("argv", "message"), [
    (["--nprocs", "2"], r"--nprocs 2 disagrees with the file: .* job of 4 processes"),
    (["--nodes", "3"], r"--ppn: 4 processes do not spread evenly over 3 nodes; give --ppn"),
    (["--nodes", "2", "--ppn", "1"], r"--ppn: 1 per node × 2 nodes holds fewer than the 4"),
    (["--nodes", "5"], r"--nodes: 5 nodes for 4 processes is not valid"),
])
def test_imb_option_conflicts(tmp_path: Path, argv: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        ingest(IMB / "IMB-MPI1_np4.txt", *argv, "-o", tmp_path / "r")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("argv", "message"), [
    ([], r"OSU output does not say how many processes ran; give --nprocs"),
    (["--nprocs", "x"], r"^--nprocs: 'x' is not a whole number$"),
    (["--nprocs", "0"], r"^--nprocs: 0 is not valid; expected a whole number >= 1$"),
    (["--nprocs", "2", "--collective", "allreduce"], r":4: the title says bcast .* allreduce"),
    (["--nprocs", "2", "--collective", "bcats"],
     r"^--collective: collective 'bcats' is not valid; valid: .*\(did you mean bcast\?\)$"),
    (["--nprocs", "2", "--mapping", "cor"],
     r"^--mapping: mapping 'cor' is not valid; valid: core, .*\(did you mean core\?\)$"),
    (["--nprocs", "2", "--binding", "sockets"], r"^--binding: binding 'sockets' is not valid"),
    (["--nprocs", "2", "--mca", "coll_tuned_bcast_algorithm"], r"^--mca: .* expected KEY VALUE"),
    (["--nprocs", "2", "--mca", "OMPI_MCA_x=1"], r"is not an MCA parameter name"),
    (["--nprocs", "2", "--mca", "a=1", "--mca", "a=2"], r"^--mca a: given more than once$"),
    (["--nprocs", "2", "--mca", "coll_tuned_bcast_algorithm=fast"], r"expected a whole number"),
    (["--nprocs", "2", "--campaign", "my campaign"],
     r"^--campaign: 'my campaign' is not a valid campaign name"),
    (["--nprocs", "2", "--format", "xml"], r"^--format: format 'xml' is not valid; valid: auto"),
    (["--nprocs", "2", "--format", "imb"], r"osu_bcast_np2.txt: not IMB output"),
    (["--nprocs", "2", "--repetition", "-1"], r"^--repetition: -1 is out of range"),
])
def test_bad_options(tmp_path: Path, argv: list[str], message: str) -> None:
    with pytest.raises(UserError, match=message):
        ingest(OSU / "osu_bcast_np2.txt", *argv, "-o", tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_point_to_point_needs_two_processes(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--nprocs 4 is not valid for osu_latency, which runs "
                                        r"with exactly 2 processes"):
        ingest(OSU / "osu_latency_np2.txt", "--nprocs", "4", "-o", tmp_path / "r")


def test_an_ignored_algorithm_id_must_be_named(tmp_path: Path) -> None:
    f = OSU / "osu_bcast_alg42_invalid_np4.txt"
    mca = ("--mca", "coll_tuned_bcast_algorithm=42")
    # The `### cmd:` line forced 42 too: with or without --mca, it is refused the same way.
    for extra in ((), mca):
        with pytest.raises(UserError, match=r"coll_tuned_bcast_algorithm: 42 is not a bcast "
                                            r"algorithm of openmpi 5.0.11; valid: default, "
                                            r"basic_linear \(1\), .*name what ran with "
                                            r"--algorithm$"):
            ingest(f, "--nprocs", "4", *extra, "--mpi-version", "5.0.11", "-o", tmp_path / "r")
    ingest(f, "--nprocs", "4", *mca, "--algorithm", "default", "-o", tmp_path / "r")
    assert query(tmp_path / "r", "SELECT DISTINCT algorithm, algorithm_id, selection "
                                 "FROM measurements") == [("default", 0, "launch")]


def test_segment_size_and_fanout_come_from_mca(tmp_path: Path) -> None:
    ingest(OSU / "osu_bcast_np2.txt", "--nprocs", "2",
           "--mca", "coll_tuned_bcast_algorithm=3",
           "--mca", "coll_tuned_bcast_algorithm_segmentsize=8192",
           "--mca", "coll_tuned_bcast_algorithm_chain_fanout=2", "-o", tmp_path / "r")
    assert query(tmp_path / "r", "SELECT DISTINCT algorithm, segsize, fanout "
                                 "FROM measurements") == [("pipeline", 8192, 2)]


def test_folders_that_are_not_ours_or_another_campaign(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(UserError, match="exists and is not a collbench results folder"):
        ingest(OSU / "osu_bcast_np2.txt", "--nprocs", "2", "-o", other)
    ingest(OSU / "osu_bcast_np2.txt", "--nprocs", "2", "-o", tmp_path / "r",
           "--campaign", "first")
    with pytest.raises(UserError, match=r"holds campaign 'first', not 'second'"):
        ingest(OSU / "osu_gather_np2.txt", "--nprocs", "2", "-o", tmp_path / "r",
               "--campaign", "second")
    ingest(OSU / "osu_gather_np2.txt", "--nprocs", "2", "-o", tmp_path / "r")
    assert query(tmp_path / "r", "SELECT DISTINCT campaign FROM measurements") == [("first",)]


def test_a_bad_file_stops_everything_before_writing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.out"
    bad.write_text("# OSU MPI Broadcast Latency Test v7.4\n# Size  Avg Latency(us)\n1 0.3\n2\n")
    with pytest.raises(UserError, match=r"bad.out:4: expected 2 columns \(Size Avg\), got 1"):
        ingest(OSU / "osu_bcast_np2.txt", bad, "--nprocs", "2", "-o", tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(UserError,
                       match=r"missing.out: cannot read the benchmark output: No such file"):
        ingest(tmp_path / "missing.out", "--nprocs", "2", "-o", tmp_path / "r")
    with pytest.raises(UserError,
                       match=r"is a folder; the benchmark output must be a regular file"):
        ingest(tmp_path, "--nprocs", "2", "-o", tmp_path / "r")
