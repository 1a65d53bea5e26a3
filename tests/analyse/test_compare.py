"""compare() over results folders built by hand, and the `compare` command's outputs."""

import argparse
import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from collbench.analyse import algorithm_label, compare
from collbench.analyse.render import render
from collbench.commands.compare import add_parser
from collbench.errors import UserError
from collbench.records import make_row
from collbench.store import Store

BASE_5 = [10.0, 11.0, 12.0, 10.5, 11.5]
FAST_5 = [5.0, 5.5, 6.0, 5.2, 5.8]


def forced(algorithm: str) -> str:
    """params as the runner writes them; forcing MCA keys differ per algorithm."""
    mca = {} if algorithm == "default" else {
        "coll_tuned_use_dynamic_rules": "1", "coll_tuned_bcast_algorithm": "6",
        "coll_eager_limit": "4096"}
    if algorithm == "default":
        mca = {"coll_eager_limit": "4096"}
    return json.dumps({"env": {}, "mca": mca, "swept": {}}, sort_keys=True)


def row(rep: int, algorithm: str, size: int, avg: float, *, segsize: int = 0,
        status: str = "ok", iterations: int = 1000, nprocs: int = 2,
        collective: str = "bcast") -> dict[str, Any]:
    ok = status == "ok"
    return make_row(
        campaign="t", launch_id=f"r{rep}-{algorithm}-{segsize}", repetition=rep,
        collective=collective, algorithm=algorithm, segsize=segsize, fanout=0,
        params=forced(algorithm), nprocs=nprocs, nodes=1, ppn=nprocs, mapping="core",
        binding="core", size_bytes=size, iterations=iterations, warmup=10,
        avg_us=avg if ok else None, min_us=avg * 0.9 if ok else None,
        max_us=avg * 1.1 if ok else None, median_us=avg if ok else None, status=status)


def make_store(tmp_path: Path, rows: Sequence[dict[str, Any]], cores: int = 64) -> Store:
    store = Store(tmp_path / "res")
    store.create({"name": "t", "seed": 1}, "", {"launches": []}, {"cores": cores})
    by_launch: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_launch.setdefault(r["launch_id"], []).append(r)
    for lid, rs in by_launch.items():
        store.write_launch(lid, rs, {"status": "ok"})
    return store


def two_algorithms(base: list[float], fast: list[float], size: int = 1024) -> list[dict[str, Any]]:
    return ([row(i, "default", size, v) for i, v in enumerate(base)]
            + [row(i, "binomial", size, v) for i, v in enumerate(fast)])


def test_five_repetitions_halve_the_time_significantly(tmp_path: Path) -> None:
    c = compare(make_store(tmp_path, two_algorithms(BASE_5, FAST_5)))
    assert (c.stat, c.baseline, c.repetitions) == ("avg_us", "default", 5)
    (r,) = c.ratios
    assert r.point.label == "binomial" and r.baseline.label == "default"
    assert r.ratio == pytest.approx(5.5 / 11)  # medians over repetitions
    assert r.p_value == pytest.approx(2 / 252)  # one comparison: Holm changes nothing
    assert r.ci_low is not None and r.ci_high is not None and r.ci_high < 1
    assert r.significant is True
    (b,) = c.best
    assert (b.winner.label, b.recommended, b.significant) == ("binomial", "binomial", True)
    assert b.ratio == pytest.approx(0.5)
    assert b.key == ("bcast", 2, 1, 2, "core", "core", '{"mca": {"coll_eager_limit": "4096"}}',
                     1024)
    base = next(p for p in c.points if p.label == "default")
    assert base.values == tuple(BASE_5) and base.value == 11.0
    assert base.min_us == pytest.approx(9.0) and base.max_us == pytest.approx(13.2)
    assert base.ci_low == 10.0 and base.ci_high == 12.0  # n=5: only [min, max] ...
    assert base.ci_coverage == pytest.approx(1 - 2 / 32)  # ... covering 93.75 %


