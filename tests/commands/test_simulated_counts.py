"""A simulated campaign's default iterations: a simulation repeats to the last digit, so
OSU's 1,000/100 are not run under SimGrid (they cost minutes per point at 48 ranks); a
count the spec or -i/-x gives is kept, and a real MPI keeps OSU's defaults."""

from __future__ import annotations

import json

import pytest

from collbench.catalog.collectives import osu_defaults
from collbench.cli import main
from collbench.plan.expand import SIMULATED_COUNTS

QUICK = ["plan", "-c", "iallgather,bcast", "-m", "1K,1M", "-n", "4", "--format", "json"]
SIM = ["--backend", "simgrid", "--platform", "orfeo-thin"]


def counts(capsys: pytest.CaptureFixture[str], *argv: str) -> set[tuple[str, int, int, int]]:
    assert main([*QUICK, *argv]) == 0
    plan = json.loads(capsys.readouterr().out)
    return {(p["collective"], p["size_bytes"], p["iterations"], p["warmup"])
            for la in plan["launches"] for p in la["points"]}


def test_simulated_points_run_few_iterations(capsys: pytest.CaptureFixture[str]) -> None:
    it, wu = SIMULATED_COUNTS
    sim = counts(capsys, *SIM)
    assert {c[1] for c in sim} == {1024, 1 << 20} and {c[0] for c in sim} == \
        {"iallgather", "bcast"}
    assert {(c[2], c[3]) for c in sim} == {(it, wu)}
    given = counts(capsys, *SIM, "-i", "7", "-x", "3")
    assert {(c[2], c[3]) for c in given} == {(7, 3)}
    real = counts(capsys, "--backend", "fake")
    assert {(c[2], c[3]) for c in real} == {osu_defaults(c[0], c[1]) for c in real}
    assert {(c[2], c[3]) for c in real} != {(it, wu)}


def test_simulated_non_blocking_calls_are_smpis_linear_schedules() -> None:
    """SMPI's non-blocking collectives post every message at once (smpi_nbc_impl.cpp): a
    star for the rooted ones, every ordered pair for iallgather/ialltoall/iallreduce; the
    estimate counts those, and weighs a crowd beyond SIM_IN_FLIGHT messages in flight."""
    from dataclasses import replace

    from collbench.plan import Point, estimate

    p = 48
    barrier = p * 6  # OSU's barrier between iterations: P·⌈log2 P⌉
    star = Point("ibcast", "default", 0, 0, 0, 1 << 20, 1, 1, test_calls=0, compute="auto")
    pairs = replace(star, collective="iallgather")
    assert estimate.messages(star, p) == p - 1 + barrier  # unsegmented, unlike bcast's
    assert estimate.messages(replace(star, collective="ireduce"), p) == p - 1 + barrier
    assert estimate.messages(pairs, p) == p * (p - 1) + barrier
    assert estimate.messages(replace(star, collective="ialltoall"), p) == p * (p - 1) + barrier
    assert estimate.weighted(star, p) == estimate.messages(star, p)  # 47 in flight: no crowd
    crowd = p * (p - 1)
    assert estimate.weighted(pairs, p) == pytest.approx(
        barrier + crowd * crowd / estimate.SIM_IN_FLIGHT)
    blocking = replace(star, collective="bcast", test_calls=None, compute=None)
    assert estimate.weighted(blocking, p) == estimate.messages(blocking, p)
