"""The jobs collbench submitted for a campaign, kept in the results folder.

`<results>/slurm/jobs.json` says which job runs which launches and how each job ended;
`--resume` reads it to follow jobs still queued or running instead of submitting their
launches twice, and Ctrl-C cancels exactly the live jobs listed there. Scripts and job
output (`job-<n>.sh`, `job-<id>.out`) sit beside it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from collbench.errors import UserError
from collbench.storefiles import atomic_write


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class JobRecord:
    job_id: str
    script: str  # file name in the ledger's directory
    launches: list[str]
    submitted: str
    state: str = "PENDING"
    reason: str = ""
    nodelist: str = ""
    ended: str | None = None  # when collbench saw it end
    by_collbench: bool = True  # False: a job the user submitted (followed, never cancelled)
    cancelled_by_collbench: bool = False
    lost: list[str] = field(default_factory=list)  # launches it ended without finishing

    @property
    def final(self) -> bool:
        return self.ended is not None


class Ledger:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.path = directory / "jobs.json"
        self.jobs: dict[str, JobRecord] = {}
        if self.path.exists():
            try:
                data: dict[str, Any] = json.loads(self.path.read_text())
                records = [JobRecord(**raw) for raw in data.get("jobs", [])]
            except (OSError, ValueError, TypeError, AttributeError) as e:
                raise UserError(f"{self.path}: unreadable job record ({e}); it lists the "
                                "Slurm jobs of this campaign: fix or remove it") from None
            self.jobs = {rec.job_id: rec for rec in records}

    def next_script(self) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        n = 1 + sum(1 for _ in self.dir.glob("job-*.sh"))
        while (self.dir / f"job-{n:04d}.sh").exists():
            n += 1
        return self.dir / f"job-{n:04d}.sh"

    def add(self, rec: JobRecord) -> None:
        self.jobs[rec.job_id] = rec
        self.save()

    def job_of(self, launch_id: str) -> JobRecord | None:
        """The latest job that was given this launch."""
        found = [r for r in self.jobs.values() if launch_id in r.launches]
        return max(found, key=lambda r: int(r.job_id)) if found else None

    def save(self) -> None:
        body = {"jobs": [asdict(r) for r in sorted(self.jobs.values(),
                                                   key=lambda r: int(r.job_id))]}
        atomic_write(self.path, (json.dumps(body, indent=1) + "\n").encode())
