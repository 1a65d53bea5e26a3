"""Adaptive tuning, the measurement cutters: screening, the gap and futility drops, one
repetition on exact (simulated) data, the repetition cap and model-guided pruning.

Replays use test_adaptive's synthetic campaign, whose best algorithm per size is known
(binomial below 1 KiB, pipeline from there; the default never best)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from collbench.errors import UserError
from collbench.models.networks import NETWORKS
from collbench.models.p2pfile import read_p2p
from collbench.models.predict import Shape
from collbench.store import Store
from collbench.tune.adaptive import Config, PruneModel, RaceConfig, replay
from collbench.tune.adaptive.evaluate import evaluate
from collbench.tune.adaptive.prune import ModelPruner, Placement
from collbench.tune.adaptive.race import Race
from collbench.tune.adaptive.replay import load
from collbench.tune.select import Options, select
from tests.simgrid_support import needs_smpi, sim_env, smpi_cache, smpi_kernel, smpi_tools
from tests.tune.test_adaptive import ALGS, CROSSOVER, SIZES, rules, served, write_campaign

__all__ = ["sim_env", "smpi_cache", "smpi_kernel", "smpi_tools"]  # fixtures, used by name

FAST = RaceConfig(min_reps=2, screen=1.3, gap=0.05, futile=0.05)
P2P = """format = "collbench-p2p"
version = 1

[levels.core]
latency = "0.5 us"
bandwidth = "5000000000 B/s"

