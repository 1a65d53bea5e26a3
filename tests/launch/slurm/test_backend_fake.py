"""Submission, tracking, collection, resume and cancel against a fake Slurm CLI.

The fake sbatch runs nothing: each test plays the job by setting its state and writing
the marker files a job writes. The same paths with real daemons: test_real_slurm.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.launch.batch import Done, Lost
from collbench.launch.slurm import backend as slurm_module
from collbench.launch.slurm.backend import SlurmBackend
from collbench.launch.slurm.ledger import Ledger
from collbench.plan import Launch, Plan
from collbench.runner import RowContext, run_campaign
from collbench.store import Store
from tests.launch.slurm.util import SPEC, FakeSlurm, finish, launch, slurm_backend, spec

L1, L2, L3 = (launch(f"000{i}-aaaaaaaa") for i in range(3))
KERNEL = Path("/k/collbench_kernel")


def store_for(tmp_path: Path, launches: tuple[Launch, ...] = (L1, L2, L3)) -> Store:
    store = Store(tmp_path / "res")
    plan = Plan("slurm-unit", 1, "slurm", launches)
    store.create({"name": "slurm-unit", "seed": 1, "backend": "slurm"},
                 SPEC.format(slurm=""), plan.to_json(), {"host": "test"})
    return store


def begin(store: Store, todo: list[Launch]) -> tuple[SlurmBackend, list[Done | Lost]]:
    backend = slurm_backend(spec(), store.root)
    return backend, backend.begin(store, todo, KERNEL, ())


def test_one_job_runs_every_launch_in_plan_order(fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    store = store_for(tmp_path)
    backend, reports = begin(store, [L1, L2, L3])
    assert reports == [] and backend.active()
    (job, info), = fake_slurm.jobs().items()
    assert fake_slurm.calls("sbatch") == [["--parsable", info["script"]]]
    text = Path(info["script"]).read_text()
    order = [line.split()[1] for line in text.splitlines() if line.startswith("collbench_launch /")]
    assert order == [str(store.work_dir(la.launch_id).resolve()) for la in (L1, L2, L3)]
    for la in (L1, L2, L3):
        assert (store.work_dir(la.launch_id) / "jobs.txt").read_text().splitlines() == \
            la.job_lines()
    ledger = Ledger(store.root / "slurm")
    assert ledger.jobs[job].launches == [L1.launch_id, L2.launch_id, L3.launch_id]
    assert ledger.jobs[job].by_collbench


def test_finished_launches_are_reported_and_killed_jobs_lose_the_rest(
        fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    store = store_for(tmp_path)
    backend, _ = begin(store, [L1, L2, L3])
    job = next(iter(fake_slurm.jobs()))
    fake_slurm.set_state(job, "RUNNING")
    assert backend.poll() == []
    finish(store.work_dir(L1.launch_id), job=job, hosts=("n1", "n2", "n1", "n2"))
    (done,) = backend.poll()
    assert isinstance(done, Done) and done.launch == L1 and done.outcome.status == "ok"
    assert done.nodes == 2 and done.outcome.hosts == ["n1", "n2"]
    assert done.meta["slurm"]["ranks_per_node"] == {"n1": 2, "n2": 2}
    assert done.meta["slurm"]["allocation_nodes"] == ["n1", "n2"]
    fake_slurm.set_state(job, "TIMEOUT")
    lost = backend.poll()
    assert [(r.launch, r.state) for r in lost if isinstance(r, Lost)] == [(L2, "TIMEOUT"),
                                                                        (L3, "TIMEOUT")]
    assert not backend.active()
    rec = Ledger(store.root / "slurm").jobs[job]
    assert rec.state == "TIMEOUT" and rec.final and rec.lost == [L2.launch_id, L3.launch_id]


def test_resume_collects_finished_follows_running_and_resubmits_only_lost(
        fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    store = store_for(tmp_path)
    begin(store, [L1, L2, L3])
    first = next(iter(fake_slurm.jobs()))
    fake_slurm.set_state(first, "RUNNING")
    finish(store.work_dir(L1.launch_id), job=first)  # ran while collbench was away
    # collbench stopped (laptop slept); the job is still running: nothing is resubmitted
    backend, reports = begin(store, [L1, L2, L3])
    assert [type(r) for r in reports] == [Done] and reports[0].launch == L1
    assert len(fake_slurm.jobs()) == 1 and backend.active()
    # the job was preempted meanwhile: the next resume submits the two it did not finish
    fake_slurm.set_state(first, "PREEMPTED")
    (work2 := store.work_dir(L2.launch_id) / "stale.txt").write_text("half a launch")
    backend, reports = begin(store, [L2, L3])
    assert reports == [] and not work2.exists()
    second = max(fake_slurm.jobs(), key=int)
    assert second != first
    script = Path(fake_slurm.jobs()[second]["script"]).read_text()
    assert L1.launch_id not in script and L2.launch_id in script and L3.launch_id in script
    assert Ledger(store.root / "slurm").jobs[first].state == "PREEMPTED"


def test_cancel_scancels_only_live_jobs_collbench_submitted(fake_slurm: FakeSlurm,
                                                            tmp_path: Path) -> None:
    foreign = fake_slurm.add_foreign_job()
    store = store_for(tmp_path)
    # a job the user submitted with `collbench slurm script` runs L3
    user_job = fake_slurm.add_foreign_job()
    (store.work_dir(L3.launch_id)).mkdir(parents=True)
    (store.work_dir(L3.launch_id) / "started").write_text(f"job={user_job}\nstart=1\n")
    backend, _ = begin(store, [L1, L2, L3])
    ours = [j for j in fake_slurm.jobs() if j not in (foreign, user_job)]
    assert len(ours) == 1
    assert "0002" not in Path(fake_slurm.jobs()[ours[0]]["script"]).read_text()  # followed
    assert backend.cancel() == ours
    assert fake_slurm.calls("scancel") == [ours]
    states = {j: v["state"] for j, v in fake_slurm.jobs().items()}
    assert states == {foreign: "RUNNING", user_job: "RUNNING", ours[0]: "CANCELLED"}
    assert Ledger(store.root / "slurm").jobs[ours[0]].cancelled_by_collbench


def test_completed_job_without_a_marker_loses_the_launch(
        fake_slurm: FakeSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_module, "MARKER_GRACE_S", 0.0)
    store = store_for(tmp_path, (L1,))
    backend, _ = begin(store, [L1])
    fake_slurm.set_state(next(iter(fake_slurm.jobs())), "COMPLETED")
    (lost,) = backend.poll()
    assert isinstance(lost, Lost) and lost.state == "COMPLETED"


def test_run_campaign_collects_a_finished_job_without_submitting(
        fake_slurm: FakeSlurm, tmp_path: Path) -> None:
    store = store_for(tmp_path, (L1, L2))
    plan = Plan.from_json(store.plan())
    finish(store.work_dir(L1.launch_id), job="7")
    finish(store.work_dir(L2.launch_id), job="7", rc=124)  # killed by the per-launch timeout
    ctx = RowContext("slurm-unit", "slurm", "openmpi", "5.0.11")
    summary = run_campaign(store, plan, slurm_backend(spec(), store.root), KERNEL, ctx)
    assert fake_slurm.calls("sbatch") == []
    assert summary.by_status == {"ok": 1, "timeout": 1}
    rows = [json.loads(x) for p in sorted((store.root / "launches").glob("*.jsonl"))
            for x in p.read_text().splitlines()]
    assert {(r["backend"], r["nodes"], r["ppn"], r["status"]) for r in rows} == {
        ("slurm", 2, 2, "ok")}  # a timeout after every point was written keeps them ok
    meta = json.loads((store.root / "launches" / f"{L2.launch_id}.meta.json").read_text())
    assert meta["status"] == "timeout" and meta["slurm"]["job_id"] == "7"
    # its work dir is kept for inspection, its done marker retired: --retry-failed resubmits
    assert (store.work_dir(L2.launch_id) / "done.stored").exists()
    assert not store.work_dir(L1.launch_id).exists()


def test_singletons_from_a_wrong_pmi_plugin_are_failures(fake_slurm: FakeSlurm,
                                                          tmp_path: Path) -> None:
    store = store_for(tmp_path, (L1,))
    finish(store.work_dir(L1.launch_id), nprocs=1)
    ctx = RowContext("slurm-unit", "slurm", "openmpi", "5.0.11")
    run_campaign(store, Plan.from_json(store.plan()), slurm_backend(spec(), store.root),
                 KERNEL, ctx)
    rows = [json.loads(x) for x in
            (store.root / "launches" / f"{L1.launch_id}.jsonl").read_text().splitlines()]
    assert {r["status"] for r in rows} == {"failed"}
    assert "ran with 1 process(es), planned 4" in rows[0]["error"]
