"""`collbench run --dry-run`: print what a run would start, start nothing.

A batch backend prints the scripts it would submit; others one command line per launch.
Nothing is written: the results folder named by -o (default results/<campaign>) only
appears in the paths.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from collbench.launch.base import KernelCall, get_backend
from collbench.launch.slurm.backend import SlurmBackend


def cmd_dry_run(args: argparse.Namespace) -> int:
    from collbench.cli import _load
    from collbench.kernel.build import build_kernel

    spec, mpi, plan = _load(args)
    backend = get_backend(args.backend or plan.backend, mpi)
    kernel = build_kernel(mpi.mpicc).path
    root = (args.output or Path("results") / plan.campaign).resolve()
    debug = tuple(args.kernel_debug.split()) if args.kernel_debug else ()
    launches = list(plan.launches)
    if isinstance(backend, SlurmBackend):
        scripts = backend.scripts(spec, launches, root, kernel, debug, str(args.spec))
        for i, text in enumerate(scripts, start=1):
            if len(scripts) > 1:
                print(f"# ===== job {i} of {len(scripts)} =====")
            sys.stdout.write(text)
        return 0
    for la in launches:
        work = root / "work" / la.launch_id
        call = KernelCall(kernel, work / "jobs.txt", work / "kernel.jsonl", debug)
        env = [f"{k}={v}" for k, v in la.env]
        print(f"# {la.launch_id}: {len(la.points)} points")
        print(shlex.join([*(["env", *env] if env else []), *backend.command(la, call)]))
    return 0
