"""The spread figure's clipped values: each named at the edge, no two labels overlapping."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg

from collbench.analyse import PointStat, compare
from collbench.report import figures
from collbench.report.spread import spread
from collbench.store import Store
from tests.report import make_results

ALGS = ("default", "binomial", "pipeline", "chain", "linear")


def wild(points: list[PointStat], sizes: int, below: bool) -> list[PointStat]:
    """One repetition of every non-baseline algorithm far above the rest (every other one
    far below, with `below`)."""
    out = []
    for p in points:
        if p.label != "default" and p.size_bytes in sorted({q.size_bytes for q in points})[
                :sizes]:
            k = ALGS.index(p.label)
            factor = 1 / (500.0 * k) if below and k % 2 == 0 else 500.0 * k
            p = replace(p, values=(*p.values[:-1], p.values[-1] * factor))
        out.append(p)
    return out


def check(tmp_path: Path, sizes: tuple[int, ...], below: bool) -> tuple[int, int]:
    """(labels drawn, clipped values they name); asserts that no two labels overlap."""
    c = compare(Store(make_results(tmp_path / "r", repetitions=4, sizes=sizes,
                                   algorithms=ALGS, nprocs=(2,))))
    fig = spread("t", wild(list(c.points), len(sizes), below), list(ALGS), "default",
                 figures.palette(list(ALGS)))
    ax = fig.axes[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    counts = [int(m.group(1)) if (m := re.search(r"\((\d+)\)$", t.get_text())) else 1
              for t in ax.texts]
    assert all(re.match(r"^[\d.e+-]+×( \(\d+\))?$", t.get_text()) for t in ax.texts)
    return len(ax.texts), sum(counts)


def test_few_sizes_name_every_clipped_value(tmp_path: Path) -> None:
    labels, named = check(tmp_path, (64, 4096), below=True)
    assert named == 4 * 2  # every non-baseline algorithm at both sizes
    assert labels == named  # room enough: one label each


def test_crowded_marks_share_a_label_and_never_overlap(tmp_path: Path) -> None:
    sizes = tuple(1 << k for k in range(0, 22))
    labels, named = check(tmp_path, sizes, below=False)
    assert named == 4 * len(sizes)  # nothing clipped goes unnamed...
    assert labels < named  # ...but crowded ones share a label
