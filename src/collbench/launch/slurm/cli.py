"""`collbench slurm script SPEC [-o RESULTS]`: one sbatch script for users who submit it.

The results folder is prepared (spec, plan, provenance, each launch's job file) so that,
once the job ran, `collbench run SPEC -o RESULTS --resume` collects its marker files and
submits only what is missing.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from collbench.errors import UserError


def add_parser(sub: Any) -> None:
    from collbench.cli import _mpi_args

    s = sub.add_parser("slurm", help="Slurm: write a campaign's batch script")
    ssub = s.add_subparsers(dest="slurm_command", required=True)
    t = ssub.add_parser("script", help="print one sbatch script that runs the campaign "
                                       "(prepares the results folder it writes into)")
    t.add_argument("spec", type=Path)
    t.add_argument("-o", "--output", type=Path,
                   help="results folder the job writes into (default: results/<campaign>)")
    t.add_argument("--kernel-debug", help=argparse.SUPPRESS)
    _mpi_args(t)
    t.set_defaults(func=cmd_script, backend="slurm")


def cmd_script(args: argparse.Namespace) -> int:
    from collbench import provenance
    from collbench.cli import _load, _same_mpi
    from collbench.kernel.build import build_kernel
    from collbench.launch.slurm import markers
    from collbench.launch.slurm.backend import SlurmBackend, prepare_work
    from collbench.launch.slurm.ledger import Ledger
    from collbench.plan import Plan
    from collbench.spec import parse_spec
    from collbench.store import Store

    spec, mpi, plan = _load(args)
    out: Path = args.output or Path("results") / plan.campaign
    store = Store(out)
    kernel = build_kernel(mpi.mpicc)
    backend = SlurmBackend(mpi)
    if store.exists():
        stored = parse_spec(store.spec_text(), str(out / "spec.toml"))
        if stored.model_dump(mode="json") != spec.model_dump(mode="json"):
            raise UserError(f"{args.spec}: differs from the spec stored in {out}; use another "
                            "-o folder for a new campaign")
        _same_mpi(store, mpi, out)
        plan = Plan.from_json(store.plan())
        live = [j for j, st in backend.scheduler.states(
            [r.job_id for r in Ledger(out / "slurm").jobs.values() if not r.final]).items()
            if st.active]
        if live:
            raise UserError(f"{out}: Slurm job(s) {', '.join(live)} still run launches of this "
                            "campaign; wait for them (collbench run --resume follows them)")
    else:
        plan = replace(plan, backend="slurm")
        prov = provenance.collect(mpi, {"path": str(kernel.path),
                                        "fingerprint": kernel.fingerprint,
                                        "compile_command": kernel.compile_command})
        store.create({"name": plan.campaign, "seed": plan.seed, "backend": "slurm",
                      "spec_source": str(args.spec)}, args.spec.read_text(), plan.to_json(),
                     prov)
    stored_ids = store.finished()
    todo = [la for la in plan.launches if la.launch_id not in stored_ids
            and not (store.work_dir(la.launch_id) / markers.DONE).exists()]
    if not todo:
        raise UserError(f"{out}: every launch already ran; collect them with `collbench run "
                        f"{args.spec} -o {out} --resume`")
    debug = tuple(args.kernel_debug.split()) if args.kernel_debug else ()
    text = backend.scripts(spec, todo, out, kernel.path, debug, str(args.spec), one_job=True)[0]
    for la in todo:
        prepare_work(store, la)
    (out / "slurm").mkdir(exist_ok=True)  # the job's output goes there: sbatch fails without
    sys.stdout.write(text)
    print(f"{out}: prepared {len(todo)} launches; submit the script with sbatch, then collect "
          f"with: collbench run {args.spec} -o {out} --resume", file=sys.stderr)
    return 0
