"""analyse.against: pairing two sources, errors per point and algorithm, selection,
crossovers, rendering."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from collbench.analyse.against import against, render
from collbench.errors import UserError
from collbench.models.accuracy import Key

SIZES = (1, 16, 256, 4096, 65536)


def side(times: dict[str, list[float]], default: str | None = None) -> dict[Key, float]:
    out = {Key("bcast", alg, 8, "core", s): t for alg, ts in times.items()
           for s, t in zip(SIZES, ts, strict=True)}
    if default:
        out |= {Key("bcast", "default", 8, "core", s): t
                for s, t in zip(SIZES, times[default], strict=True)}
    return out


# binomial wins small sizes, pipeline from 4096 on
A = side({"binomial": [2, 3, 5, 40, 400], "pipeline": [6, 7, 9, 30, 200]}, default="binomial")


def test_identical_sources_have_no_error() -> None:
    r = against(A, dict(A), "a", "b")
    assert r.overall.median_abs_pct == 0 and r.overall.p95_abs_pct == 0
    assert r.same_fraction == 1.0 and r.penalty is not None and r.penalty.median_abs_pct == 0
    assert len(r.selections) == len(SIZES)  # default takes no part in selection
    assert [s.measured.at_bytes for s in r.shifts] == [4096]
    assert r.shifts[0].predicted_at_bytes == 4096 and r.shifts[0].factor == 1.0


def test_errors_ratios_and_penalty() -> None:
    # B: binomial 10 % slow everywhere; pipeline wins one size too early (256)
    b = side({"binomial": [2.2, 3.3, 5.5, 44, 440], "pipeline": [6, 7, 5, 30, 200]})
    r = against(A, b, "a", "b")
    assert (r.only_a, r.only_b) == (len(SIZES), 0)  # A's default has no partner
    errs = {x.algorithm: x for x in r.algorithms}
    assert errs["binomial"].median_abs_pct == pytest.approx(10)
    assert errs["binomial"].median_ratio == pytest.approx(1.1)
    assert errs["pipeline"].median_abs_pct == 0
    wrong = [s for s in r.selections if not s.same]
    assert [(s.size_bytes, s.predicted_best) for s in wrong] == [(256, "pipeline")]
    assert wrong[0].penalty == pytest.approx(9 / 5)
    assert r.same_fraction == pytest.approx(4 / 5)
    (shift,) = r.shifts
    assert (shift.measured.at_bytes, shift.predicted_at_bytes) == (4096, 256)
    assert shift.factor == pytest.approx(1 / 16)


def test_renders_every_format() -> None:
    b = side({"binomial": [2.2, 3.3, 5.5, 44, 440], "pipeline": [6, 7, 5, 30, 200]})
    r = against(A, b, "a", "b")
    table = render(r, "table")
    assert "same best algorithm at 80.0 % of 5 configurations" in table
    assert "binomial -> pipeline" in table and "4K" in table and "256" in table
    md = render(r, "markdown")
    assert "| collective | algorithm |" in md
    rows = list(csv.DictReader(io.StringIO(render(r, "csv"))))
    assert len(rows) == 2 * len(SIZES) and {"a_us", "b_us", "ratio", "abs_pct"} <= set(rows[0])
    data = json.loads(render(r, "json"))
    assert data["selection"]["same_fraction"] == pytest.approx(0.8)
    assert data["crossovers"][0]["predicted_at_bytes"] == 256


def test_nothing_in_common_is_one_line() -> None:
    other = {Key("gather", "binomial", 4, "node", 1): 1.0}
    with pytest.raises(UserError, match=r"no point in common .* \(A: collectives bcast"):
        against(A, other, "a", "b")


def test_single_algorithm_has_no_selection() -> None:
    only = side({"binomial": [2, 3, 5, 40, 400]})
    r = against(only, only, "a", "b")
    assert r.selections == () and r.penalty is None
    assert "no selection measures" in render(r, "table")


def test_zero_values_are_counted_and_named_not_only_in_a() -> None:
    # B gives 0 us at one pipeline point (error 100 %); A has 0 us at one binomial point
    # (error undefined): both are paired points, never "only in A".
    a = dict(A)
    a[Key("bcast", "binomial", 8, "core", 1)] = 0.0
    b = side({"binomial": [2, 3, 5, 40, 400], "pipeline": [6, 7, 9, 0.0, 200]})
    r = against(a, b, "a", "b")
    assert (r.only_a, r.only_b) == (len(SIZES), 0)  # A's default only
    assert [p.key.size_bytes for p in r.undefined] == [1]
    (zero,) = r.zero_b()
    assert (zero.key.algorithm, zero.key.size_bytes, zero.abs_pct) == ("pipeline", 4096, 100)
    errs = {x.algorithm: x for x in r.algorithms}
    assert errs["pipeline"].points == 5 and errs["binomial"].points == 4
    # sizes 1 and 4096 hold a 0 us value: no best algorithm is claimed there
    assert sorted(s.size_bytes for s in r.selections) == [16, 256, 65536]
    text = render(r, "table")
    assert "10 paired points (5 only in A, 0 only in B; 1 with A = 0 us: error undefined" \
        in text and "1 with B = 0 us: error 100 %" in text
    assert "undefined (A = 0)" in text and "2 configurations with a 0 us value" in text
    rows = list(csv.DictReader(io.StringIO(render(r, "csv"))))
    assert len(rows) == 10 and sum(x["abs_pct"] == "" for x in rows) == 1
    data = json.loads(render(r, "json"))
    assert data["zero_b"] == 1 and data["zero_a"][0]["size_bytes"] == 1


def test_every_shared_point_zero_in_a_is_one_line() -> None:
    a = {Key("bcast", "binomial", 8, "core", 1): 0.0}
    with pytest.raises(UserError, match="every point it shares with b is 0 us"):
        against(a, {Key("bcast", "binomial", 8, "core", 1): 1.0}, "a", "b")


def test_compare_against_keeps_zero_microsecond_rows_of_folders(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from collbench.cli import main
    from tests.models.folders import _folder, row

    def folder(name: str, times: dict[int, float]) -> Path:
        rows = [row(collective="bcast", algorithm="binomial", algorithm_id=6, nprocs=4,
                    ppn=4, size_bytes=s, avg_us=t) for s, t in times.items()]
        return _folder(tmp_path / name, name, {"l0": rows})

    real = folder("real", {1: 2.0, 2: 2.0, 4: 0.0})
    sim = folder("sim", {1: 0.0, 2: 2.5, 4: 3.0})
    assert main(["compare", str(real), "--against", str(sim)]) == 0
    out = capsys.readouterr().out
    assert "3 paired points (0 only in A, 0 only in B; 1 with A = 0 us" in out
    assert "1 with B = 0 us: error 100 %" in out


def test_errors_per_size_band_and_regret_wording() -> None:
    # SIZES 1, 16, 256 are <= 1 KiB; 4096 is 1-64 KiB; 65536 is >= 64 KiB.
    b = side({"binomial": [2.2, 3.3, 5.5, 60, 400], "pipeline": [6, 7, 9, 30, 300]})
    r = against(A, b, "a", "b")
    bands = {(x.collective, x.algorithm, x.band): x for x in r.bands}
    small = bands[("bcast", "binomial", "<= 1 KiB")]
    assert small.points == 3 and small.median_abs_pct == pytest.approx(10)
    assert bands[("bcast", "binomial", "1-64 KiB")].median_abs_pct == pytest.approx(50)
    assert bands[("bcast", "pipeline", ">= 64 KiB")].median_abs_pct == pytest.approx(50)
    overall = bands[("", "", "<= 1 KiB")]
    assert overall.points == 6 and overall.median_abs_pct == pytest.approx(5)
    text = render(r, "table")
    assert "per size band, median / p95 % (points): <= 1 KiB 5.00 / " in text
    assert "Error per size band" in text and "the regret of choosing by B" in text
    # 4096: B picks pipeline (A's best, 30 us); 65536: B picks pipeline (A's best too)
    assert r.same_fraction == 1.0
    assert {b["band"] for b in json.loads(render(r, "json"))["bands"]} == \
        {"<= 1 KiB", "1-64 KiB", ">= 64 KiB"}


def test_segmented_labels_are_predicted_at_their_segment_size(tmp_path: Path) -> None:
    """A forced segment size is scored with the schedule of that segment size (it was left
    out as "not modelled"): rows made by the model itself have no error, and a segment size
    the row does not carry would (1 MiB in 1 KiB segments against unsegmented differs)."""
    from collbench.analyse.against import predicted_points
    from collbench.analyse.compare import algorithm_label
    from collbench.models.predict import Shape, predict_point, topology
    from collbench.store import Store
    from tests.models.folders import _folder, row
    from tests.report.test_explain import MODEL

    topo = topology(8, 1, 8, "core", Shape(2, 12))
    sizes = (64, 65536, 1 << 20)
    rows = [row(collective="bcast", algorithm="pipeline", algorithm_id=3, segsize=seg,
                nprocs=8, ppn=8, size_bytes=s, source="kernel", backend="local",
                avg_us=predict_point(MODEL, topo, "bcast", "pipeline", s, segsize=seg)[0])
            for seg in (0, 1024) for s in sizes]
    real = _folder(tmp_path / "real", "real", {"l0": rows})
    got, notes = predicted_points(Store(real), MODEL)
    assert notes == []
    seg = algorithm_label("pipeline", 1024, 0)
    assert {k.algorithm for k in got} == {"pipeline", seg}
    unsegmented = predict_point(MODEL, topo, "bcast", "pipeline", 1 << 20)[0]
    assert got[Key("bcast", seg, 8, "core", 1 << 20)] != pytest.approx(unsegmented)
    r = against(read_points_of(real), got, "real", "model")
    assert r.overall.points == 6 and r.overall.median_abs_pct == pytest.approx(0, abs=1e-6)


def read_points_of(folder: Path) -> dict[Key, float]:
    from collbench.analyse.against import read_points
    from collbench.store import Store

    return read_points(Store(folder))
