import json
import os
import subprocess
from collections.abc import Callable
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


def _write(text: str) -> Callable[[Path], None]:
    def write(tmp: Path) -> None:
        tmp.write_text(text)
    return write


def _temporary_name(target: str, pid: int, host: str) -> str:
    """A temporary file's name as store.temporary() makes it."""
    return f".{target}.{pid}-{host}.0123abcd.tmp.csv"


def test_a_write_sweeps_dead_writers_temporaries_and_keeps_live_ones(tmp_path: Path) -> None:
    from collbench import store

    dead = int(Path("/proc/sys/kernel/pid_max").read_text())  # no process ever has it
    live = subprocess.Popen(["sleep", "60"])
    other_host = "0" * 8 if store._HOST != "0" * 8 else "1" * 8
    try:
        kept = {_temporary_name("x.csv", live.pid, store._HOST),  # a live writer's
                _temporary_name("x.csv", dead, other_host),  # a PID of another machine
                ".x.csv.k3j4l5m6.tmp.csv"}  # not of this naming: not ours to judge
        swept = {_temporary_name("x.csv", dead, store._HOST),
                 _temporary_name("y.parquet", dead, store._HOST)}
        for name in kept | swept:
            (tmp_path / name).write_text("partial")
        store.publish(tmp_path / "x.csv", _write("a\n1\n"))
        assert set(os.listdir(tmp_path)) == kept | {"x.csv"}
        assert (tmp_path / "x.csv").read_text() == "a\n1\n"
    finally:
        live.kill()
        live.wait()


def test_publish_makes_no_folder(tmp_path: Path) -> None:
    from collbench import store

    with pytest.raises(UserError, match=r"x.csv: the folder .*/no does not exist; valid: an "
                                        r"existing folder$"):
        store.publish(tmp_path / "no" / "x.csv", _write("a\n"))
    assert not (tmp_path / "no").exists()


def test_an_interrupted_creation_may_be_created_again(tmp_path: Path) -> None:
    s = Store(tmp_path / "res")
    assert s.creatable()  # absent
    s.root.mkdir()
    for name in (".collbench.lock", "spec.toml", ".plan.json.1-00000000.0123abcd.tmp"):
        (s.root / name).write_text("half")
    assert s.creatable()
    (s.root / "notes.txt").write_text("the user's")
    assert not s.creatable()
    (s.root / "notes.txt").unlink()
    _store(tmp_path)  # completes it
    assert not s.creatable() and s.campaign()["name"] == "t"
