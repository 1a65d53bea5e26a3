import json
from pathlib import Path
from typing import Any

import pytest

from collbench.errors import UserError
from collbench.records import COLUMNS, FORMAT_VERSION, make_row
from collbench.store import Store


def _store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "res")
    s.create({"name": "t", "seed": 1}, "[campaign]\nname='t'\n", {"launches": []},
             {"host": "h", "mpi_info_dump": "mca:x:y\n"})
    return s


def _rows(lid: str, n: int) -> list[dict[str, Any]]:
    return [make_row(campaign="t", launch_id=lid, collective="bcast", algorithm="default",
                     size_bytes=2**i, avg_us=float(i), min_us=0.5, max_us=2.0 * i + 1,
                     status="ok", nprocs=2) for i in range(n)]


def test_create_records_spec_plan_provenance_and_dump(tmp_path: Path) -> None:
    s = _store(tmp_path)
    assert s.campaign()["format_version"] == FORMAT_VERSION
    assert (s.root / "ompi_info.txt").read_text() == "mca:x:y\n"
    assert "mpi_info_dump" not in json.loads((s.root / "provenance.json").read_text())
    assert s.spec_text().startswith("[campaign]")


def test_create_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    _store(tmp_path)
    with pytest.raises(UserError, match="not empty; use --resume"):
        _store(tmp_path)


def test_launches_are_queryable_and_listed_as_finished(tmp_path: Path) -> None:
    s = _store(tmp_path)
    s.write_launch("0001-aa", _rows("0001-aa", 3), {"status": "ok"})
    s.write_launch("0002-bb", _rows("0002-bb", 2), {"status": "failed"})
    assert s.finished() == {"0001-aa": "ok", "0002-bb": "failed"}
    con = s.connect()
    assert con.execute("SELECT count(*), sum(avg_us) FROM measurements").fetchone() == (5, 4.0)
    assert [d[0] for d in con.execute("SELECT * FROM measurements").description] == list(COLUMNS)
    s.forget(["0002-bb"])
    assert set(s.finished()) == {"0001-aa"}


def test_empty_folder_has_empty_tables(tmp_path: Path) -> None:
    con = _store(tmp_path).connect()
    assert con.execute("SELECT count(*) FROM measurements").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM samples").fetchone() == (0,)


def test_samples_go_to_parquet(tmp_path: Path) -> None:
    s = _store(tmp_path)
    raw = tmp_path / "s.jsonl"
    raw.write_text("".join(json.dumps({
        "launch_id": "0001-aa", "collective": "bcast", "algorithm": "default", "segsize": 0,
        "fanout": 0, "size_bytes": 8, "iteration": i, "sample_us": 1.0 + i}) + "\n"
        for i in range(10)))
    s.write_launch("0001-aa", _rows("0001-aa", 1), {"status": "ok"}, raw)
    con = s.connect()
    assert con.execute("SELECT count(*), max(sample_us) FROM samples").fetchone() == (10, 10.0)


def test_rows_must_match_the_data_model(tmp_path: Path) -> None:
    s = _store(tmp_path)
    with pytest.raises(ValueError, match="data model"):
        s.write_launch("x", [{"collective": "bcast"}], {})
    assert s.finished() == {}


def test_leftover_temp_files_are_ignored(tmp_path: Path) -> None:
    s = _store(tmp_path)
    s.write_launch("0001-aa", _rows("0001-aa", 2), {"status": "ok"})
    # what a SIGKILL during a write leaves behind
    (s.launch_dir / ".0002-bb.jsonl.x.tmp").write_text('{"campaign": "t", "laun')
    assert set(s.finished()) == {"0001-aa"}
    assert s.connect().execute("SELECT count(*) FROM measurements").fetchone() == (2,)


def test_not_a_results_folder_and_wrong_version(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a collbench results folder"):
        Store(tmp_path).connect()
    s = _store(tmp_path)
    meta = json.loads(s.meta_path.read_text())
    s.meta_path.write_text(json.dumps(dict(meta, format_version=99)))
    with pytest.raises(UserError, match="format_version 99 is not supported; valid: 1"):
        s.connect()
