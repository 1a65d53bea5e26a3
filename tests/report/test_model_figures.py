"""Model figures: small multiples (one panel per algorithm, measured vs predicted) and
residuals on a log-ratio axis."""

from __future__ import annotations

import math

from collbench.models.accuracy import Key, PointError
from collbench.report import figures
from collbench.report.models import overlay, residuals

ALGS = ("binomial", "chain", "pipeline", "linear", "knomial")


def _points(over: float) -> list[PointError]:
    """Every algorithm at 4 sizes; the prediction `over` times the measurement (the chain
    algorithm's 1/over times: as far below as the others are above)."""
    out = []
    for a in ALGS:
        for size in (8, 1024, 65536, 1 << 20):
            measured = 2.0 + size / 1000
            ratio = 1 / over if a == "chain" else over
            out.append(PointError(Key("bcast", a, 8, "core", size), measured,
                                  measured * ratio, ratio, abs(ratio - 1) * 100))
    return out


def test_overlay_is_one_panel_per_algorithm_with_one_scale() -> None:
    pts = _points(2.0)
    fig = overlay("bcast np=8", pts, figures.palette(list(ALGS)), "measured", "predicted")
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in shown] == list(ALGS)
    for ax in shown:
        solid, dashed = ax.get_lines()
        assert solid.get_linestyle() == "-" and dashed.get_linestyle() == "--"
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["measured", "predicted"]
    assert len({ax.get_ylim() for ax in shown}) == 1  # shared: panels compare by eye
    first = shown[0].get_lines()
    assert list(first[1].get_ydata()) == [2 * y for y in first[0].get_ydata()]


def test_residuals_are_ratios_on_a_symmetric_log_axis() -> None:
    fig = residuals("bcast np=8", _points(2.0), figures.palette(list(ALGS)))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    assert math.isclose(low * high, 1.0, rel_tol=1e-9) and high > 2  # 1 in the middle
    ys = {line.get_label(): set(line.get_ydata()) for line in ax.get_lines()
          if not line.get_label().startswith("_")}
    assert ys["chain"] == {0.5} and ys["binomial"] == {2.0}
    assert "2×" in [t.get_text() for t in ax.get_yticklabels()]
