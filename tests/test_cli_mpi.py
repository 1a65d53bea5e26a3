"""End to end with real Open MPI: `collbench run/show` at 2 and 4 ranks, failures, resume."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store

pytestmark = pytest.mark.mpi

SPEC = """\
[campaign]
name = "mpi-e2e"

[measure]
collectives = {collectives}
sizes = [1, 1024, 65536]
nprocs = {nprocs}
iterations = 20
warmup = 2
validate = {validate}

[measure.algorithms]
bcast = ["default", "binomial", "pipeline"]
allgatherv = ["default", "ring"]

[run]
repetitions = {reps}
timeout = {timeout}
seed = 11
"""


@pytest.fixture(autouse=True)
def _yield_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    # Functional tests only: oversubscribed busy-polling ranks would crawl (DESIGN.md).
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")


def spec(tmp_path: Path, collectives: str = '["bcast", "allgatherv"]', nprocs: str = "[2, 4]",
         validate: str = "true", reps: int = 1, timeout: float = 120) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC.format(collectives=collectives, nprocs=nprocs, validate=validate,
                             reps=reps, timeout=timeout))
    return p


def test_run_and_show_at_2_and_4_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "res"
    assert main(["run", str(spec(tmp_path)), "-o", str(out)]) == 0
    con = Store(out).connect()
    rows = con.execute("SELECT nprocs, collective, algorithm, selection, status, validated, "
                       "avg_us, min_us, max_us FROM measurements").fetchall()
    assert len(rows) == 2 * (3 + 2) * 3
    assert all(r[4] == "ok" and r[5] for r in rows)
    assert all(0 < r[7] <= r[6] <= r[8] for r in rows)
    modes = {(r[1], r[3]) for r in rows}
    # bcast is switched inside one launch; allgatherv's cvar is read-only -> one launch each
    assert ("bcast", "mpit") in modes and ("allgatherv", "launch") in modes
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["mpi"]["implementation"] == "openmpi" and prov["cores"] >= 1
    assert "yield_when_idle" in " ".join(prov["warnings"])
    assert "mca:" in (out / "ompi_info.txt").read_text()
    metas = [json.loads(p.read_text()) for p in (out / "launches").glob("*.meta.json")]
    assert all("--map-by" in m["command"] for m in metas)
    capsys.readouterr()
    assert main(["show", str(out), "--collective", "bcast"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"# bcast\s+np=4", text) and "pipeline" in text and "avg_us" in text


def test_unknown_algorithm_rejected_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = spec(tmp_path)
    p.write_text(p.read_text().replace('"pipeline"', "42"))
    out = tmp_path / "res"
    assert main(["run", str(p), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "measure.algorithms.bcast" in err and "42" in err and "valid:" in err
    assert "Traceback" not in err and not out.exists()


def _kernel_alive(results: Path) -> bool:
    # Only this campaign's kernels: their job files live under the results folder.
    out = subprocess.run(["pgrep", "-f", str(results)], capture_output=True, text=True)
    return bool(out.stdout.strip())


def test_hung_launch_is_killed_by_its_timeout(tmp_path: Path) -> None:
    out = tmp_path / "res"
    p = spec(tmp_path, collectives='["bcast"]', nprocs="[2]", timeout=8)
    start = time.monotonic()
    code = main(["run", str(p), "-o", str(out), "--kernel-debug", "--debug hang --debug-at 1"])
    assert code == 1 and time.monotonic() - start < 60
    statuses = Store(out).connect().execute(
        "SELECT status, count(*) FROM measurements GROUP BY 1 ORDER BY 1").fetchall()
    assert statuses == [("ok", 1), ("timeout", 8)]
    time.sleep(1)
    assert not _kernel_alive(out)


def test_crashing_launch_is_recorded_failed(tmp_path: Path) -> None:
    out = tmp_path / "res"
    p = spec(tmp_path, collectives='["bcast"]', nprocs="[2]")
    debug = "--debug crash --debug-at 2"
    assert main(["run", str(p), "-o", str(out), "--kernel-debug", debug]) == 1
    rows = Store(out).connect().execute(
        "SELECT status, error FROM measurements ORDER BY status").fetchall()
    assert [r[0] for r in rows].count("ok") == 2
    failed = [r for r in rows if r[0] == "failed"]
    assert len(failed) == 7 and all("exited with status" in r[1] for r in failed)


def test_validation_catches_a_corrupted_result(tmp_path: Path) -> None:
    out = tmp_path / "res"
    p = spec(tmp_path, collectives='["bcast"]', nprocs="[4]")
    main(["run", str(p), "-o", str(out), "--kernel-debug", "--debug corrupt --debug-at 0"])
    rows = Store(out).connect().execute(
        "SELECT status, avg_us, error FROM measurements WHERE status <> 'ok'").fetchall()
    assert len(rows) == 1 and rows[0][0] == "invalid" and rows[0][1] is None and rows[0][2]


def _naming(text: str) -> list[str]:
    """Live processes whose command line mentions text."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            stat = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat[0] != "Z" and text in line:
            found.append(line)
    return found


def test_sigkill_mid_campaign_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "res"
    p = spec(tmp_path, collectives='["bcast"]', nprocs="[2]", validate="false", reps=4)
    temp = tmp_path / "tmp"
    temp.mkdir()
    cmd = [sys.executable, "-m", "collbench.cli", "run", str(p), "-o", str(out)]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=str(temp)))
    deadline = time.monotonic() + 120
    while not list((out / "launches").glob("*.jsonl")):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # often while the next launch is starting
    proc.wait()
    # the watchdog ends whatever launch was under way, however far its start had gone
    deadline = time.monotonic() + 20
    while (_naming(str(out)) or list(temp.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _naming(str(out)) == [] and list(temp.iterdir()) == []
    stored = {q.name: q.read_bytes() for q in (out / "launches").glob("*.jsonl")}
    assert 1 <= len(stored) < 4
    assert main(["run", str(p), "-o", str(out), "--resume"]) == 0
    after = {q.name: q.read_bytes() for q in (out / "launches").glob("*.jsonl")}
    assert len(after) == 4 and all(after[k] == v for k, v in stored.items())
    n = Store(out).connect().execute(
        "SELECT count(*), count(DISTINCT (launch_id, algorithm, size_bytes)) FROM measurements"
    ).fetchone()
    assert n == (4 * 9, 4 * 9)
