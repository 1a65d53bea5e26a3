"""`plan`'s estimate line says what plan/estimate.py computes: its terms, with the counts of
this plan (launches, points, warm-up and iterations, simulated messages), adding up."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.plan import Point, estimate
from tests.test_plan import make

MACHINE_LOAD = estimate.machine_load  # before the autouse fixture pins it
BODY = 'collectives = ["bcast", "gather"]\nalgorithms = "default"\nnprocs = [2, 4]\n' \
       'sizes = [8, 1024]\niterations = 50\nwarmup = 5'


def numbers(text: str) -> list[float]:
    return [float(x.replace(",", "")) for x in re.findall(r"\d[\d,]*(?:\.\d+)?", text)]


def test_local_terms_are_this_plans() -> None:
    plan = make(BODY, cores=2)  # np=4 on 2 cores: oversubscribed
    text = estimate.describe(plan.launches, simulated=False)
    points = sum(len(la.points) for la in plan.launches)
    runs = sum(p.iterations + p.warmup for la in plan.launches for p in la.points)
    assert f"{len(plan.launches)} launch start-ups × {estimate.STARTUP_S:g} s" in text
    assert f"{points} points × ({estimate.POINT_OVERHEAD_S * 1e3:g} ms" in text
    assert f"({runs:,} in all)" in text
    over = sum(la.oversubscribe for la in plan.launches)
    assert over and f"× {estimate.OVERSUBSCRIBED_SLOWDOWN:g} in the {over} launches" in text
    # the terms add up to the total plan prints
    work = sum(p.work_seconds(la.nprocs) for la in plan.launches for p in la.points)
    assert f"{work:.1f} s in all" in text
    total = estimate.CAMPAIGN_S + sum(
        estimate.STARTUP_S + (len(la.points) * estimate.POINT_OVERHEAD_S
                              + sum(p.work_seconds(la.nprocs) for p in la.points))
        * (estimate.OVERSUBSCRIBED_SLOWDOWN if la.oversubscribe else 1.0)
        for la in plan.launches)
    assert plan.estimate_seconds() == pytest.approx(total)


def test_simulated_terms_count_messages_and_skip_the_hide_sweep() -> None:
    plan = make(BODY, cores=64)
    text = estimate.describe(plan.launches, simulated=True)
    sent = sum((p.iterations + p.warmup) * estimate.messages(p, la.nprocs)
               for la in plan.launches for p in la.points)
    assert f"segments: {sent:,} in all) × {estimate.SIM_MESSAGE_S * 1e6:g} µs each" in text
    assert text.startswith("the simulator's wall time")
    # a non-blocking point: pure and overlapped loops; under SMPI no hide_steps sweep
    nb = Point("ibcast", "default", 0, 0, 0, 1024, 10, 1, test_calls=0, compute="auto")
    swept = replace(nb, hide_steps=8)
    assert estimate.point_seconds(swept, 16, True) == estimate.point_seconds(nb, 16, True)
    blocking = replace(nb, collective="bcast", test_calls=None, compute=None)
    assert estimate.point_seconds(nb, 16, True) == pytest.approx(
        2 * estimate.point_seconds(blocking, 16, True))
    # the hide sweep still costs on a real MPI, where the kernel runs it
    assert estimate.point_seconds(swept, 16, False) > estimate.point_seconds(nb, 16, False)
    one = replace(plan, launches=plan.launches[:1])
    assert "1 launch start-up " in estimate.describe(one.launches, True)


def test_plan_prints_the_terms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(f'[campaign]\nname = "t"\n[measure]\n{BODY}\n[run]\nbackend = "fake"\n')
    assert main(["plan", str(spec)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(out) if line.startswith("estimated time: "))
    assert "corrects it by the speed it measures" in out[at]
    assert out[at + 1].startswith(
        f"  = collbench's start {estimate.CAMPAIGN_S:g} s + 2 launch start-ups")
    assert numbers(out[at + 1])[3] == 8  # points: 2 collectives x 2 sizes x 2 launches


def test_other_work_on_the_machine_slows_local_launches_and_is_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make(BODY, cores=4)  # np=2 and np=4 on 4 cores: not oversubscribed
    quiet = [la.estimate_seconds() for la in plan.launches]
    quiet_start = estimate.campaign_seconds()
    monkeypatch.setattr(estimate, "machine_load", lambda: (6.0, 4))  # 6 others want a core
    loaded = [la.estimate_seconds() for la in plan.launches]
    # each rank gets cores / (others + ranks) of a core
    assert [b / q for q, b in zip(quiet, loaded, strict=True)] == pytest.approx(
        [(6 + la.nprocs) / 4 for la in plan.launches])
    assert estimate.campaign_seconds() == pytest.approx(quiet_start * 7 / 4)  # one process
    # the live ETA moves by points: theirs are slowed alike
    assert [sum(la.point_seconds()) for la in plan.launches] == pytest.approx(
        [b - estimate.STARTUP_S * (6 + la.nprocs) / 4
         for la, b in zip(plan.launches, loaded, strict=True)])
    text = estimate.describe(plan.launches, simulated=False)
    assert "× 1.75-2.5 for the machine's other work (6 other processes want a core now, " \
           "4 cores" in text
    # SimGrid is one process: (6 + 1) / 4, said too
    sim = [la.estimate_seconds(simulated=True) for la in plan.launches]
    assert "× 1.75 for the machine's other work" in estimate.describe(plan.launches, True)
    monkeypatch.setattr(estimate, "machine_load", lambda: (2.0, 4))  # room beside them
    assert [s / 1.75 for s in sim] == pytest.approx(
        [la.estimate_seconds(simulated=True) for la in plan.launches])
    assert "other work" not in estimate.describe(plan.launches, True)
    monkeypatch.setattr(estimate, "machine_load", lambda: (0.0, 4))
    assert [la.estimate_seconds() for la in plan.launches] == quiet
    assert "other work" not in estimate.describe(plan.launches, simulated=False)


def test_the_machines_other_work_is_what_wants_a_core_now() -> None:
    """Real processes: three busy loops are counted (the autouse fixture pins the figure for
    every other test; this one reads the machine). Other runs beside the suite only add."""
    quiet = MACHINE_LOAD.__wrapped__()
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        time.sleep(0.3)  # started and spinning
        others, cores = MACHINE_LOAD.__wrapped__()
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert cores == len(os.sched_getaffinity(0))
    assert others >= 3 and others == int(others)
    assert quiet[1] == cores and quiet[0] >= 0


def test_compute_sized_to_a_measured_time_is_slowed_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel sizes `auto` compute to the pure time it measures (already slowed by the
    machine's other work) and the compute then runs slowed too; microseconds run once."""
    auto = Point("ibcast", "default", 0, 0, 0, 1024, 10, 1, test_calls=0, compute="auto")
    fixed = replace(auto, compute="5us")
    assert auto.relative_compute_seconds(2) > 0 and fixed.relative_compute_seconds(2) == 0
    assert replace(auto, collective="bcast", test_calls=None,
                   compute=None).relative_compute_seconds(2) == 0
    quiet = {p: estimate.point_seconds(p, 2, False) for p in (auto, fixed)}
    monkeypatch.setattr(estimate, "machine_load", lambda: (2.0, 2))  # factor 2
    assert estimate.point_seconds(fixed, 2, False) == pytest.approx(2 * quiet[fixed])
    assert estimate.point_seconds(auto, 2, False) == pytest.approx(
        2 * (quiet[auto] + auto.relative_compute_seconds(2)))
    plan = make('collectives = "ibcast"\nalgorithms = "default"\nnprocs = 2\nsizes = 1024\n'
                'nonblocking = { compute = "auto" }', cores=2)
    assert "twice for compute sized to the measured pure time" in estimate.describe(
        plan.launches, simulated=False)
