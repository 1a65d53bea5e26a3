"""`collbench ingest` cut short, for real: a SIGKILL at random moments, a full file system.
The same command then completes the folder: every file stored once, as an uninterrupted
ingest stores it, and no temporary file left."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store
from tests.ingest import OSU
from tests.test_faults import _fill, tmpfs

__all__ = ["tmpfs"]  # the fixture, shared with tests/test_faults.py

FILES = [str(OSU / f"osu_{name}_np2.txt") for name in ("bcast", "gather", "scatter",
                                                        "allreduce", "latency", "bw")]
ARGS = ["--nprocs", "2", "--campaign", "c"]  # one campaign name: the same launch ids


def _rows(out: Path) -> list[tuple[object, ...]]:
    con = Store(out).connect()
    try:
        return con.execute("SELECT launch_id, collective, size_bytes, avg_us, status "
                           "FROM measurements ORDER BY ALL").fetchall()
    finally:
        con.close()


def _leftovers(out: Path) -> list[str]:
    return [str(p.relative_to(out)) for p in out.rglob("*") if ".tmp" in p.name]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[object, ...]]:
    out = tmp_path_factory.mktemp("ingest-ref") / "ref"
    assert main(["ingest", *FILES, *ARGS, "-o", str(out)]) == 0
    return _rows(out)


@pytest.mark.slow
def test_a_killed_ingest_is_completed_by_the_same_command(
        tmp_path: Path, reference: list[tuple[object, ...]]) -> None:
    cut_creation = 0
    for seed in range(6):
        out = tmp_path / f"res{seed}"
        proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "ingest", *FILES,
                                 *ARGS, "-o", str(out)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        while not out.exists() and proc.poll() is None:
            pass  # the folder appears: the creation begins
        time.sleep(0 if seed == 0 else random.Random(seed).uniform(0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        cut_creation += not Store(out).exists()
        assert main(["ingest", *FILES, *ARGS, "-o", str(out)]) == 0, f"seed {seed}"
        assert _rows(out) == reference, f"seed {seed}"
        assert _leftovers(out) == [], f"seed {seed}"
    assert cut_creation, "no kill landed inside the folder's creation"


def test_a_full_disk_is_one_line_and_the_same_command_completes(
        tmpfs: Path, reference: list[tuple[object, ...]],
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmpfs / "res"
    filler = _fill(tmpfs)
    capsys.readouterr()
    assert main(["ingest", *FILES, *ARGS, "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"collbench: error: {out}: cannot write: No space left on device"
    filler.unlink()
    assert main(["ingest", *FILES, *ARGS, "-o", str(out)]) == 0
    assert _rows(out) == reference and _leftovers(out) == []
