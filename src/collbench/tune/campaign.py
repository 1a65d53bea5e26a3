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
from dataclasses import dataclass, replace
from pathlib import Path

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog.collectives import osu_defaults
from collbench.catalog.mpi import MpiInstall
from collbench.plan import Launch, Plan, Point
from collbench.runner import Summary
from collbench.store import Store


@dataclass(frozen=True)
class Hosts:
    """Where `rules verify` and `tune validate` run when not on this machine: a host list
    (the `hosts` backend, docs/hosts.md) and the ranks per node, so that a rules file is
    proven where it is used, e.g. on two nodes, where Open MPI 5.0's coll/han serves."""

    hostfile: Path
    ssh_config: Path | None = None
    ppn: int | None = None

    def run_table(self) -> str:
        """The spec's [run] backend and [run.hosts] table (paths as TOML strings)."""
        lines = ['backend = "hosts"', "", "[run.hosts]",
                 f"hostfile = {json.dumps(str(self.hostfile.resolve()))}"]
        if self.ssh_config is not None:
            lines.append(f"ssh_config = {json.dumps(str(self.ssh_config.resolve()))}")
        return "\n".join(lines) + "\n"

    def measure_line(self) -> str:
        return f"ppn = [{self.ppn}]\n" if self.ppn else ""


def point(collective: str, algorithm: str, algorithm_id: int | None, size: int,
          iterations: int = 0, warmup: int = 0, segsize: int = 0, fanout: int = 0) -> Point:
    """A kernel point; iterations/warmup 0 = OSU's defaults for that size."""
    it, wu = osu_defaults(collective, size)
    return Point(collective, algorithm, algorithm_id, segsize, fanout, size,
                 iterations or it, warmup or wu)


def launch(nprocs: int, points: Sequence[Point], mca: Sequence[tuple[str, str]],
           selection: str, repetition: int, timeout_s: float,
           env: Sequence[tuple[str, str]] = (), hosts: Hosts | None = None) -> Launch:
    cores = os.cpu_count() or 1
    return Launch(launch_id="", repetition=repetition, nprocs=nprocs, mapping="core",
                  binding="core", oversubscribe=nprocs > cores and hosts is None,
                  mca=tuple(sorted(mca)), env=tuple(sorted(env)), swept=(),
                  selection=selection, points=tuple(points), timeout_s=timeout_s,
                  validate=False, samples=False, ppn=hosts.ppn if hosts else None)


def with_ids(launches: Sequence[Launch]) -> tuple[Launch, ...]:
    """Ids as collbench.plan gives them: run-order index and a hash of the content."""
    out = []
    for i, la in enumerate(launches):
        content = {k: v for k, v in la.to_json().items() if k != "launch_id"}
        digest = hashlib.sha256(json.dumps(content, sort_keys=True,
                                           separators=(",", ":")).encode()).hexdigest()
        out.append(replace(la, launch_id=f"{i:04d}-{digest[:8]}"))
    return tuple(out)


def spec_text(header: str, name: str, launches: Sequence[Launch], seed: int,
              hosts: Hosts | None = None) -> str:
    """A campaign spec recording what these launches measure (the plan is made in code)."""
    colls = sorted({p.collective for la in launches for p in la.points})
    sizes = sorted({p.size_bytes for la in launches for p in la.points})
    nprocs = sorted({la.nprocs for la in launches})
    quoted = ", ".join(f'"{c}"' for c in colls)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    return (f'{comment}[campaign]\nname = "{name}"\n\n[measure]\ncollectives = [{quoted}]\n'
            f'algorithms = "default"\nsizes = {sizes}\nnprocs = {nprocs}\n'
            f"{hosts.measure_line() if hosts else ''}\n"
            f"[run]\nseed = {seed}\n{hosts.run_table() if hosts else ''}")


def run(out: Path, name: str, seed: int, launches: Sequence[Launch], mpi: MpiInstall,
        spec_text: str, source: str,
        wrapper: tuple[str, ...] = (), hosts: Hosts | None = None) -> tuple[Store, Summary]:
    """Create (or resume, if it holds exactly these launches) the folder and run what is
    missing, through the campaign opener like every campaign."""
    backend = "hosts" if hosts else "local"
    plan = Plan(name, seed, backend, with_ids(launches))
    spec = SpecSource.from_text(spec_text, source)
    camp = open_campaign(spec, mpi, Request(out, resume=True, backend=backend), plan=plan)
    summary = camp.run(progress=sys.stderr, wrapper=wrapper)
    if summary.interrupted:
        raise KeyboardInterrupt
    return camp.store, summary