def test_three_repetitions_cannot_be_significant_and_say_so(tmp_path: Path) -> None:
    # Exact Mann-Whitney, 3 vs 3: the smallest two-sided p is 2/20 = 0.1 > 0.05.
    store = make_store(tmp_path, two_algorithms([10.0, 11.0, 12.0], [5.0, 5.5, 6.0]))
    c = compare(store)
    (r,) = c.ratios
    assert r.ratio == pytest.approx(0.5)
    assert r.p_value == pytest.approx(0.1)
    assert r.significant is False
    (b,) = c.best
    assert b.winner.label == "binomial"
    assert (b.recommended, b.note) == ("default", "no significant difference")
    (w,) = c.ranges
    assert (w.algorithm, w.fallback) == ("default", True)
    text = render(c, "table")
    assert "1K default: baseline (no significant difference)" in text
    assert "n.s." in text
    assert any("only 3 repetitions" in w.problem for w in c.warnings)


def test_best_and_merged_win_ranges(tmp_path: Path) -> None:
    # binomial halves the time up to 8 B, pipeline from 16 B on, nothing wins at 128 B.
    rows = []
    for size in (1, 2, 4, 8, 16, 32, 64, 128):
        rows += [row(i, "default", size, v) for i, v in enumerate(BASE_5)]
        bino = FAST_5 if size <= 8 else [v * 2 for v in BASE_5]
        pipe = FAST_5 if 16 <= size <= 64 else [v + 0.1 for v in BASE_5]
        if size == 128:
            bino = [v + 0.01 for v in BASE_5]
        rows += [row(i, "binomial", size, v) for i, v in enumerate(bino)]
        rows += [row(i, "pipeline", size, v, segsize=8192) for i, v in enumerate(pipe)]
    c = compare(make_store(tmp_path, rows))
    assert [(r.algorithm, r.size_from, r.size_to, r.fallback) for r in c.ranges] == [
        ("binomial", 1, 8, False), ("pipeline[seg=8192]", 16, 64, False),
        ("default", 128, 128, False)]
    # Two algorithms per size: Holm doubles the smallest p.
    r = next(r for r in c.ratios if r.point.size_bytes == 1 and r.point.label == "binomial")
    assert r.p_raw == pytest.approx(2 / 252) and r.p_value == pytest.approx(4 / 252)
    best = {b.key[7]: b for b in c.best}
    assert best[128].winner.label == "default" and best[128].recommended == "default"
    assert "1–8 binomial, 16–64 pipeline[seg=8192], 128 default" in render(c, "table")


def test_faster_but_untested_alternative_rule(tmp_path: Path) -> None:
    # "fast" wins on its one repetition; "binomial" is significantly faster on 5.
    rows = [*two_algorithms(BASE_5, [v * 1.2 for v in FAST_5]), row(0, "fast", 1024, 1.0)]
    c = compare(make_store(tmp_path, rows))
    (b,) = c.best
    assert b.winner.label == "fast" and b.significant is None
    assert b.recommended == "fast" and "untested" in b.note
    fast = next(r for r in c.ratios if r.point.label == "fast")
    assert (fast.p_value, fast.significant, fast.ci_low) == (None, None, None)


def test_fastest_not_significant_but_another_is(tmp_path: Path) -> None:
    # "erratic" has the lowest median (5) but two of five repetitions at 30 us: not
    # significantly faster. "steady" (median 9.2) is below every baseline repetition:
    # p = 2/252, times 2 for Holm = 0.016 < 0.05. The rule recommends "steady".
    rows = (two_algorithms(BASE_5, [9.0, 9.1, 9.2, 9.3, 9.4])
            + [row(i, "erratic", 1024, v) for i, v in enumerate([5.0, 5.0, 5.0, 30.0, 30.0])])
    rows = [dict(r, algorithm="steady") if r["algorithm"] == "binomial" else r for r in rows]
    c = compare(make_store(tmp_path, rows))
    (b,) = c.best
    assert (b.winner.label, b.significant, b.recommended) == ("erratic", False, "steady")
    assert b.note == "erratic not significantly faster than default; steady is"
    steady = next(r for r in c.ratios if r.point.label == "steady")
    assert steady.p_value == pytest.approx(4 / 252) and steady.significant is True


