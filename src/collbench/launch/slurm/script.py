"""The sbatch script of one job: #SBATCH lines, then one marker-writing call per launch.

Every value is quoted with shlex.quote (sbatch honours shell quoting in #SBATCH lines
too). The script needs nothing but bash and coreutils on the compute node: it does not
run Python, so it also works where collbench is not installed beside the MPI.
"""

from __future__ import annotations

import re
import shlex
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from collbench.errors import UserError
from collbench.launch.slurm.commands import Shape
from collbench.spec.slurm import SlurmConfig, format_time_limit
from collbench.version import __version__

KILL_AFTER_S: Final = 10  # timeout's grace between TERM and KILL
STEP_MARGIN_S: Final = 5  # per launch: markers, srun/mpirun start beyond the kernel
JOB_MARGIN_S: Final = 60  # per job: prolog, queue-to-start, epilog

# Set while `collbench slurm script` writes a script to submit later or elsewhere: no
# controller is needed then, so where srun cannot say its MPI plugins (slurmctld down, no
# slurm.conf here) the backend takes the MPI's usual one and leaves a note in this list.
SCRIPT_ONLY: Final[ContextVar[list[str] | None]] = ContextVar("collbench_slurm_script_only",
                                                              default=None)

# One launch: skip it if an earlier job finished it, else record where and when it
# starts, run it under the per-launch timeout, and publish its exit status atomically.
# The launch gets a TMPDIR of its own, removed when it ends or the job is cancelled (the
# trap): a killed mpirun leaves its pid-named session directory there, not where a later
# mpirun with the same pid would trip on it (launch/local.py says more).
_FUNCTION: Final = """\
collbench_drop_scratch() {
    if [ -n "${collbench_scratch:-}" ]; then rm -rf "$collbench_scratch"; fi
    collbench_scratch=""
}

collbench_launch() {  # WORK_DIR TIMEOUT_S COMMAND...
    local dir="$1" limit="$2" rc start
    shift 2
    if [ -e "$dir/done" ] || [ -e "$dir/done.stored" ]; then return 0; fi
    rm -rf "$dir/hosts" "$dir/kernel.jsonl" "$dir/done.tmp"
    mkdir -p "$dir/hosts" || return 0
    start="$(date +%s.%N)"
    printf 'job=%s\\nnodelist=%s\\nstart=%s\\n' "${SLURM_JOB_ID:-}" \\
        "${SLURM_JOB_NODELIST:-}" "$start" >"$dir/started"
    collbench_scratch="${TMPDIR:-/tmp}/collbench-launch-${SLURM_JOB_ID:-0}-$$-$RANDOM"
    mkdir -m 700 "$collbench_scratch" 2>/dev/null || collbench_scratch=""
    TMPDIR="${collbench_scratch:-${TMPDIR:-/tmp}}" timeout --kill-after=KILL_AFTER "$limit" "$@" \\
        >"$dir/stdout.txt" 2>"$dir/stderr.txt" </dev/null
    rc=$?
    collbench_drop_scratch
    printf 'rc=%s\\nstart=%s\\nend=%s\\njob=%s\\n' "$rc" "$start" "$(date +%s.%N)" \\
        "${SLURM_JOB_ID:-}" >"$dir/done.tmp" && mv -f "$dir/done.tmp" "$dir/done"
}
""".replace("KILL_AFTER", str(KILL_AFTER_S))


@dataclass(frozen=True)
class JobLaunch:
    launch_id: str
    work: Path
    timeout_s: float
    argv: list[str]
    env: dict[str, str]

    def seconds_needed(self) -> int:
        return int(self.timeout_s + 0.999) + KILL_AFTER_S + STEP_MARGIN_S


def job_seconds(launches: list[JobLaunch]) -> int:
    return JOB_MARGIN_S + sum(jl.seconds_needed() for jl in launches)


def sbatch_options(cfg: SlurmConfig, name: str, shape: Shape, time_s: int | None,
                   output: Path) -> list[str]:
    """Options in #SBATCH order; `time_s` None: the spec's own time_limit string."""
    opts = [f"--job-name={name}", f"--nodes={shape.nodes}",
            f"--ntasks-per-node={shape.tasks_per_node}",
            f"--time={cfg.time_limit if time_s is None else format_time_limit(time_s)}",
            f"--output={output}"]
    for key, value in (("partition", cfg.partition), ("account", cfg.account),
                       ("qos", cfg.qos), ("constraint", cfg.constraint)):
        if value:
            opts.append(f"--{key}={value}")
    if cfg.exclusive:
        opts.append("--exclusive")
    return opts + list(cfg.extra_sbatch)


_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def script_safe(value: str, what: str) -> str:
    """`value`, refused when it holds a control character: a newline would end an #SBATCH
    comment line (or a command line) and run the rest as a command of its own."""
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise UserError(f"{what} {value!r} contains the control character {bad!r}; nothing "
                        "that can end a line may go into a batch script: rename it")
    return value


def render(options: list[str], launches: list[JobLaunch], job_env: dict[str, str],
           summary: str) -> str:
    for opt in options:
        script_safe(opt, "sbatch option")
    script_safe(summary, "job summary")
    for key, value in [*job_env.items(), *(kv for jl in launches for kv in jl.env.items())]:
        if not _ENV_NAME.fullmatch(key):
            raise UserError(f"environment variable name {key!r} is not valid in a batch "
                            "script; valid: letters, digits and '_', not starting with a digit")
        script_safe(value, f"environment variable {key}")
    for jl in launches:
        script_safe(str(jl.work), "results folder path")
        for arg in jl.argv:
            script_safe(arg, "command-line argument")
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {shlex.quote(opt)}" for opt in options]
    lines += [
        f"# collbench {__version__}: {summary}",
        "# Each launch leaves marker files in its work directory: started, done (exit",
        "# status), kernel.jsonl, stdout.txt, stderr.txt, hosts/ (the node of each rank).",
        "# `collbench run SPEC -o RESULTS --resume` collects them; done launches are skipped.",
        "set -u",
        "# Killed by Slurm (scancel, time limit, preemption): leave no done marker, so that",
        "# `collbench run --resume` runs the launch again.",
        "trap 'collbench_drop_scratch; exit 143' TERM INT",
    ]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(job_env.items())]
    lines += ["", _FUNCTION]
    for jl in launches:
        env = [f"{k}={v}" for k, v in sorted(jl.env.items())]
        cmd = [str(jl.work), f"{jl.timeout_s:g}", *(["env", *env] if env else []), *jl.argv]
        lines.append(f"collbench_launch {shlex.join(cmd)}")
    return "\n".join(lines) + "\n"
