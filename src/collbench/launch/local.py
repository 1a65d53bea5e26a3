"""Local backend: `mpirun` on this machine (or inside an existing allocation)."""

from __future__ import annotations

import os
from collections.abc import Callable

from collbench.catalog.mpi import launcher_env
from collbench.launch import allocation
from collbench.launch.base import Backend, KernelCall, LaunchOutcome, register
from collbench.launch.process import run_group
from collbench.plan import Launch


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


@register
class LocalBackend(Backend):
    name = "local"

    def command(self, launch: Launch, call: KernelCall) -> list[str]:
        if self.mpi.implementation == "mpich":
            return self._hydra(launch, call)
        return self._openmpi(launch, call)

    def _openmpi(self, launch: Launch, call: KernelCall) -> list[str]:
        argv = [str(self.mpi.mpirun)]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-run-as-root")
        mapping, binding = launch.mapping, launch.binding
        if launch.oversubscribe:
            if _major(self.mpi.version) >= 5:
                # Open MPI 5 spells it as modifiers; binding more ranks than cores must
                # be allowed explicitly or mpirun refuses to start.
                mapping += ":OVERSUBSCRIBE"
                if binding != "none":
                    binding += ":overload-allowed"
            else:
                argv.append("--oversubscribe")
        argv += ["-np", str(launch.nprocs), "--map-by", mapping, "--bind-to", binding]
        for key, value in launch.mca:
            argv += ["--mca", key, value]
        for key, _ in launch.env:
            argv += ["-x", key]
        return argv + call.argv(launch)

    def _hydra(self, launch: Launch, call: KernelCall) -> list[str]:
        argv = [str(self.mpi.mpirun), "-np", str(launch.nprocs),
                "-map-by", launch.mapping, "-bind-to", launch.binding]
        for key, value in launch.env:
            argv += ["-genv", key, value]
        return argv + call.argv(launch)

    def run(
        self, launch: Launch, call: KernelCall, interrupted: Callable[[], bool]
    ) -> LaunchOutcome:
        argv = self.command(launch, call)
        env = launcher_env(self.mpi)
        env.update(dict(launch.env))
        done = run_group(argv, env, launch.timeout_s, call.outfile.parent, interrupted)
        if done.interrupted:
            status = "interrupted"
        elif done.timed_out:
            status = "timeout"
        else:
            status = "ok" if done.returncode == 0 else "failed"
        return LaunchOutcome(status, argv, done.returncode, done.wall_s, done.stderr_tail,  # type: ignore[arg-type]
                             self._hosts(launch))

    # Inside a Slurm allocation mpirun spreads ranks over its nodes by itself.
    def nodes(self, launch: Launch) -> int:
        return allocation.nodes_for(launch, allocation.current())

    def _hosts(self, launch: Launch) -> list[str]:
        alloc = allocation.current()
        if alloc is None or not alloc.nodes:
            return [os.uname().nodename]
        return list(alloc.nodes[:alloc.nodes_used(launch.nprocs, launch.mapping)])
