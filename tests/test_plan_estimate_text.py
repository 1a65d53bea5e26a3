"""`plan`'s estimate line says what plan/estimate.py computes: its terms, with the counts of
this plan (launches, points, warm-up and iterations, simulated messages), adding up."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.plan import Point, estimate
from tests.test_plan import make

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
    assert out[at + 1].startswith("  = collbench's start 2.5 s + 2 launch start-ups")
    assert numbers(out[at + 1])[3] == 8  # points: 2 collectives x 2 sizes x 2 launches


def test_other_work_on_the_machine_slows_local_launches_and_is_said(
        monkeypatch: pytest.MonkeyPatch) -> None:
    plan = make(BODY, cores=4)  # np=2 and np=4 on 4 cores: not oversubscribed
    quiet = [la.estimate_seconds() for la in plan.launches]
    monkeypatch.setattr(estimate, "machine_load", lambda: (10.0, 4))  # load average 10
    loaded = [la.estimate_seconds() for la in plan.launches]
    # 4 of the 10 taken as passing; each rank gets cores / (others + ranks) of a core
    assert [b / q for q, b in zip(quiet, loaded, strict=True)] == pytest.approx(
        [(10 - 4 + la.nprocs) / 4 for la in plan.launches])
    # the live ETA moves by points: theirs are slowed alike
    assert [sum(la.point_seconds()) for la in plan.launches] == pytest.approx(
        [b - estimate.STARTUP_S * (6 + la.nprocs) / 4
         for la, b in zip(plan.launches, loaded, strict=True)])
    text = estimate.describe(plan.launches, simulated=False)
    assert "× 2-2.5 for the machine's other work (1-minute load average 10.0 on 4 cores" in text
    # SimGrid is one process: (6 + 1) / 4, said too
    sim = [la.estimate_seconds(simulated=True) for la in plan.launches]
    assert "× 1.75 for the machine's other work" in estimate.describe(plan.launches, True)
    monkeypatch.setattr(estimate, "machine_load", lambda: (4.0, 4))  # passing work only
    assert [s / 1.75 for s in sim] == pytest.approx(
        [la.estimate_seconds(simulated=True) for la in plan.launches])
    assert "other work" not in estimate.describe(plan.launches, True)
    assert [la.estimate_seconds() for la in plan.launches] == quiet
    assert "other work" not in estimate.describe(plan.launches, simulated=False)
