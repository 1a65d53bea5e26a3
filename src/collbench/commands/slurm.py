"""`collbench slurm script SPEC [-o RESULTS]`: one sbatch script for users who submit it.

The results folder is opened like any campaign (created, or resumed with the same spec and
MPI) and each launch's job file is prepared, so that once the job ran, `collbench run SPEC
-o RESULTS --resume` collects its marker files and submits only what is missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.commands import options
from collbench.errors import UserError
from collbench.launch.slurm import markers
from collbench.launch.slurm.backend import SlurmBackend, prepare_work
from collbench.launch.slurm.script import SCRIPT_ONLY


def add_parser(sub: options.Subparsers) -> None:
    s = sub.add_parser("slurm", help="Slurm: write a campaign's batch script")
    ssub = s.add_subparsers(dest="slurm_command", required=True)
    t = ssub.add_parser("script", help="print one sbatch script that runs the campaign "
                                       "(prepares the results folder it writes into)")
    t.add_argument("spec", type=Path, help="campaign spec (TOML)")
    options.add_output(t, "results folder the job writes into (default: results/<campaign>)")
    options.add_kernel_debug(t)
    options.add_mpi(t)
    t.set_defaults(func=cmd_script)


def cmd_script(args: argparse.Namespace) -> int:
    notes: list[str] = []
    token = SCRIPT_ONLY.set(notes)  # a script to submit later needs no live controller
    try:
        return _script(args, notes)
    finally:
        SCRIPT_ONLY.reset(token)


def _script(args: argparse.Namespace, notes: list[str]) -> int:
    source = SpecSource.from_file(args.spec)
    out: Path = args.output or Path("results") / source.spec.campaign.name
    camp = open_campaign(source, options.mpi(args), Request(out, resume=True, backend="slurm"),
                         kind=SlurmBackend)
    backend = camp.backend
    live = backend.live_jobs()
    if live:
        raise UserError(f"{out}: Slurm job(s) {', '.join(live)} still run launches of this "
                        "campaign; wait for them (collbench run --resume follows them)")
    todo = [la for la in camp.todo()
            if not (camp.store.work_dir(la.launch_id) / markers.DONE).exists()]
    if not todo:
        raise UserError(f"{out}: every launch already ran; collect them with `collbench run "
                        f"{args.spec} -o {out} --resume`")
    text = backend.scripts(todo, camp.kernel.path, options.debug(args), one_job=True)[0]
    for la in todo:
        prepare_work(camp.store, la)
    backend.ledger.dir.mkdir(exist_ok=True)  # the job's output goes there: sbatch fails without
    sys.stdout.write(text)
    for note in notes:
        print(f"collbench: note: {note}", file=sys.stderr)
    print(f"{out}: prepared {len(todo)} launches; submit the script with sbatch, then collect "
          f"with: collbench run {args.spec} -o {out} --resume", file=sys.stderr)
    return 0
