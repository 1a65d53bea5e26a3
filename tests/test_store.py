import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collbench.cli import main
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


# --- readers while a run rewrites the folder ----------------------------------------------

# What `run --resume --retry-failed` does to a folder, faster: a launch's rows file removed
# (Store.forget), then stored again (written aside, renamed), 50 launches a second.
REWRITER = """\
import os, sys, time
folder, stop = sys.argv[1], sys.argv[2]
names = sorted(n for n in os.listdir(folder) if n.endswith(".jsonl"))
data = {n: open(os.path.join(folder, n), "rb").read() for n in names}
open(stop + ".started", "w").close()
while not os.path.exists(stop):
    for n in names:
        path = os.path.join(folder, n)
        os.unlink(path)
        time.sleep(0.002)
        with open(path + ".tmp", "wb") as f:
            f.write(data[n])
        os.replace(path + ".tmp", path)
        time.sleep(0.02)
"""


@contextlib.contextmanager
def _rewritten(s: Store) -> Iterator[None]:
    """A real concurrent process rewriting `s`'s rows files until the block ends."""
    stop = s.root.parent / "stop"
    proc = subprocess.Popen([sys.executable, "-c", REWRITER, str(s.launch_dir), str(stop)])
    try:
        deadline = time.monotonic() + 30
        while not stop.with_name("stop.started").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        yield
    finally:
        stop.touch()
        proc.wait(timeout=30)


def _many(tmp_path: Path, launches: int = 10) -> Store:
    """A folder of `launches` launches. A reader races the rewrite when it opens a file in
    the 2 ms it is missing: each file is missing 2 of every 22 ms of a cycle over all of
    them, so the share of time some file is missing (the chance a read races) does not
    depend on how many there are; fewer make each read cheaper (measured: 40 -> 10 files,
    ~0.26 races per damage-check iteration and ~1 per 10 DuckDB reads either way)."""
    s = _store(tmp_path)
    for n in range(launches):
        lid = f"{n:04d}-aa"
        s.write_launch(lid, _rows(lid, 2), {"status": "ok"})
    return s


def test_a_rows_file_removed_meanwhile_is_not_damage(tmp_path: Path) -> None:
    """A file gone between the listing and the reading is not stored (any more), never
    "damaged" (which a resume would measure again and readers refuse)."""
    s = _many(tmp_path)
    with _rewritten(s):
        for _ in range(150):  # ~37 races; one file called damaged fails it
            assert s.damaged() == {}
            assert set(s.finished().values()) <= {"ok"}
            s.check_files()


def test_readers_read_again_when_a_run_rewrites_the_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`query`, `export` and collbench.open() read the folder whole (each launch 2 rows),
    where DuckDB's listing and reading raced the rewrite (an IO error, a traceback)."""
    import collbench

    s = _many(tmp_path)
    out = tmp_path / "m.csv"
    with _rewritten(s):
        for _ in range(15):
            assert main(["query", str(s.root), "SELECT count(*) % 2 AS odd FROM "
                         "measurements", "--format", "json"]) == 0, capsys.readouterr().err
            assert json.loads(capsys.readouterr().out) == [{"odd": 0}]
            assert main(["export", str(s.root), "-o", str(out)]) == 0, capsys.readouterr().err
            assert capsys.readouterr().out == f"wrote {out}\n"
            assert len(collbench.open(s.root).measurements()) % 2 == 0
