"""Choices that do not chase noise: with two algorithms within a few per cent of each other
and the winner flipping from size to size, tune keeps one and says what it cost."""

from __future__ import annotations

from pathlib import Path

from collbench.cli import main
from collbench.tune.select import Options, select
from tests.tune.fakedata import write_store

SIZES = [2**k for k in range(0, 16)]


def _flipping(coll: str, alg: str, size: int, nprocs: int) -> float:
    """Both beat the default by 2x; between them the winner flips every size by 2 %."""
    base = 10.0 + size / 1000
    if alg == "default":
        return base * 2
    flip = (SIZES.index(size) % 2 == 0) == (alg == "binomial")
    return base * (0.98 if flip else 1.0)


def _store(root: Path) -> None:
    write_store(root, mpi="openmpi", version="5.0.11", collectives=["bcast"],
                algorithms=[("default", 0), ("binomial", 6), ("pipeline", 3)], sizes=SIZES,
                nprocs=[4], repetitions=8, timing=_flipping, noise=0.002)


def test_smoothing_removes_switches_within_the_regret_bound(tmp_path: Path) -> None:
    _store(tmp_path / "res")
    from collbench.store import Store

    raw = select(Store(tmp_path / "res"), Options(max_regret=0.0))
    smooth = select(Store(tmp_path / "res"), Options(max_regret=0.05))
    assert len(raw.tables[("bcast", 4)]) >= 8  # the noise picked a new winner every size
    (only,) = smooth.tables[("bcast", 4)]
    assert only.algorithm in ("binomial", "pipeline")
    info = smooth.smoothing[("bcast", 4)]
    assert info.switches_before >= 8 and info.switches_after == 0
    assert 0 < info.max_regret <= 0.05
    assert any("smoothing: bcast np=4" in e for e in smooth.evidence)


def test_a_tight_bound_keeps_real_differences(tmp_path: Path) -> None:
    _store(tmp_path / "res")
    from collbench.store import Store

    tight = select(Store(tmp_path / "res"), Options(max_regret=0.001))
    assert len(tight.tables[("bcast", 4)]) >= 8  # 2 % is more than 0.1 %: no smoothing


def test_rules_file_header_says_what_weakens_the_evidence(tmp_path: Path) -> None:
    _store(tmp_path / "res")
    rules = tmp_path / "t.rules"
    assert main(["tune", str(tmp_path / "res"), "-o", str(rules)]) == 0
    head = [line for line in rules.read_text().splitlines() if line.startswith("#")]
    # the fake provenance says 2 cores: np=4 was oversubscribed
    assert any("evidence: measured oversubscribed (bcast np=4 on 2 cores)" in h for h in head)
    assert any("evidence: smoothing: bcast np=4" in h for h in head)


def test_non_blocking_collectives_are_left_out_with_a_note(tmp_path: Path) -> None:
    """libnbc reads no rules file: tune says so instead of failing on their contexts."""
    write_store(tmp_path / "res", mpi="openmpi", version="5.0.11",
                collectives=["bcast", "ibcast"], algorithms=[("default", 0), ("binomial", 6)],
                sizes=[1, 1024], nprocs=[2], repetitions=6, timing=_flipping, noise=0.001)
    from collbench.store import Store

    sel = select(Store(tmp_path / "res"))
    assert {c for c, _ in sel.tables} == {"bcast"}
    assert any(n.startswith("ibcast: non-blocking") for n in sel.notes)


def test_noisy_timings_are_named_in_the_evidence(tmp_path: Path) -> None:
    """Repetitions 30 % apart: tune says its choices rest on noisy timings, in its output
    and in the rules header; the same data without noise says nothing of the kind."""
    for name, noise in (("noisy", 0.3), ("calm", 0.002)):
        write_store(tmp_path / name, mpi="openmpi", version="5.0.11", collectives=["bcast"],
                    algorithms=[("default", 0), ("binomial", 6)], sizes=[1, 1024],
                    nprocs=[2], repetitions=8, timing=_flipping, noise=noise)
        rules = tmp_path / f"{name}.rules"
        assert main(["tune", str(tmp_path / name), "-o", str(rules)]) == 0
        head = [ln for ln in rules.read_text().splitlines() if ln.startswith("#")]
        noisy = [h for h in head if "evidence: noisy timings" in h]
        assert bool(noisy) == (name == "noisy"), head
