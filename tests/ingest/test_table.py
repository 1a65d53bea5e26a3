"""`collbench ingest --column ...`: tidy CSV tables into rows (ingest.table)."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.errors import UserError
from collbench.ingest.table import Context, TableOptions, read_table
from collbench.store import Store

TABLE = """\
src,coll,alg,np,map,size,avg_ms,minimum
a,bcast,binomial,4,core,1,0.001,0.0009
a,bcast,binomial,4,core,1,0.003,
a,bcast,pipeline,130,core,1024,0.25,0.2
b,scatter,basic_linear,8,socket,0,0,0
"""
COLUMNS = ("--column", "collective=coll", "--column", "algorithm=alg", "--column",
           "nprocs=np", "--column", "mapping=map", "--column", "size_bytes=size",
           "--column", "avg_us=avg_ms", "--column", "min_us=minimum")
DEV = Path(__file__).resolve().parents[3] / "shared" / "data" / "orfeo-epyc"


def _query(out: Path, sql: str) -> list[tuple[object, ...]]:
    con = Store(out).connect()
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_table_lands_as_one_launch_with_units_and_placement(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TABLE)
    out = tmp_path / "r"
    assert main(["ingest", str(tmp_path / "t.csv"), *COLUMNS, "--time-unit", "ms",
                 "--ppn", "128", "--mpi", "openmpi", "--mpi-version", "4.1.6",
                 "-o", str(out)]) == 0
    rows = _query(out, "SELECT source, collective, algorithm, nprocs, nodes, ppn, mapping, "
                       "size_bytes, repetition, avg_us, min_us FROM measurements "
                       "ORDER BY collective, algorithm, repetition")
    assert [r[:9] for r in rows] == [
        ("csv", "bcast", "binomial", 4, 1, 4, "core", 1, 0),
        ("csv", "bcast", "binomial", 4, 1, 4, "core", 1, 1),  # the same point again
        ("csv", "bcast", "pipeline", 130, 2, 128, "core", 1024, 0),  # 130 ranks, 128/node
        ("csv", "scatter", "basic_linear", 8, 1, 8, "socket", 0, 0)]
    assert [r[9] for r in rows] == pytest.approx([1.0, 3.0, 250.0, 0.0])  # ms -> µs
    assert rows[1][10] is None  # an empty cell is no value
    # the same table and options again: nothing new
    assert main(["ingest", str(tmp_path / "t.csv"), *COLUMNS, "--time-unit", "ms",
                 "--ppn", "128", "--mpi", "openmpi", "--mpi-version", "4.1.6",
                 "-o", str(out)]) == 0
    assert _query(out, "SELECT count(*) FROM measurements") == [(4,)]


def test_where_keeps_matching_lines_and_options_fill_missing_fields(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TABLE)
    out = tmp_path / "r"
    assert main(["ingest", str(tmp_path / "t.csv"), "--column", "size_bytes=size",
                 "--column", "avg_us=avg_ms", "--where", "src=a", "--where", "alg~omia",
                 "--collective", "bcast", "--nprocs", "2", "--mapping", "node", "--nodes",
                 "2", "-o", str(out)]) == 0
    assert _query(out, "SELECT collective, algorithm, nprocs, nodes, ppn, mapping, avg_us "
                       "FROM measurements ORDER BY repetition") == [
        ("bcast", "default", 2, 2, 1, "node", 0.001), ("bcast", "default", 2, 2, 1, "node",
                                                        0.003)]


@pytest.mark.parametrize(("table", "argv", "message"), [
    (TABLE.replace("0.25", "fast"), COLUMNS,
     r"t\.csv:4: avg_ms \(avg_us\): 'fast' is not valid; valid: a time in us .* from 0 to "
     r"1e\+12"),
    (TABLE.replace("0.25", "-1"), COLUMNS, r"t\.csv:4: avg_ms \(avg_us\): '-1' is not valid"),
    (TABLE.replace("0.25", "1e300"), COLUMNS, r"'1e300' is not valid"),
    (TABLE.replace(",130,", ",2000000,"), COLUMNS,
     r"t\.csv:4: np \(nprocs\): '2000000' is not valid; valid: processes in the run, a "
     r"whole number from 1 to 1,048,576"),
    (TABLE.replace("scatter", "scater"), COLUMNS,
     r"t\.csv:5: coll \(collective\): collective 'scater' is not valid; valid: .*scatter"),
    (TABLE.replace("socket", "sockets"), COLUMNS,
     r"t\.csv:5: map \(mapping\): mapping 'sockets' is not valid; valid: core, socket"),
    (TABLE, ("--column", "size_bytes=bytes", "--column", "avg_us=avg_ms", "--collective",
             "bcast", "--nprocs", "2"),
     r"t\.csv: --column size_bytes: column 'bytes' is not in the header; valid: src, coll"),
    (TABLE, ("--column", "size=size"), r"--column: field 'size' is not valid; valid: "
                                       r"collective, .*size_bytes"),
    (TABLE, ("--column", "avg_us=avg_ms", "--nprocs", "2", "--collective", "bcast"),
     r"--column: size_bytes is not mapped"),
    (TABLE, ("--column", "size_bytes=size", "--collective", "bcast", "--nprocs", "2"),
     r"--column: no figure is mapped; valid: at least one of avg_us"),
    (TABLE, ("--column", "size_bytes=size", "--column", "avg_us=avg_ms", "--nprocs", "2"),
     r"no collective: valid: --column collective=COLUMN or --collective NAME"),
    (TABLE, (*COLUMNS, "--time-unit", "h"), r"--time-unit: unit 'h' is not valid; valid: ns"),
    (TABLE, (*COLUMNS, "--format", "osu"), r"--column: a CSV table cannot be --format osu"),
    (TABLE, (*COLUMNS, "--where", "src=zzz"), r"t\.csv: no line kept by --where"),
    (TABLE, ("--where", "src=a"), r"--where/--time-unit: only for CSV tables"),
    ("", COLUMNS, r"t\.csv: no CSV header line"),
    (TABLE, ("--format", "csv"), r"--format csv: no --column given"),
    (TABLE, ("--nprocs", "2"), r"t\.csv: not OSU or IMB output: .* \(a CSV table\? name its "
                               r"columns: --column FIELD=COLUMN"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, table: str, argv: tuple[str, ...],
                                         message: str, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    (tmp_path / "t.csv").write_text(table)
    assert main(["ingest", str(tmp_path / "t.csv"), *argv, "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert re.search(message, err), err
    assert not (tmp_path / "r" / "campaign.json").exists()  # nothing written


def _ctx() -> Context:
    return Context("f.csv", "c", "csv-x", None, None, 2, 1, None, None, None, "openmpi",
                   "4.1.6", 0, {}, None)


FIELDS = ("size_bytes=b", "avg_us=t", "collective=c", "algorithm=a", "nprocs=n", "ppn=p",
          "nodes=d", "mapping=m", "algorithm_id=i")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=400), prefix=st.booleans())
def test_arbitrary_bytes_give_rows_or_one_user_error(data: bytes, prefix: bool) -> None:
    # with a valid header first, random bytes reach the value checks too
    body = (b"b,t,c,a,n,p,d,m,i\n" if prefix else b"") + data
    table = TableOptions(tuple((f.split("=")[0], f.split("=")[1]) for f in FIELDS))
    try:
        rows = read_table(body, table, _ctx())
    except UserError as e:
        assert "\n" not in str(e)
        return
    for r in rows:
        assert 0 <= r["size_bytes"] <= 1 << 40 and 1 <= r["nprocs"] <= 1 << 20
        assert r["avg_us"] is None or 0 <= r["avg_us"] <= 1e12
        assert r["nodes"] * r["ppn"] >= r["nprocs"] and r["source"] == "csv"


@pytest.mark.skipif(not DEV.is_dir(), reason="the dev set (../shared/data) is not here")
def test_dev_set_collectives_every_kept_line_is_a_row(tmp_path: Path) -> None:
    out = tmp_path / "epyc"
    assert main(["ingest", str(DEV / "collectives.csv"), "--where",
                 "source_repo=eruoppolo/HPC_2023", "--column", "collective=collective",
                 "--column", "algorithm=algorithm", "--column", "algorithm_id=algorithm_id",
                 "--column", "nprocs=nprocs", "--column", "mapping=map_by", "--column",
                 "size_bytes=size_bytes", "--column", "avg_us=avg_us", "--ppn", "128",
                 "--mpi", "openmpi", "--mpi-version", "4.1.6", "-o", str(out)]) == 0
    with (DEV / "collectives.csv").open(newline="") as f:
        lines = [r for r in csv.DictReader(f) if r["source_repo"] == "eruoppolo/HPC_2023"]
    got = _query(out, "SELECT collective, algorithm, nprocs, size_bytes, avg_us, nodes "
                      "FROM measurements")
    assert len(got) == len(lines)
    assert sorted(got)[0][:5] == min((r["collective"], r["algorithm"], int(r["nprocs"]),
                                      int(r["size_bytes"]), float(r["avg_us"]))
                                     for r in lines)
    assert {(n, d) for _, _, n, _, _, d in got if n in (128, 129, 256)} == \
        {(128, 1), (129, 2), (256, 2)}


@pytest.mark.skipif(not DEV.is_dir(), reason="the dev set (../shared/data) is not here")
def test_docs_ingest_lines_run_as_shown_on_the_dev_set(tmp_path: Path) -> None:
    import shlex

    text = (Path(__file__).resolve().parents[2] / "docs" / "ingest.md").read_text()
    lines = [shlex.split(line)[1:] for line in text.splitlines()
             if line.startswith("collbench ingest ") and ".csv " in line]
    assert [line[1] for line in lines] == ["collectives.csv", "pingpong.csv"]
    for name in ("collectives.csv", "pingpong.csv"):
        (tmp_path / name).symlink_to(DEV / name)
    for argv in lines:
        argv = [str(tmp_path / a) if a.endswith(".csv") or a.startswith("results/") else a
                for a in argv]
        assert main(argv) == 0, argv
    assert _query(tmp_path / "results" / "epyc-pp",
                  "SELECT DISTINCT mapping, nodes, ppn FROM measurements") == [("node", 2, 1)]
