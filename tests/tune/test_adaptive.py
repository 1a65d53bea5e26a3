"""Adaptive tuning: racing, dominance pruning, crossover refinement, replay and a live run.

Replay tests use a synthetic stored campaign whose best algorithm per size is known; the
live test measures with real Open MPI.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.errors import UserError
from collbench.records import make_row
from collbench.store import Store
from collbench.tune.adaptive import Config, RaceConfig, live, replay
from collbench.tune.adaptive.engine import coarse_indices
from collbench.tune.adaptive.evaluate import evaluate, label_at
from collbench.tune.adaptive.race import Race, slower_p
from collbench.tune.rules import parse_rules
from collbench.tune.select import Choice, Selection, select

SIZES = [2**i for i in range(21)]  # 1 B .. 1 MiB
ALGS = {"default": 0, "basic_linear": 1, "chain": 2, "pipeline": 3, "binary_tree": 5,
        "binomial": 6}
CROSSOVER = 1024  # binomial below, pipeline from here on


def truth(alg: str, size: int) -> float:
    """Latency model with a known winner: binomial < 1 KiB, pipeline from 1 KiB."""
    base = 2.0 + size / 1000.0
    factor = {
        "binomial": 1.0 if size < CROSSOVER else 1.6,
        "pipeline": 1.6 if size < CROSSOVER else 1.0,
        "default": 1.3,  # never best: the rules must switch away from it everywhere
        "basic_linear": 2.5, "chain": 3.0, "binary_tree": 2.0,
    }[alg]
    return base * factor


def write_campaign(root: Path, reps: int = 8, noise: float = 0.03, seed: int = 1,
                   model: Callable[[str, int], float] = truth,
                   contexts: tuple[tuple[str, int], ...] = (("bcast", 4),),
                   backend: str = "synthetic") -> Store:
    """A stored exhaustive campaign: every algorithm × size × repetition, lognormal noise."""
    rng = random.Random(seed)
    store = Store(root)
    store.create({"name": "synthetic", "seed": seed, "backend": "synthetic"}, "# synthetic\n",
                 {"format": 1, "campaign": "synthetic", "seed": seed, "backend": "synthetic",
                  "launches": []}, {"cores": 64})
    for rep in range(reps):
        rows = []
        lid = f"{rep:04d}-synthetic"
        for coll, nprocs in contexts:
            for alg, ident in ALGS.items():
                for size in SIZES:
                    v = model(alg, size) * math.exp(rng.gauss(0, noise))
                    rows.append(make_row(
                        campaign="synthetic", launch_id=lid, repetition=rep,
                        backend=backend, source="kernel", mpi="openmpi",
                        mpi_version="5.0.11", collective=coll, algorithm=alg,
                        algorithm_id=ident, segsize=0, fanout=0, selection="mpit",
                        params=json.dumps({"env": {}, "mca": {}, "swept": {}}),
                        nprocs=nprocs, nodes=1, ppn=nprocs, mapping="core", binding="core",
                        size_bytes=size, iterations=100, warmup=10, avg_us=v, min_us=v,
                        max_us=v, median_us=v, validated=False, status="ok"))
        store.write_launch(lid, rows, {"launch_id": lid, "status": "ok"})
    return store


def rules(sel: Selection) -> dict[tuple[str, int], list[tuple[int, str, int | None]]]:
    """What a rules file would say (thresholds and algorithms), without the reporting."""
    return {k: [(c.threshold, c.algorithm, c.algorithm_id) for c in cs]
            for k, cs in sel.tables.items()}


def served(out: Path) -> list[tuple[str, int, int]]:
    con = Store(out).connect()
    try:
        return [(str(a), int(s), int(r)) for a, s, r in con.execute(
            "SELECT algorithm, size_bytes, repetition FROM measurements").fetchall()]
    finally:
        con.close()


# --- racing ------------------------------------------------------------------------------

def test_clearly_slower_algorithm_dropped_at_first_look_default_never() -> None:
    race = Race(64, ("default", "fast", "slow"), RaceConfig(min_reps=3, max_reps=6))
    for rep in range(3):
        race.add("fast", 1.0 + rep * 0.01)
        race.add("slow", 2.0 + rep * 0.01)
        race.add("default", 3.0 + rep * 0.01)  # slower still, but the baseline of the rules
    race.look()
    assert race.dropped == {"slow": 3}
    assert race.alive == ["default", "fast"]
    assert race.wanted() == ["default", "fast"]  # both go on to max_reps for the final test


def test_peeking_correction_needs_more_evidence_at_a_stricter_level() -> None:
    # 3 vs 3, complete separation: one-sided exact p = 1/20 = 0.05.
    assert slower_p([2.0, 2.1, 2.2], [1.0, 1.1, 1.2]) == pytest.approx(0.05)
    strict = RaceConfig(min_reps=3, max_reps=6, alpha_drop=0.05)  # 0.05 / 4 looks per look
    race = Race(64, ("default", "fast", "slow"), strict)
    for rep in range(5):
        race.add("default", 1.0 + rep * 0.01)
        race.add("fast", 0.5 + rep * 0.01)
        race.add("slow", 2.0 + rep * 0.01)
        race.look()
        if rep + 1 < 5:
            assert "slow" not in race.dropped, f"dropped after {rep + 1} repetitions"
    assert race.dropped == {"slow": 5}  # 5 vs 5: p = 1/252 < 0.0125


def _race_to_end(labels: tuple[str, ...], draw: Callable[[str], float],
                 cfg: RaceConfig) -> Race:
    race = Race(64, labels, cfg)
    while not race.done():
        for label in race.wanted():
            race.add(label, draw(label))
        race.look()
    return race


def test_an_algorithm_no_slower_than_the_default_is_dropped_below_alpha_drop() -> None:
    # One candidate against the default, same distribution, looks at 3..8 repetitions:
    # Bonferroni over the 6 looks keeps the chance of ever dropping it below alpha_drop.
    rng = random.Random(2)
    cfg = RaceConfig(min_reps=3, max_reps=8, alpha_drop=0.2)
    races = [_race_to_end(("default", "a"), lambda _: rng.random(), cfg) for _ in range(400)]
    rate = sum(bool(r.dropped) for r in races) / len(races)
    assert rate < 0.2, rate
    assert all(len(r.values["default"]) == 8 for r in races if not r.dropped)


def test_a_strictly_faster_algorithm_is_rarely_dropped_among_many() -> None:
    # The leader is picked from the data, so ties among many candidates do get dropped (no
    # loss: they are tied); the one that is really 5 % faster almost never is.
    rng = random.Random(4)
    labels = ("default", "best", "o1", "o2", "o3", "o4", "o5")
    cfg = RaceConfig(min_reps=3, max_reps=8, alpha_drop=0.2)

    def draw(label: str) -> float:
        return (0.95 if label == "best" else 1.0) * math.exp(rng.gauss(0, 0.05))

    races = [_race_to_end(labels, draw, cfg) for _ in range(300)]
    assert sum("best" in r.dropped for r in races) / len(races) < 0.03
    assert sum(r.leader() == "best" for r in races) / len(races) > 0.8


def test_recommendation_follows_compares_rule() -> None:
    race = Race(64, ("default", "fast"), RaceConfig(min_reps=3, max_reps=6))
    for rep in range(6):
        race.add("default", 1.0 + rep * 0.01)
        race.add("fast", 0.9 + rep * 0.001)
    assert race.recommended() == "fast"  # 6 vs 6, separated: p = 0.002
    close = Race(64, ("default", "fast"), RaceConfig(min_reps=3, max_reps=6))
    for rep in range(6):
        close.add("default", 1.0 + (rep % 2) * 0.1)
        close.add("fast", 0.99 + (rep % 2) * 0.1)
    assert close.recommended() == "default"  # faster median, not significantly


# --- where to measure --------------------------------------------------------------------

def test_coarse_grid_includes_both_ends() -> None:
    assert coarse_indices(21, 4) == [0, 4, 8, 12, 16, 20]
    assert coarse_indices(10, 4) == [0, 4, 8, 9]


def test_replay_finds_the_known_best_with_fewer_measurements(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh")
    run, recorded = replay(store.root, tmp_path / "adaptive", Config(stride=4))
    exhaustive = select(store)
    table = run.selection.tables[("bcast", 4)]
    assert [(c.threshold, c.algorithm, c.algorithm_id) for c in table] == [
        (0, "binomial", 6), (CROSSOVER, "pipeline", 3)]
    assert rules(run.selection) == rules(exhaustive)
    ev = evaluate(recorded, run.selection, exhaustive, run.tally)
    assert all(s.regret == 1.0 for s in ev.sizes) and ev.agreement == 1.0
    assert len(ev.sizes) == len(SIZES)
    assert run.tally.measured == len(served(run.results))
    assert ev.points_saved > 0.6, ev.points_saved
    assert ev.kernel_saved > 0.5, ev.kernel_saved


def test_dominated_algorithms_are_measured_only_on_the_coarse_grid(tmp_path: Path) -> None:
    # 6 repetitions: 4 looks, 0.2 / 4 = 0.05 per look, which 3 vs 3 apart reaches.
    store = write_campaign(tmp_path / "exh", reps=6)
    cfg = Config(race=RaceConfig(min_reps=3), stride=4)
    run, _ = replay(store.root, tmp_path / "adaptive", cfg)
    coarse = {SIZES[i] for i in coarse_indices(len(SIZES), 4)}
    rows = served(run.results)
    for alg in ("basic_linear", "chain", "binary_tree"):  # slower everywhere
        sizes = [s for a, s, _ in rows if a == alg]
        assert set(sizes) == coarse, alg  # never in refinement
        assert all(sizes.count(s) == 3 for s in coarse), alg  # dropped at the first look
    for alg in ("default", "binomial", "pipeline"):
        assert {s for a, s, _ in rows if a == alg} > coarse  # refined around the crossover
    # Repetitions are distinct draws from the recording (sampling without replacement).
    assert len(rows) == len(set(rows))


def test_crossover_is_refined_to_adjacent_sizes_and_agreement_is_skipped(
        tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh")
    run, _ = replay(store.root, tmp_path / "adaptive", Config(stride=4))
    measured = sorted({s for _, s, _ in served(run.results)})
    coarse = {SIZES[i] for i in coarse_indices(len(SIZES), 4)}
    # The winner changes between 512 and 1 KiB: bisection 256 -> 4K, then 1K, then 512.
    assert {512, 1024} <= set(measured)
    assert set(measured) - coarse == {512, 1024}
    # Where neighbours agree, nothing in between is measured (e.g. 2..8 and 16K..512K).
    assert not {2, 4, 8, 32768, 131072, 524288} & set(measured)
    choices = run.tuners[("bcast", 4)].choices()
    assert [choices[s] for s in (256, 512, 1024, 2048)] == [
        "binomial", "binomial", "pipeline", "pipeline"]


def test_label_at_uses_the_last_threshold_at_or_below() -> None:
    table = (Choice(0, "binomial", 6), Choice(1024, "pipeline", 3, 8192))
    assert label_at(table, 1023) == "binomial"
    assert label_at(table, 1024) == "pipeline[seg=8192]"


def test_too_few_repetitions_is_a_user_error(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh", reps=1)
    with pytest.raises(UserError, match="at least 2"):
        replay(store.root, tmp_path / "adaptive")


def test_tune_adaptive_replay_writes_the_rules_file(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    store = write_campaign(tmp_path / "exh")
    rules = tmp_path / "tuned.rules"
    assert main(["tune", str(store.root), "--adaptive", "-o", str(rules)]) == 0
    err = capsys.readouterr().err
    assert "adaptive replay of" in err and "point repetitions" in err
    reading = parse_rules(rules.read_text())
    assert reading.rules is not None and not reading.problems
    bcast = reading.rules.find(7)
    assert bcast is not None
    measured = [c for c in bcast.comms if c.comment.startswith("measured")]
    assert [(r.size, r.alg) for r in measured[0].rules] == [(0, 6), (CROSSOVER, 3)]
    assert (tmp_path / "tuned.rules.adaptive" / "campaign.json").exists()
    # A second replay replaces its own earlier output, but never another folder.
    assert main(["tune", str(store.root), "--adaptive", "-o", str(rules)]) == 0
    assert main(["tune", str(store.root), "--adaptive", "-o", str(rules),
                 "--adaptive-results", str(store.root)]) == 2
    assert "is not an adaptive replay" in capsys.readouterr().err


# --- live, with real Open MPI -----------------------------------------------------------

LIVE_SPEC = """\
[campaign]
name = "adaptive-live"

