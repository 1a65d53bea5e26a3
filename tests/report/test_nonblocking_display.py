"""Non-blocking figures under SimGrid: overlap is shown as not modelled, never as 100 %."""

from __future__ import annotations

from collbench.report.nonblocking import NOT_MODELLED, NbPoint, _table, overlap


def _points(simulated: bool) -> list[NbPoint]:
    return [NbPoint("default t=0", "default", 0, size, 3,
                    {"overlap_pct": 100.0, "overall_us": 2.0 * size, "pure_us": 1.0 * size},
                    simulated) for size in (8, 1024, 65536)]


def test_simulated_overlap_is_not_drawn_but_said() -> None:
    fig = overlap("ibcast np=16", _points(True))
    ax = fig.axes[0]
    assert ax.get_lines() == [] and ax.get_legend() is None
    assert any(NOT_MODELLED in t.get_text() for t in ax.texts)
    measured = overlap("ibcast np=2", _points(False)).axes[0]
    assert [list(line.get_ydata()) for line in measured.get_lines()] == [[100.0] * 3]
    assert len(measured.texts) == 0


def test_simulated_overlap_cells_say_not_modelled() -> None:
    md, csv = _table(_points(True))
    assert md.count("not modelled") == 3 and "100.00" not in md
    header, first = csv.splitlines()[:2]
    assert first.split(",")[header.split(",").index("overlap_pct")] == ""
    md, _ = _table(_points(False))
    assert "not modelled" not in md and md.count("100.00") == 3