def test_single_repetition_has_no_statistics_and_says_so(tmp_path: Path) -> None:
    store = make_store(tmp_path, two_algorithms([10.0], [5.0]))
    c = compare(store)
    assert c.repetitions == 1
    (r,) = c.ratios
    assert (r.ratio, r.ci_low, r.ci_high, r.p_value, r.significant) == (0.5, None, None, None,
                                                                         None)
    assert c.points[0].ci_low is None
    assert c.best[0].recommended == "binomial"
    assert c.notice is not None
    # One algorithm against the baseline: 4 repetitions give a smallest p of 2/70 < 0.05.
    for fmt in ("table", "markdown", "json"):
        assert "1 repetition: no confidence intervals or significance; run with " \
               "run.repetitions >= 4" in render(c, fmt)


def test_forcing_parameters_do_not_split_the_context(tmp_path: Path) -> None:
    c = compare(make_store(tmp_path, two_algorithms(BASE_5, FAST_5)))
    assert len({p.context for p in c.points}) == 1
    assert c.points[0].params == '{"mca": {"coll_eager_limit": "4096"}}'


def test_other_statistic_and_filters(tmp_path: Path) -> None:
    rows = [*two_algorithms(BASE_5, FAST_5),
            row(0, "default", 1, 3.0, nprocs=4, collective="reduce")]
    store = make_store(tmp_path, rows)
    c = compare(store, stat="max", collective="bcast", nprocs=2)
    assert c.stat == "max_us"
    assert {p.collective for p in c.points} == {"bcast"}
    assert c.points[0].value == pytest.approx(11 * 1.1)
    with pytest.raises(UserError, match=r"no measurements of collective 'bcst'.*did you mean"):
        compare(store, collective="bcst")
    with pytest.raises(UserError, match=r"no measurements with nprocs=8.*present: 2"):
        compare(store, collective="bcast", nprocs=8)


def test_markdown_csv_json(tmp_path: Path) -> None:
    c = compare(make_store(tmp_path, two_algorithms(BASE_5, FAST_5)))
    md = render(c, "markdown")
    assert ("| size | algorithm | n | median_avg_us | CI | ratio | effect | p | verdict |"
            in md)
    assert "|---|" in md
    assert "| 1K | binomial | 5 | 5.50 | [5.00, 6.00]† | 0.5 |" in md
    assert "| 2.00 ± 0.30 × faster than default |" in md and "faster |" in md
    rows = list(csv.DictReader(io.StringIO(render(c, "csv"))))
    assert [(r["algorithm"], r["median_avg_us"], r["is_best"]) for r in rows] == [
        ("default", "11.0", "false"), ("binomial", "5.5", "true")]
    assert rows[1]["effect"] == "2.00 ± 0.30 × faster than default"
    assert rows[1]["significant"] == "true" and float(rows[1]["p_value"]) < 0.01
    data = json.loads(render(c, "json"))
    assert data["stat"] == "avg_us" and data["method"]["test"].startswith("exact")
    assert data["best"][0]["key"]["size_bytes"] == 1024
    assert data["ratios"][0]["point"]["label"] == "binomial"
    assert data["points"][0]["values"] == BASE_5


def test_baseline_resolution_and_errors(tmp_path: Path) -> None:
    rows = two_algorithms(BASE_5, FAST_5) + [row(i, "pipeline", 1024, 9.0, segsize=8192)
                                             for i in range(5)]
    store = make_store(tmp_path, rows)
    assert compare(store, baseline="pipeline").baseline == "pipeline[seg=8192]"
    assert compare(store, baseline="binomial").baseline == "binomial"
    with pytest.raises(UserError, match=r"'binomal' was not measured.*valid: an algorithm \("
                                        r"binomial, default, pipeline\[seg=8192\]\) \(no "
                                        r"other column has several values here\) "
                                        r"\(did you mean binomial\?\)"):
        compare(store, baseline="binomal")
    with pytest.raises(UserError, match="--stat 'mean' is not valid"):
        compare(store, stat="mean")
    with pytest.raises(UserError, match=r"--confidence 1\.5"):
        compare(store, confidence=1.5)


def test_ambiguous_baseline(tmp_path: Path) -> None:
    rows = [row(0, "pipeline", 1, 1.0, segsize=s) for s in (1024, 8192)]
    with pytest.raises(UserError, match=r"ambiguous.*pipeline\[seg=1024\]"):
        compare(make_store(tmp_path, rows), baseline="pipeline")


