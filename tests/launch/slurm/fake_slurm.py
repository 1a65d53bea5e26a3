"""A tiny fake Slurm CLI for fast tests: sbatch, squeue, scontrol, scancel and srun.

sbatch records the script and prints a job id, running nothing; tests set job states
and write marker files themselves. State lives in the JSON file $FAKE_SLURM_STATE:
{"next": 100, "jobs": {id: {"state", "script", "args"}}, "calls": [[tool, args...]]}.
`srun --mpi=list` prints $FAKE_SRUN_MPI (default: pmix and pmi2); any other srun
strips its options and runs the command once, as rank 0 of $FAKE_NP processes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def load() -> dict[str, Any]:
    path = Path(os.environ["FAKE_SLURM_STATE"])
    if not path.exists():
        return {"next": 100, "jobs": {}, "calls": []}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def save(state: dict[str, Any]) -> None:
    Path(os.environ["FAKE_SLURM_STATE"]).write_text(json.dumps(state))


def srun(args: list[str]) -> int:
    if args == ["--mpi=list"]:
        plugins = os.environ.get("FAKE_SRUN_MPI", "pmix none pmi2").split()
        print("MPI plugin types are...\n" + "".join(f"\t{p}\n" for p in plugins), end="")
        return 0
    np = "1"
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt in ("-n", "-N"):
            value = args.pop(0)
            np = value if opt == "-n" else np
    os.environ.update(PMIX_RANK="0", FAKE_NP=np)
    os.execvp(args[0], args)
    return 1  # not reached


def main(tool: str, args: list[str]) -> int:
    if tool == "srun":
        return srun(args)
    state = load()
    state["calls"].append([tool, *args])
    jobs: dict[str, dict[str, Any]] = state["jobs"]
    code = 0
    if tool == "sbatch":
        job = str(state["next"])
        state["next"] += 1
        jobs[job] = {"state": "PENDING", "script": args[-1], "args": args[:-1]}
        print(job)
    elif tool == "squeue":
        ids = args[args.index("-j") + 1].split(",")
        known = [j for j in ids if j in jobs]
        if not known:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            code = 1
        for j in known:
            print(f"{j}|{jobs[j]['state']}|None|n[1-2]")
    elif tool == "scontrol":
        job = args[-1]
        if job not in jobs:
            print("slurm_load_jobs error: Invalid job id specified", file=sys.stderr)
            code = 1
        else:
            print(f"JobId={job} JobState={jobs[job]['state']} Reason=None NodeList=n[1-2]")
    elif tool == "scancel":
        for j in args:
            if j in jobs:
                jobs[j]["state"] = "CANCELLED"
    save(state)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2:]))
