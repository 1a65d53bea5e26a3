"""The start-up watchdog: a launch that hangs before its first point is stopped long before
its timeout, recorded with the reason, and the campaign goes on."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from collbench.catalog.mpi import find_mpi
from collbench.launch.process import STARTUP_MARK, startup_deadline
from collbench.tune import campaign

TIMEOUT_S = 100.0  # the start-up deadline is a tenth of it: 10 s
SLEEP = "999.125"  # the hung rank's command line: sleep 999.125 (found afterwards)


def test_deadline_is_a_tenth_of_the_timeout_within_bounds() -> None:
    assert startup_deadline(600) == 60 and startup_deadline(3600) == 60
    assert startup_deadline(200) == 20 and startup_deadline(30) == 10
    assert startup_deadline(5) == 5  # never past the timeout itself


@pytest.mark.slow
def test_a_launch_hanging_in_mpi_init_is_stopped_and_the_campaign_goes_on(
        tmp_path: Path) -> None:
    """Rank 1 of the first launch never calls MPI_Init (it sleeps in its place), so rank 0
    waits in MPI_Init's exchange for ever: a real hang before the first point. mkdir
    succeeds once, so only the first launch's rank 1 sleeps; the second launch runs."""
    marker = tmp_path / "hung-once"
    script = (f'if [ "$OMPI_COMM_WORLD_RANK" = 1 ] && mkdir {marker} 2>/dev/null; then '
              f'exec sleep {SLEEP}; fi; exec "$@"')
    points = [campaign.point("bcast", "default", 0, 8, 20, 2)]
    launches = [campaign.launch(2, points, (), "none", rep, TIMEOUT_S) for rep in (0, 1)]
    start = time.monotonic()
    store, summary = campaign.run(
        tmp_path / "res", "hang", 0, launches, find_mpi(),
        campaign.spec_text("start-up watchdog test", "hang", launches, 0), "test",
        wrapper=("sh", "-c", script, "sh"))
    took = time.monotonic() - start
    assert marker.is_dir()  # the hang really happened
    assert summary.by_status == {"failed": 1, "ok": 1}
    assert took < TIMEOUT_S / 2, took  # stopped at the start-up deadline, not the timeout
    rows = [json.loads(line) for f in store.launch_files()
            for line in f.read_text().splitlines()]
    hung = [r for r in rows if r["repetition"] == 0]
    assert [r["status"] for r in hung] == ["failed"]
    assert STARTUP_MARK in hung[0]["error"] and "MPI_Init" in hung[0]["error"]
    assert [r["status"] for r in rows if r["repetition"] == 1] == ["ok"]
    assert not _sleeping(), "the hung rank outlived its launch"


def _sleeping() -> list[Path]:
    mark = f"sleep\0{SLEEP}".encode()
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes().startswith(mark):
                found.append(cmdline)
        except OSError:
            continue
    return found
