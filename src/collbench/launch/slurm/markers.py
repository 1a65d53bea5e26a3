"""Marker files a job writes into each launch's work directory, read back as an outcome.

    started        job=<id> nodelist=<allocation> start=<epoch>  (the launch began)
    done           rc=<exit status> start= end= job=             (it ended; written last)
    hosts/<rank>.<pid>  the node one rank ran on
    kernel.jsonl, stdout.txt, stderr.txt

A launch without `done` whose job is gone was killed by Slurm: it is run again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.launch.base import LaunchOutcome, Status
from collbench.launch.process import tail
from collbench.launch.slurm.commands import HOSTS_DIR

DONE: Final = "done"
STORED: Final = "done.stored"  # done, and its rows are in the store
STARTED: Final = "started"
TIMED_OUT: Final = 124  # timeout(1): the command ran out of time
KILLED: Final = 137  # timeout(1) had to KILL it after the grace period (or a crash did)


def read_fields(path: Path) -> dict[str, str] | None:
    """key=value lines; None when the file is not there (yet)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def rank_hosts(work: Path) -> list[str]:
    """The node of every rank that started, in rank order where ranks are known."""
    def order(p: Path) -> tuple[int, str]:
        rank = p.name.split(".")[0]
        return (int(rank) if rank.isdigit() else 1 << 30, p.name)

    hosts = []
    for p in sorted((work / HOSTS_DIR).glob("*"), key=order):
        try:
            hosts.append(p.read_text().strip())
        except OSError:
            continue
    return [h for h in hosts if h]


@dataclass(frozen=True)
class Finished:
    outcome: LaunchOutcome
    job_id: str
    allocation: str  # the job's node list, as Slurm wrote it
    rank_hosts: list[str]

    @property
    def nodes(self) -> int:
        return len(set(self.rank_hosts))

    def ranks_per_node(self) -> dict[str, int]:
        return dict(sorted(Counter(self.rank_hosts).items()))


def _status(rc: int, wall_s: float, timeout_s: float) -> Status:
    if rc == 0:
        return "ok"
    if rc == TIMED_OUT or (rc == KILLED and wall_s >= timeout_s):
        return "timeout"
    return "failed"


def finished(work: Path, command: list[str], timeout_s: float) -> Finished | None:
    """The launch's outcome from its markers; None while it has no done marker."""
    done = read_fields(work / DONE)
    if done is None:
        return None
    started = read_fields(work / STARTED) or {}
    try:
        rc = int(done.get("rc", ""))
    except ValueError:
        rc = -1
    try:
        wall = float(done["end"]) - float(done["start"])
    except (KeyError, ValueError):
        wall = 0.0
    hosts = rank_hosts(work)
    outcome = LaunchOutcome(_status(rc, wall, timeout_s), command, rc, wall,
                            tail(work / "stderr.txt"), sorted(set(hosts)))
    return Finished(outcome, done.get("job", ""), started.get("nodelist", ""), hosts)
