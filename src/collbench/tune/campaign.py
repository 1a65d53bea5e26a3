"""Launches built in code (not from a spec) run through the normal runner into a results folder.

`tune validate` and the timing fallback of `rules verify` measure arms that differ only
in MCA settings; they go through plan.Launch, runner.run_campaign and store.Store like any
campaign, so `collbench compare/show/report` work on their folders.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from collbench import provenance
from collbench.catalog.collectives import osu_defaults
from collbench.catalog.mpi import MpiInstall
from collbench.errors import UserError
from collbench.kernel.build import build_kernel
from collbench.launch.base import get_backend
from collbench.plan import Launch, Plan, Point
from collbench.runner import RowContext, Summary, run_campaign
from collbench.store import Store


def point(collective: str, algorithm: str, algorithm_id: int | None, size: int,
          iterations: int = 0, warmup: int = 0, segsize: int = 0, fanout: int = 0) -> Point:
    """A kernel point; iterations/warmup 0 = OSU's defaults for that size."""
    it, wu = osu_defaults(collective, size)
    return Point(collective, algorithm, algorithm_id, segsize, fanout, size,
                 iterations or it, warmup or wu)


def launch(nprocs: int, points: Sequence[Point], mca: Sequence[tuple[str, str]],
           selection: str, repetition: int, timeout_s: float,
           env: Sequence[tuple[str, str]] = ()) -> Launch:
    cores = os.cpu_count() or 1
    return Launch(launch_id="", repetition=repetition, nprocs=nprocs, mapping="core",
                  binding="core", oversubscribe=nprocs > cores,
                  mca=tuple(sorted(mca)), env=tuple(sorted(env)), swept=(),
                  selection=selection, points=tuple(points), timeout_s=timeout_s,
                  validate=False, samples=False)


def with_ids(launches: Sequence[Launch]) -> tuple[Launch, ...]:
    """Ids as collbench.plan gives them: run-order index and a hash of the content."""
    out = []
    for i, la in enumerate(launches):
        content = {k: v for k, v in la.to_json().items() if k != "launch_id"}
        digest = hashlib.sha256(json.dumps(content, sort_keys=True,
                                           separators=(",", ":")).encode()).hexdigest()
        out.append(replace(la, launch_id=f"{i:04d}-{digest[:8]}"))
    return tuple(out)


def run(out: Path, name: str, seed: int, launches: Sequence[Launch], mpi: MpiInstall,
        spec_text: str, source: str) -> tuple[Store, Summary]:
    """Create (or resume, if it holds exactly this plan) the folder and run what is missing."""
    plan = Plan(name, seed, "local", with_ids(launches))
    store = Store(out)
    if store.exists() and store.plan() != json.loads(json.dumps(plan.to_json())):
        raise UserError(f"{out}: holds another campaign (different rules file, sizes or "
                        "settings); remove it or choose another -o folder")
    kernel = build_kernel(mpi.mpicc)
    if not store.exists():
        prov = provenance.collect(mpi, {"path": str(kernel.path),
                                        "fingerprint": kernel.fingerprint,
                                        "compile_command": kernel.compile_command})
        store.create({"name": name, "seed": seed, "backend": "local", "spec_source": source},
                     spec_text, plan.to_json(), prov)
    backend = get_backend("local", mpi)
    ctx = RowContext(name, "local", mpi.implementation, mpi.version)
    summary = run_campaign(store, plan, backend, kernel.path, ctx, progress_stream=sys.stderr)
    if summary.interrupted:
        raise KeyboardInterrupt
    return store, summary
