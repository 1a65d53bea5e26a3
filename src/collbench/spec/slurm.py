"""The `[run.slurm]` table of a campaign spec: what the Slurm backend asks the scheduler for.

Problems are raised as the spec's _Problem so they read like every other spec error:
`<file>: run.slurm.<key>: <problem>; valid: ...`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from collbench.spec.fields import _Problem, reject_unknown_keys
from collbench.spec.fields import one_of as _one_of

LAUNCHERS: Final = ("srun", "mpirun")
SRUN_MPI: Final = ("auto", "pmix", "pmi2", "none")
# sbatch options collbench sets itself, and the spec key (if any) that controls each.
OWN_OPTIONS: Final[dict[str, str]] = {
    "--nodes": "run.slurm.nodes", "-N": "run.slurm.nodes",
    "--ntasks-per-node": "run.slurm.tasks_per_node", "--ntasks": "run.slurm.tasks_per_node",
    "-n": "run.slurm.tasks_per_node", "--time": "run.slurm.time_limit",
    "-t": "run.slurm.time_limit", "--partition": "run.slurm.partition",
    "-p": "run.slurm.partition", "--account": "run.slurm.account",
    "-A": "run.slurm.account", "--qos": "run.slurm.qos", "-q": "run.slurm.qos",
    "--constraint": "run.slurm.constraint", "-C": "run.slurm.constraint",
    "--exclusive": "run.slurm.exclusive", "--job-name": "run.slurm.job_name",
    "-J": "run.slurm.job_name", "--output": "", "-o": "", "--error": "", "-e": "",
    "--array": "", "-a": "", "--parsable": "", "--wrap": "",
}
_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")


def _problem(message: str, *path: str | int) -> ValueError:
    return _Problem(message, *path)


def _word(value: str) -> str:
    """A value for one sbatch option: no whitespace or control characters."""
    if not value or any(c.isspace() or not c.isprintable() for c in value):
        raise _problem(f"{value!r}: expected one word without spaces or control characters")
    return value


def parse_time_limit(text: str) -> int | None:
    """Seconds in a Slurm --time value (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]);
    None for UNLIMITED/INFINITE."""
    if text.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = _TIME.fullmatch(text)
    if not m:
        raise ValueError(text)
    days, a, b, c = m.groups()
    if days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS
        h, mi, s = int(a), int(b or 0), int(c or 0)
        return ((int(days) * 24 + h) * 60 + mi) * 60 + s
    if c is not None:  # HH:MM:SS
        return (int(a) * 60 + int(b)) * 60 + int(c)
    if b is not None:  # MM:SS
        return int(a) * 60 + int(b)
    return int(a) * 60  # minutes


def format_time_limit(seconds: int) -> str:
    """A --time value Slurm reads back as at least `seconds` (whole minutes: its resolution)."""
    minutes = max(1, -(-seconds // 60))
    days, rest = divmod(minutes, 24 * 60)
    h, m = divmod(rest, 60)
    return f"{days}-{h:02d}:{m:02d}:00" if days else f"{h}:{m:02d}:00"


def _time_limit(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # bare minutes, as sbatch --time=30
    if not isinstance(value, str):
        raise _problem(f"expected minutes or a Slurm time like \"1:30:00\", got {value!r}")
    try:
        seconds = parse_time_limit(value.strip())
    except ValueError:
        raise _problem(f"{value!r} is not a Slurm time; valid: MINUTES, MM:SS, HH:MM:SS, "
                       "D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED") from None
    if seconds == 0:
        raise _problem("must be more than 0")
    return value.strip()


def _time_schema(schema: dict[str, Any]) -> None:
    schema.pop("anyOf", None)  # absent, minutes or a Slurm time string
    schema["type"] = ["string", "integer"]
    del schema["default"]


def _sbatch_line(value: str) -> str:
    line = value.strip()
    if line.startswith("#SBATCH"):
        line = line[len("#SBATCH"):].strip()
    if not line.startswith("-") or "\n" in line or "\r" in line:
        raise _problem(f"{value!r}: expected one sbatch option such as \"--mem=4G\"")
    name = re.split(r"[=\s]", line, maxsplit=1)[0]
    if name in OWN_OPTIONS:
        key = OWN_OPTIONS[name]
        raise _problem(f"{name} is set by collbench" + (f"; use {key}" if key else ""))
    return line


Word = Annotated[str, AfterValidator(_word)]


class SlurmConfig(BaseModel):
    """Scheduler settings for backend = "slurm" (and `collbench slurm script`)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    partition: Word | None = Field(None, description="sbatch --partition.")
    account: Word | None = Field(None, description="sbatch --account.")
    qos: Word | None = Field(None, description="sbatch --qos.")
    nodes: Annotated[int, Field(ge=1)] = Field(1, description="Nodes per allocation.")
    tasks_per_node: Annotated[int, Field(ge=1)] | None = Field(
        None, description="Tasks per node; default: the largest nprocs spread over `nodes`.")
    time_limit: Annotated[str, BeforeValidator(_time_limit)] | None = Field(
        None, json_schema_extra=_time_schema,
        description="Per job (sbatch --time); default: the sum of the launches' timeouts. "
                    "Launches are packed into jobs that fit it.")
    constraint: Word | None = Field(None, description="sbatch --constraint (node features).")
    exclusive: bool = Field(False, description="sbatch --exclusive: no other jobs on the nodes.")
    job_name: Word | None = Field(None, description='Default: "collbench-<campaign>".')
    extra_sbatch: list[Annotated[str, AfterValidator(_sbatch_line)]] = Field(
        default_factory=list, description='More sbatch options, one per entry ("--mem=4G").')
    launcher: Annotated[str, _one_of(LAUNCHERS)] = Field(
        "srun", json_schema_extra={"enum": list(LAUNCHERS)},
        description="srun: direct launch (PMIx); mpirun: the MPI's own launcher inside the "
                    "allocation.")
    srun_mpi: Annotated[str, _one_of(SRUN_MPI)] = Field(
        "auto", json_schema_extra={"enum": list(SRUN_MPI)},
        description="srun --mpi plugin; auto: pmix for Open MPI, pmi2 for MPICH, checked "
                    "against `srun --mpi=list`.")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        return reject_unknown_keys(cls, data)

    def time_limit_s(self) -> int | None:
        return parse_time_limit(self.time_limit) if self.time_limit else None