[levels.socket]
latency = "0.8 us"
bandwidth = "4000000000 B/s"
"""


def _race(config: RaceConfig, values: dict[str, list[float]]) -> Race:
    race = Race(1024, tuple(values), config)
    for i in range(max(len(v) for v in values.values())):
        for label, v in values.items():
            if i < len(v) and label in race.alive:
                race.add(label, v[i])
        race.look()
    return race


# --- the drops ---------------------------------------------------------------------------

def test_screen_drops_a_gross_loser_at_the_first_repetition_never_the_default() -> None:
    config = RaceConfig(screen=1.3)
    race = _race(config, {"default": [5.0], "binomial": [2.0], "chain": [2.7],
                          "pipeline": [2.5]})
    assert race.dropped == {"chain": 1}  # 2.7 > 1.3 × 2.0; pipeline 2.5 is not
    assert "default" in race.alive  # 2.5× slower, still kept: the rules need it
    # Screening compares extremes: one fast repetition keeps a candidate in.
    race = _race(config, {"default": [2.0, 2.0], "chain": [2.5, 3.0]})
    assert not race.dropped
    # Without screening, no test can drop anything at one repetition.
    assert not _race(RaceConfig(), {"default": [5.0], "binomial": [1.0],
                                    "chain": [9.0]}).dropped


def test_gap_drops_from_min_reps_on_by_median() -> None:
    config = RaceConfig(min_reps=2, gap=0.05)
    race = _race(config, {"default": [2.0, 2.0], "binomial": [1.0, 1.02],
                          "chain": [1.04, 1.05], "pipeline": [1.08, 1.07]})
    assert race.dropped == {"pipeline": 2}  # 7.5 % above the leader; chain 4.5 % is not
    one = _race(config, {"default": [2.0], "binomial": [1.0], "pipeline": [1.5]})
    assert not one.dropped  # one repetition is below min_reps


def test_futility_drops_what_beats_the_default_by_less_and_ends_the_race() -> None:
    config = RaceConfig(min_reps=2, futile=0.05)
    race = _race(config, {"default": [2.0, 2.0], "binomial": [1.97, 1.95],
                          "pipeline": [1.5, 1.6]})
    assert race.dropped == {"binomial": 2} and not race.done()
    # Every candidate within 5 % of the default, the leader too: the default stays, done.
    race = _race(config, {"default": [2.0, 2.0], "binomial": [1.85, 1.87],
                          "pipeline": [2.0, 2.1]})
    assert race.alive == ["default", "binomial"]  # 7 % faster: binomial still races
    race = _race(config, {"default": [2.0, 2.0], "binomial": [1.97, 1.95],
                          "pipeline": [2.0, 2.1]})
    assert race.alive == ["default"] and race.done() and race.recommended() == "default"


# --- replays ------------------------------------------------------------------------------

def test_fast_settings_keep_the_rules_for_far_less_kernel_time(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh")
    exhaustive = select(store)
    base, recorded = replay(store.root, tmp_path / "base", Config())
    fast, _ = replay(store.root, tmp_path / "fast", Config(FAST))
    assert rules(fast.selection) == rules(exhaustive)
    ev_base = evaluate(recorded, base.selection, exhaustive, base.tally)
    ev = evaluate(recorded, fast.selection, exhaustive, fast.tally)
    assert all(s.relative == 1.0 for s in ev.sizes)
    assert ev.kernel_factor > 1.8 * ev_base.kernel_factor, (ev.kernel_factor,
                                                            ev_base.kernel_factor)
    assert fast.tally.measured == len(served(fast.results))


def test_max_reps_caps_every_point(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh")
    run, _ = replay(store.root, tmp_path / "a", Config(max_reps=6))
    assert max(r for _, _, r in served(run.results)) < 8
    per_point: dict[tuple[str, int], int] = {}
    for alg, size, _ in served(run.results):
        per_point[(alg, size)] = per_point.get((alg, size), 0) + 1
    assert max(per_point.values()) == 6  # 6 against 6 can still be significant
    assert rules(run.selection) == rules(select(store))


def test_simulated_data_is_measured_once_per_point(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "sim", reps=2, noise=0.0, backend="simgrid")
    run, recorded = replay(store.root, tmp_path / "a", Config())
    assert recorded.exact
    points = [(a, s) for a, s, _ in served(run.results)]
    assert len(points) == len(set(points))  # never a second repetition
    table = run.selection.tables[("bcast", 4)]
    assert [(c.threshold, c.algorithm) for c in table] == [(0, "binomial"),
                                                           (CROSSOVER, "pipeline")]
    ev = evaluate(recorded, run.selection, select(store, Options(significance=False)),
                  run.tally)
    assert ev.kernel_factor > 2  # one repetition of two, on part of the sizes


# --- model-guided pruning -----------------------------------------------------------------

def _pruner(tmp_path: Path, error: float) -> ModelPruner:
    (tmp_path / "m.p2p.toml").write_text(P2P)
    labels = ("default", "basic_linear", "chain", "pipeline", "binary_tree", "binomial",
              "not_modelled")
    return ModelPruner(read_p2p(tmp_path / "m.p2p.toml", required_levels=()), Shape(),
                       NETWORKS["mpi"], error, {("bcast", 4): Placement(1, 4, "core")},
                       {("bcast", 4): {lab: (lab, 0, 0) for lab in labels}})


def test_pruning_keeps_what_the_model_error_could_make_a_winner(tmp_path: Path) -> None:
    ctx, labels = ("bcast", 4), ["default", "basic_linear", "pipeline", "binomial",
                                 "not_modelled"]
    tight = _pruner(tmp_path, 0.035)
    pred = {lab: tight.predicted(ctx, 1 << 20, lab) for lab in labels}
    assert pred["not_modelled"] is None and pred["binomial"] and pred["basic_linear"]
    kept = tight(ctx, 1 << 20, labels)
    # at 1 MiB the model costs the binomial tree ~1.5× the linear sends: pruned; pipeline
    # (unsegmented: no better than one message at a time) too; the default never is, nor
    # what the model cannot cost
    assert kept == ["default", "basic_linear", "not_modelled"]
    assert tight.pruned == 2
    loose = _pruner(tmp_path, 0.4)  # 2.05× (pipeline) is within (1 + 0.4) / (1 - 0.4)
    assert loose(ctx, 1 << 20, labels) == labels


def test_replay_with_a_model_never_measures_what_it_pruned(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh")
    (tmp_path / "m.p2p.toml").write_text(P2P)
    run, _ = replay(store.root, tmp_path / "a", Config(),
                    prune=PruneModel(tmp_path / "m.p2p.toml", 0.035))
    assert run.tally.pruned > 0
    pruner = _pruner(tmp_path, 0.035)
    measured = {(a, s) for a, s, _ in served(run.results)}
    for size in {s for _, s in measured}:
        kept = set(pruner(("bcast", 4), size, list(ALGS)))
        assert {a for a, s in measured if s == size} <= kept
    assert {a for a, _ in measured} >= {"default"}


def test_a_model_missing_a_level_is_refused(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh", reps=2)
    (tmp_path / "core.p2p.toml").write_text(P2P.split("[levels.socket]")[0])
    with pytest.raises(UserError, match="level 'socket' is missing"):
        replay(store.root, tmp_path / "a", Config(),
               prune=PruneModel(tmp_path / "core.p2p.toml", 0.035))


@pytest.mark.parametrize("args, message", [
    (["--screen", "0.5"], "--screen: '0.5' is out of range; valid: above 1"),
    (["--futile", "1.5"], "--futile: '1.5' is out of range"),
    (["--prune-error", "1"], "--prune-error: '1' is out of range"),
    (["--prune-model", "missing.p2p.toml"], "--prune-model missing.p2p.toml: no such file"),
])
def test_bad_options_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch, args: list[str],
                                         message: str) -> None:
    store = write_campaign(tmp_path / "exh", reps=2)
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["tune", str(store.root), "--adaptive", "-o", str(tmp_path / "t.rules"),
                     *args])
    except SystemExit as e:  # argparse's own refusal
        code = e.code  # type: ignore[assignment]
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_tally_counts_match_the_folder(tmp_path: Path) -> None:
    store = write_campaign(tmp_path / "exh")
    run, _ = replay(store.root, tmp_path / "a", Config(FAST, stride=4))
    assert run.tally.measured == len(served(run.results)) < len(SIZES) * len(ALGS) * 8
    assert Store(run.results).campaign()["replay_of"] == str(store.root)


# --- live, simulated (real SimGrid) -------------------------------------------------------

# jupiter's levels as a simulated ping-pong fits them (collbench model p2p)
JUPITER_P2P = """format = "collbench-p2p"
version = 1

