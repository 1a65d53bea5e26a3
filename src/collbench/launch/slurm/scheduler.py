"""Slurm's command-line tools as functions: sbatch, squeue/scontrol, scancel, srun.

Only the CLI, no sacct: accounting is often off (research/slurm.md), and squeue plus
`scontrol show job` know every job for MinJobAge seconds after it ends.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.errors import UserError

CALL_TIMEOUT_S: Final = 60.0
ACTIVE: Final = frozenset({
    "PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
    "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED",
    "RESV_DEL_HOLD", "POWER_UP_NODE",
})
UNKNOWN: Final = "UNKNOWN"  # no longer known to slurmctld (purged after MinJobAge)


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str  # squeue's %T: RUNNING, COMPLETED, CANCELLED, TIMEOUT, NODE_FAIL, ...
    reason: str = ""
    nodelist: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE


class SchedulerError(UserError):
    """A Slurm command failed; the message holds its command and output."""


class Scheduler:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    def _tool(self, name: str) -> str:
        found = shutil.which(name, path=self.env.get("PATH"))
        if found is None:
            raise SchedulerError(
                f"{name} not found on PATH: run on a machine with the Slurm client tools "
                "(a login node), or write a job script with `collbench slurm script`")
        return found

    def _call(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(argv, capture_output=True, text=True, env=self.env,
                                  timeout=CALL_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise SchedulerError(f"{' '.join(argv)}: no answer in {CALL_TIMEOUT_S:g} s "
                                 "(is slurmctld up?)") from None
        except OSError as e:
            raise SchedulerError(f"{argv[0]}: {e.strerror or e}") from None

    def submit(self, script: Path) -> str:
        """sbatch --parsable; the job id."""
        res = self._call([self._tool("sbatch"), "--parsable", str(script)])
        job = res.stdout.strip().split(";")[0]
        if res.returncode != 0 or not job.isdigit():
            msg = (res.stderr.strip() or res.stdout.strip()).splitlines()
            raise SchedulerError(f"sbatch {script} failed (exit {res.returncode}): "
                                 f"{' / '.join(msg[-3:]) or 'no output'}")
        return job

    def states(self, job_ids: Iterable[str]) -> dict[str, JobState]:
        """The state of each job; UNKNOWN for jobs slurmctld no longer knows."""
        ids = sorted(set(job_ids), key=int)
        if not ids:
            return {}
        res = self._call([self._tool("squeue"), "-h", "-t", "all", "-j", ",".join(ids),
                          "-o", "%i|%T|%r|%N"])
        found: dict[str, JobState] = {}
        if res.returncode == 0:
            for line in res.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 4 and parts[0] in ids:
                    found[parts[0]] = JobState(parts[0], parts[1], parts[2], parts[3])
        elif "Invalid job id" not in res.stderr:
            raise SchedulerError(f"squeue failed (exit {res.returncode}): "
                                 f"{res.stderr.strip()[-300:]}")
        for job in ids:
            if job not in found:
                found[job] = self._scontrol_state(job)
        return found

    def _scontrol_state(self, job: str) -> JobState:
        res = self._call([self._tool("scontrol"), "show", "job", "-o", job])
        fields = dict(item.split("=", 1) for item in res.stdout.split() if "=" in item)
        if res.returncode != 0 or "JobState" not in fields:
            return JobState(job, UNKNOWN, "no longer known to slurmctld")
        return JobState(job, fields["JobState"], fields.get("Reason", ""),
                        fields.get("NodeList", ""))

    def cancel(self, job_ids: Iterable[str]) -> None:
        ids = sorted(set(job_ids), key=int)
        if ids:
            res = self._call([self._tool("scancel"), *ids])
            if res.returncode != 0:
                raise SchedulerError(f"scancel {' '.join(ids)} failed: {res.stderr.strip()}")

    def mpi_plugins(self) -> list[str] | None:
        """`srun --mpi=list` plugin names; None when srun is not here."""
        srun = shutil.which("srun", path=self.env.get("PATH"))
        if srun is None:
            return None
        res = self._call([srun, "--mpi=list"])
        if res.returncode != 0:
            raise SchedulerError(f"srun --mpi=list failed (exit {res.returncode}): "
                                 f"{(res.stderr.strip().splitlines() or ['no output'])[-1]}")
        names: list[str] = []
        for line in (res.stdout + res.stderr).splitlines():
            text = line.strip()
            if re.fullmatch(r"[a-z][a-z0-9_]*", text):  # one plugin per line
                names.append(text)
            elif "available:" in text:  # "specific pmix plugin versions available: pmix_v4"
                names += text.split("available:", 1)[1].replace(",", " ").split()
        return names
