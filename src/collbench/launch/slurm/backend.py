"""The Slurm backend: launches become batch jobs; collbench follows them and collects markers.

Grouping: one allocation per shape (nodes × tasks per node, set per campaign), running
its launches one after another in plan order, split into several jobs only when
run.slurm.time_limit cannot hold them all. One job waits in the queue once, and every
launch of the campaign runs on the same nodes, so algorithms are compared on the same
hardware and network path; a job array would queue each launch separately and could put
each on other nodes.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import launcher_env
from collbench.errors import UserError
from collbench.kernel.build import KernelBinary
from collbench.launch import allocation, guard
from collbench.launch.base import BackendSetup, Call, Planning, call_for
from collbench.launch.batch import BatchBackend, Done, Lost, Report
from collbench.launch.slurm import markers
from collbench.launch.slurm.commands import (
    check_fits,
    impi_launcher_problem,
    impi_placement_problem,
    impi_problem,
    job_environment,
    launch_command,
    nodes_used,
    shape_of,
    srun_mpi,
)
from collbench.launch.slurm.ledger import JobRecord, Ledger, now
from collbench.launch.slurm.scheduler import Scheduler, SchedulerError
from collbench.launch.slurm.script import (
    JOB_MARGIN_S,
    SCRIPT_ONLY,
    JobLaunch,
    job_seconds,
    render,
    sbatch_options,
)
from collbench.plan import Launch
from collbench.spec.workload import Workload

if TYPE_CHECKING:
    from collbench.plan import Plan
    from collbench.store import Store

# A job that COMPLETED should have left every done marker; give a shared file system this
# long to show them before calling its remaining launches lost.
MARKER_GRACE_S: Final = 10.0


def prepare_work(store: Store, launch: Launch, binary: Path = Path()) -> Path:
    """A clean work directory holding what the launch reads (the kernel's job file)."""
    work = store.work_dir(launch.launch_id).resolve()
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    call_for(launch, binary, work).prepare(launch)
    return work


class SlurmBackend(BatchBackend):
    name = "slurm"

    def __init__(self, setup: BackendSetup) -> None:
        super().__init__(setup)
        try:
            self.poll_interval_s = float(os.environ.get("COLLBENCH_SLURM_POLL_S", "0.5"))
        except ValueError:
            raise UserError("COLLBENCH_SLURM_POLL_S: expected seconds, got "
                            f"{os.environ['COLLBENCH_SLURM_POLL_S']!r}") from None
        self.scheduler = Scheduler(launcher_env(self.mpi))
        self.cfg = self.spec.run.slurm
        self.campaign = self.spec.campaign.name
        self.shape = shape_of(self.cfg, list(self.spec.measure.nprocs))
        self._plugin: str | None = None
        self.ledger = Ledger(setup.store.backend_file("slurm").resolve())
        self.waiting: dict[str, Launch] = {}  # launch id -> launch not yet reported
        self.job_for: dict[str, str] = {}  # launch id -> the job that runs it
        self.commands: dict[str, list[str]] = {}
        self.ended_at: dict[str, float] = {}  # job id -> when this run saw it end
        self.last_error = ""

    def planning(self, base: Catalog) -> Planning:
        # Asked now, before any folder is created: a campaign that cannot start (srun
        # without the MPI's plugin, slurmctld down) fails before it leaves anything.
        _ = self.plugin
        if why := impi_launcher_problem(self.cfg, self.mpi, self.setup.source):
            raise UserError(why)
        # The allocation to come decides oversubscription, not the login node.
        return Planning(base, self.shape.nodes * self.shape.tasks_per_node)

    @property
    def plugin(self) -> str:
        """srun's --mpi plugin (asked of srun once, when first needed)."""
        if self._plugin is None:
            self._plugin = "pmix"
            if self.cfg.launcher == "srun":  # srun is asked only when the spec says "auto"
                offered = self._offered() if self.cfg.srun_mpi == "auto" else None
                self._plugin = srun_mpi(self.cfg, self.mpi, offered)
        return self._plugin

    def _offered(self) -> list[str] | None:
        try:
            return self.scheduler.mpi_plugins()
        except SchedulerError as e:
            notes = SCRIPT_ONLY.get()
            if notes is None:  # a run needs srun: it fails before leaving anything
                raise
            notes.append(f"{e}; the script uses srun --mpi={srun_mpi(self.cfg, self.mpi, None)}"
                         " (set run.slurm.srun_mpi to choose another)")
            return None

    def check(self, launches: list[Launch]) -> None:
        """UserError when launches cannot run in the allocation asked for."""
        check_fits(launches, self.shape, self.setup.source)
        if why := impi_problem(self.cfg, self.mpi, launches, self.setup.source):
            raise UserError(why)

    def placement_problem(self, launch: Launch) -> str | None:
        # asked by the campaign before its folder is made (campaign.check_placements)
        return impi_placement_problem(self.mpi, launch)

    def live_jobs(self) -> list[str]:
        """Jobs of this campaign still queued or running."""
        ids = [r.job_id for r in self.ledger.jobs.values() if not r.final]
        return [j for j, st in self.scheduler.states(ids).items() if st.active] if ids else []

    def launcher(self) -> str:
        return f"srun --mpi={self.plugin}" if self.cfg.launcher == "srun" else "mpirun"

    def build_program(self, workload: Workload) -> KernelBinary:
        binary = super().build_program(workload)
        # each rank runs under the rank guard (launch/guard.py), on the compute nodes too:
        # built before anything is submitted, into the build cache the kernel comes from
        guard.build(self.compiler())
        return binary

    def _launch_command(self, launch: Launch, call: Call) -> tuple[list[str], dict[str, str]]:
        return launch_command(self.cfg, self.mpi, launch, call, self.shape, self.plugin,
                              guard.argv(self.compiler(), launch))

    def command(self, launch: Launch, call: Call) -> list[str]:
        return self._launch_command(launch, call)[0]

    def job_launches(self, launches: list[Launch], kernel: Path,
                     debug: tuple[str, ...]) -> list[JobLaunch]:
        out = []
        for la in launches:
            work = self.setup.store.work_dir(la.launch_id).resolve()
            argv, env = self._launch_command(la, call_for(la, kernel, work, debug))
            out.append(JobLaunch(la.launch_id, work, la.timeout_s, argv, env))
        return out

    def pack(self, launches: list[JobLaunch]) -> list[list[JobLaunch]]:
        """Consecutive launches per job, as many as run.slurm.time_limit holds."""
        limit = self.cfg.time_limit_s()
        if limit is None or not launches:
            return [launches] if launches else []
        jobs: list[list[JobLaunch]] = [[]]
        for jl in launches:
            if JOB_MARGIN_S + jl.seconds_needed() > limit:
                raise UserError(
                    f"run.slurm.time_limit: {self.cfg.time_limit} is too short for one launch "
                    f"(run.timeout {jl.timeout_s:g} s + {jl.seconds_needed() - jl.timeout_s:g} "
                    f"s to start and stop it + {JOB_MARGIN_S} s per job); raise it or lower "
                    "run.timeout")
            if jobs[-1] and job_seconds([*jobs[-1], jl]) > limit:
                jobs.append([])
            jobs[-1].append(jl)
        return jobs

    def script_text(self, launches: list[JobLaunch]) -> str:
        time_s = None if self.cfg.time_limit else job_seconds(launches)
        name = self.cfg.job_name or f"collbench-{self.campaign}"
        opts = sbatch_options(self.cfg, name, self.shape, time_s,
                              self.ledger.dir / "job-%j.out")
        summary = (f"campaign {self.campaign}, {len(launches)} launches on "
                   f"{self.shape.nodes} node(s) × {self.shape.tasks_per_node} tasks, "
                   f"launcher {self.launcher()}")
        return render(opts, launches, job_environment(self.cfg, self.mpi), summary)

    def scripts(self, launches: list[Launch], kernel: Path, debug: tuple[str, ...],
                one_job: bool = False) -> list[str]:
        """The batch scripts for these launches (dry run, `collbench slurm script`)."""
        self.check(launches)
        jls = self.job_launches(launches, kernel, debug)
        groups = [jls] if one_job else self.pack(jls)
        return [self.script_text(g) for g in groups]

    def dry_run(self, plan: Plan, kernel: Path, debug: tuple[str, ...]) -> str:
        scripts = self.scripts(list(plan.launches), kernel, debug)
        if len(scripts) == 1:
            return scripts[0]
        return "".join(f"# ===== job {i} of {len(scripts)} =====\n{text}"
                       for i, text in enumerate(scripts, start=1))

    # --- running --------------------------------------------------------------------
    def begin(self, store: Store, todo: list[Launch], kernel: Path,
              debug: tuple[str, ...]) -> list[Report]:
        self.check(todo)
        self._refresh([r.job_id for r in self.ledger.jobs.values() if not r.final])
        reports: list[Report] = []
        submit = []
        for la in todo:
            lid = la.launch_id
            work = store.work_dir(lid).resolve()
            self.commands[lid] = self.command(
                la, call_for(la, kernel, work, debug))
            fin = markers.finished(work, self.commands[lid], la.timeout_s)
            if fin is not None:  # ran while nobody watched (the laptop slept)
                reports.append(self._done(la, fin))
                continue
            job = self._live_job(lid, work)
            if job is not None:
                self.waiting[lid], self.job_for[lid] = la, job
                continue
            submit.append(la)
        for la in submit:
            prepare_work(store, la, kernel)
        for group in self.pack(self.job_launches(submit, kernel, debug)):
            self._submit(group, {la.launch_id: la for la in submit})
        return reports

    def _submit(self, group: list[JobLaunch], launches: dict[str, Launch]) -> None:
        path = self.ledger.next_script()
        path.write_text(self.script_text(group))
        job = self.scheduler.submit(path)
        ids = [jl.launch_id for jl in group]
        self.ledger.add(JobRecord(job, path.name, ids, now()))
        for lid in ids:
            self.waiting[lid], self.job_for[lid] = launches[lid], job

    def _live_job(self, launch_id: str, work: Path) -> str | None:
        """A queued or running job that will run this launch, if any."""
        rec = self.ledger.job_of(launch_id)
        if rec is not None and not rec.final:
            return rec.job_id
        started = markers.read_fields(work / markers.STARTED) or {}
        job = started.get("job", "")
        if job.isdigit() and (rec is None or int(job) > int(rec.job_id)):
            # A job the user submitted (`collbench slurm script`): follow it, never cancel it.
            state = self.scheduler.states([job])[job]
            if state.active:
                known = self.ledger.jobs.get(job)
                if known is None:
                    known = JobRecord(job, "", [], now(), state.state, by_collbench=False)
                    self.ledger.jobs[job] = known
                known.launches.append(launch_id)
                self.ledger.save()
                return job
        return None

    def _refresh(self, job_ids: list[str]) -> None:
        if not job_ids:
            return
        changed = False
        for job, st in self.scheduler.states(job_ids).items():
            rec = self.ledger.jobs[job]
            if (rec.state, rec.reason, rec.nodelist) != (st.state, st.reason, st.nodelist):
                rec.state, rec.reason = st.state, st.reason
                rec.nodelist = st.nodelist or rec.nodelist
                changed = True
            if not st.active and rec.ended is None:
                rec.ended = now()
                changed = True
            if not st.active:
                self.ended_at.setdefault(job, time.monotonic())
        if changed:
            self.ledger.save()

    def _done(self, launch: Launch, fin: markers.Finished) -> Done:
        self.waiting.pop(launch.launch_id, None)
        meta = {"slurm": {
            "job_id": fin.job_id, "allocation": fin.allocation,
            "allocation_nodes": allocation.expand_hostlist(fin.allocation),
            "ranks_per_node": fin.ranks_per_node(), "rank_hosts": fin.rank_hosts,
            "launcher": self.launcher(),
        }}
        return Done(launch, fin.outcome, fin.nodes or nodes_used(launch, self.shape), meta)

    def _check_markers(self, launch_ids: list[str]) -> list[Report]:
        reports: list[Report] = []
        for lid in launch_ids:
            la = self.waiting[lid]
            fin = markers.finished(self.setup.store.work_dir(lid).resolve(), self.commands[lid],
                                   la.timeout_s)
            if fin is not None:
                reports.append(self._done(la, fin))
        return reports

    def poll(self) -> list[Report]:
        reports = self._check_markers(list(self.waiting))
        jobs = sorted({self.job_for[lid] for lid in self.waiting}, key=int)
        try:
            self._refresh([j for j in jobs if not self.ledger.jobs[j].final])
        except SchedulerError as e:  # slurmctld busy or restarting: ask again next time
            self.last_error = str(e)
            return reports
        for job in jobs:
            rec = self.ledger.jobs[job]
            if not rec.final:
                continue
            left = [lid for lid in self.waiting if self.job_for[lid] == job]
            reports += self._check_markers(left)  # it may have ended right after them
            left = [lid for lid in left if lid in self.waiting]
            seen = time.monotonic() - self.ended_at.get(job, 0.0)
            if not left or (rec.state == "COMPLETED" and seen < MARKER_GRACE_S):
                continue
            why = f"Slurm job {job} ended {rec.state}"
            if rec.reason and rec.reason != "None":
                why += f" ({rec.reason})"
            if rec.cancelled_by_collbench:
                why += ", cancelled by collbench"
            for lid in left:
                reports.append(Lost(self.waiting.pop(lid), rec.state,
                                    f"{why} before launch {lid} finished"))
            rec.lost = sorted(set(rec.lost) | set(left))
            self.ledger.save()
        return reports

    def active(self) -> bool:
        return bool(self.waiting)

    def cancel(self) -> list[str]:
        ids = sorted({self.job_for[lid] for lid in self.waiting
                      if self.ledger.jobs[self.job_for[lid]].by_collbench
                      and not self.ledger.jobs[self.job_for[lid]].final}, key=int)
        if ids:
            self.scheduler.cancel(ids)
            for job in ids:
                self.ledger.jobs[job].cancelled_by_collbench = True
            self.ledger.save()
        return ids

    def stored(self, launch: Launch, status: str) -> None:
        done = self.setup.store.work_dir(launch.launch_id).resolve() / markers.DONE
        if done.exists():  # kept for inspection, but no longer "to collect"
            done.replace(done.with_name(markers.STORED))