[levels.core]
latency = "0.2225 us"
bandwidth = "6450000000 B/s"

[levels.socket]
latency = "0.5428 us"
bandwidth = "5680000000 B/s"

[levels.node]
latency = "1.0713 us"
bandwidth = "12176000000 B/s"
"""
SIM_SPEC = """
[campaign]
name = "adaptive-live-sim"
[measure]
collectives = ["bcast"]
algorithms = ["default", "basic_linear", "binomial", "pipeline", "scatter_allgather"]
sizes = [1, 64, 4096, 65536, 1048576]
nprocs = [4]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
repetitions = 2
seed = 3
[run.simgrid]
platform = "jupiter"
"""


@needs_smpi
@pytest.mark.slow
def test_live_simulated_run_measures_once_prunes_and_matches_exhaustive(
        tmp_path: Path, sim_env: Path) -> None:
    from collbench.catalog.mpi import find_mpi
    from collbench.tune.adaptive import live

    spec = tmp_path / "sim.toml"
    spec.write_text(SIM_SPEC)
    (tmp_path / "j.p2p.toml").write_text(JUPITER_P2P)
    assert main(["run", str(spec), "-o", str(tmp_path / "exh")]) == 0
    options = Options(significance=False)
    exhaustive = select(Store(tmp_path / "exh"), options)
    run = live(spec, tmp_path / "adaptive", find_mpi(), Config(), options,
               prune=PruneModel(tmp_path / "j.p2p.toml", 0.035))
    points = [(a, s) for a, s, _ in served(run.results)]
    assert len(points) == len(set(points)) < 5 * 5  # once each, and not every point
    assert run.tally.pruned > 0
    recorded = load(Store(tmp_path / "exh"))
    ev = evaluate(recorded, run.selection, exhaustive, run.tally)
    assert all(s.relative <= 1.0 + 1e-9 for s in ev.sizes), ev.sizes
    assert ev.kernel_factor > 2