[measure]
collectives = ["bcast"]
algorithms = ["default", "basic_linear", "binomial", "pipeline"]
sizes = "1:64K"
nprocs = 2
iterations = {{small = 50, large = 5}}
warmup = {{small = 5, large = 1}}

[run]
repetitions = {reps}
timeout = 120
seed = 5
"""


@pytest.mark.mpi
def test_live_adaptive_run_produces_rules_and_resumes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional test only
    spec = tmp_path / "spec.toml"
    spec.write_text(LIVE_SPEC.format(reps=4))
    out = tmp_path / "live"
    mpi = find_mpi()
    cfg = Config(race=RaceConfig(min_reps=2), stride=8)
    run = live(spec, out, mpi, cfg)
    table = run.selection.tables[("bcast", 2)]
    assert table[0].threshold == 0 and table[0].algorithm_id is not None
    assert [c.threshold for c in table] == sorted({c.threshold for c in table})
    rows = served(out)
    # Fewer point repetitions than the exhaustive 4 algorithms × 17 sizes × 4 repetitions.
    assert 0 < len(rows) == run.tally.measured < 4 * 17 * 4
    assert {r for _, _, r in rows} <= set(range(run.tally.rounds))
    assert run.launches == len(list((out / "launches").glob("*.jsonl")))
    # Resume: the same rounds are already stored, nothing new runs, same rules.
    again = live(spec, out, mpi, cfg, resume=True)
    assert rules(again.selection) == rules(run.selection)
    assert len(list((out / "launches").glob("*.jsonl"))) == run.launches
    with pytest.raises(UserError, match="--resume"):
        live(spec, out, mpi, cfg)
    # Through `collbench tune --adaptive`: the rules come out of the tune writer.
    path = tmp_path / "live.rules"
    assert main(["tune", str(spec), "--adaptive", "-o", str(path), "--stride", "8",
                 "--min-reps", "2"]) == 0
    reading = parse_rules(path.read_text())
    assert reading.rules is not None and reading.rules.find(7) is not None
    assert (tmp_path / "live.rules.adaptive" / "launches").is_dir()