def test_empty_and_failed_only_folders(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no measurements stored yet"):
        compare(make_store(tmp_path, []))
    with pytest.raises(UserError, match="not a collbench results folder"):
        compare(Store(tmp_path / "nowhere"))
    failed = make_store(tmp_path / "f", [row(0, "default", 1, 1.0, status="failed")])
    with pytest.raises(UserError, match=r"no ok measurements.*statuses present: failed"):
        compare(failed)


def test_missing_baseline_at_a_size_is_a_warning(tmp_path: Path) -> None:
    rows = two_algorithms(BASE_5, FAST_5) + [row(i, "binomial", 2048, v)
                                             for i, v in enumerate(FAST_5)]
    c = compare(make_store(tmp_path, rows))
    b2048 = next(b for b in c.best if b.key[7] == 2048)
    assert (b2048.ratio, b2048.recommended, b2048.note) == (None, "binomial",
                                                            "no baseline measured")
    assert any("baseline default not measured" in w.problem for w in c.warnings)


def test_oversubscription_read_from_provenance(tmp_path: Path) -> None:
    rows = two_algorithms(BASE_5, FAST_5)
    c = compare(make_store(tmp_path, rows, cores=1))
    assert any("oversubscribed" in w.problem for w in c.warnings)
    c = compare(make_store(tmp_path / "b", rows, cores=2))
    assert not any("oversubscribed" in w.problem for w in c.warnings)


def test_algorithm_label() -> None:
    assert algorithm_label("binomial", 0, 0) == "binomial"
    assert algorithm_label("pipeline", 8192, 0) == "pipeline[seg=8192]"
    assert algorithm_label("chain", 8192, 4) == "chain[seg=8192,fanout=4]"


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="collbench")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = int(args.func(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = make_store(tmp_path, two_algorithms(BASE_5, FAST_5, size=64))
    code, out, _ = run_cli(["compare", str(store.root), "--stat", "median"], capsys)
    assert code == 0
    assert out.startswith("# median_median_us = median over the ok repetitions (launches) "
                          "of median_us (the median over the timed iterations")
    assert "winners: 64 binomial" in out
    code, out, err = run_cli(["compare", str(store.root), "--format", "csv"], capsys)
    assert out.splitlines()[0].startswith("collective,nprocs,") and err == ""
    single = make_store(tmp_path / "one", two_algorithms([10.0], [5.0]))
    code, out, err = run_cli(["compare", str(single.root), "--format", "csv"], capsys)
    assert len(out.splitlines()) == 3  # header + 2 points: notices go to stderr
    assert "collbench: 1 repetition: no confidence intervals" in err
    with pytest.raises(UserError, match=r"--stat 'mean' is not valid; valid: avg, median, "
                                        r"min, max, completion, overall"):
        run_cli(["compare", str(store.root), "--stat", "mean"], capsys)


def test_warnings_are_one_line_each_worst_first_and_all_on_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 3 repetitions on 1 core (oversubscribed, too few repetitions), a baseline missing at
    # 512, failed points, repetitions 100× apart, and few timed iterations: one line each.
    rows = []
    for n in (2, 4):
        for size in (64, 128, 256, 512):
            rows += [row(i, "binomial", size, v, nprocs=n, iterations=5)
                     for i, v in enumerate((1.0, 10.0, 100.0))]
            rows += [row(3, "binomial", size, 1.0, nprocs=n, status="failed")]
            if size < 512:
                rows += [row(i, "default", size, v, nprocs=n)
                         for i, v in enumerate(BASE_5[:3])]
    store = make_store(tmp_path, rows, cores=1)
    every = compare(store).warnings
    assert len(every) > 5
    _, out, _ = run_cli(["compare", str(store.root)], capsys)
    shown = out.split("warnings:\n", 1)[1].splitlines()
    assert len(shown) == 6 and shown[-1].strip() == (f"{len(every) - 5} more warnings; --all "
                                                     "shows every one")
    assert all(";" in ln and "\n" not in ln for ln in shown[:5])
    _, out, _ = run_cli(["compare", str(store.root), "--all"], capsys)
    assert len(out.split("warnings:\n", 1)[1].splitlines()) == len(every)
    _, _, err = run_cli(["compare", str(store.root), "--format", "csv"], capsys)
    assert err.count("collbench: warning: ") == 5 and "--all shows every one" in err
