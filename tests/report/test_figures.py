"""The report's figures: the matplotlib objects they return and the files they write."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy
import pytest
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from collbench.analyse import Comparison, PointStat, compare
from collbench.report import figures
from collbench.store import Store
from tests.report import SIZES, make_results

PNG = b"\x89PNG\r\n\x1a\n"
LABELS = ["default", "binomial", "pipeline"]


@pytest.fixture(scope="module")
def comp(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare(Store(make_results(tmp_path_factory.mktemp("f") / "res")))


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare(Store(make_results(tmp_path_factory.mktemp("s") / "res", repetitions=1)))


def block(c: Comparison, nprocs: int = 2) -> list[PointStat]:
    return [p for p in c.points if p.nprocs == nprocs]


def test_latency_is_log_log_with_one_line_and_one_band_per_algorithm(comp: Comparison) -> None:
    fig = figures.latency("bcast np=2", block(comp), figures.palette(LABELS), "avg")
    (ax,) = fig.axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    lines = ax.get_lines()
    assert sorted(str(line.get_label()) for line in lines) == sorted(LABELS)
    assert all(len(line.get_xdata()) == len(SIZES) for line in lines)  # type: ignore[arg-type]
    assert len(ax.collections) == len(LABELS)  # the CI bands
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "64", "4K", "64K", "1M"]
    assert "avg" in ax.get_ylabel()


def test_latency_band_is_min_to_max_over_ranks_with_one_repetition(single: Comparison) -> None:
    points = block(single)
    fig = figures.latency("t", points, figures.palette(LABELS), "avg")
    band = numpy.asarray(fig.axes[0].collections[0].get_paths()[0].vertices, dtype=float)
    default = [p for p in points if p.label == "default"]
    assert band[:, 1].min() == pytest.approx(min(p.min_us or 0 for p in default))
    assert band[:, 1].max() == pytest.approx(max(p.max_us or 0 for p in default))


def test_barrier_sizes_of_zero_get_bars(comp: Comparison) -> None:
    from dataclasses import replace

    points = [replace(p, size_bytes=0) for p in block(comp) if p.size_bytes == 1]
    fig = figures.latency("barrier", points, figures.palette(LABELS), "avg")
    assert len(fig.axes[0].patches) == len(LABELS)


def test_heatmap_centres_a_log_colour_scale_on_one_and_hatches_non_significant(
        comp: Comparison) -> None:
    ratios = [r for r in comp.ratios if r.point.nprocs == 2]
    assert any(r.significant for r in ratios) and not all(r.significant for r in ratios)
    fig = figures.heatmap("bcast np=2", ratios, "default", comp.repetitions)
    ax = fig.axes[0]
    mesh = ax.collections[0]
    norm = mesh.norm
    assert isinstance(norm, LogNorm)
    assert norm.vmin is not None and norm.vmax is not None
    assert norm.vmin * norm.vmax == pytest.approx(1.0)  # 1 is the centre of the colours
    assert [t.get_text() for t in ax.get_yticklabels()] == ["binomial", "pipeline"]
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == sum(1 for r in ratios if not r.significant)
    texts = {t.get_text() for t in ax.texts}
    assert f"{ratios[0].ratio:.2f}" in texts  # numbers in cells
    assert "repetition" not in ax.get_title()


def test_heatmap_with_one_repetition_says_so(single: Comparison) -> None:
    fig = figures.heatmap("t", single.ratios, "default", 1)
    assert "1 repetition" in fig.axes[0].get_title()
    assert not [p for p in fig.axes[0].patches if p.get_hatch()]


def test_boxplot_draws_one_box_per_size_and_algorithm(comp: Comparison) -> None:
    shown = ["default", "binomial"]
    fig = figures.boxplot("t", block(comp), shown, "default", figures.palette(LABELS))
    ax = fig.axes[0]
    assert len(ax.patches) == len(SIZES) * len(shown)
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == shown
    assert ax.get_yscale() == "log"


def test_scaling_has_a_panel_per_size_and_a_line_per_placement() -> None:
    lines = [figures.ScalingLine(place, size, (2, 4, 8), (1.0, 2.0, 4.0))
             for place in ("map-by=core", "map-by=socket") for size in (1, 1024)]
    fig = figures.scaling("bcast", lines, [1, 1024], "avg")
    assert len(fig.axes) == 2
    assert all(len(ax.get_lines()) == 2 and ax.get_xscale() == "log" for ax in fig.axes)


def test_tails_plot_p99_over_p50() -> None:
    rows = [figures.Tail(lab, s, 100, 2.0, 2.0 * k) for k, lab in enumerate(LABELS, 1)
            for s in SIZES]
    fig = figures.tails("t", rows, figures.palette(LABELS))
    lines = fig.axes[0].get_lines()
    assert [str(line.get_label()) for line in lines] == LABELS
    assert list(lines[2].get_ydata()) == [3.0] * len(SIZES)  # type: ignore[arg-type]


def test_save_writes_png_and_svg(comp: Comparison, tmp_path: Path) -> None:
    fig = figures.latency("t", block(comp), figures.palette(LABELS), "avg")
    png, svg = figures.save(fig, tmp_path / "sub" / "lat", "both")
    assert png.read_bytes().startswith(PNG) and png.stat().st_size > 10_000
    assert b"<svg" in svg.read_bytes()[:1000]
    assert figures.save(fig, tmp_path / "x", "svg") == [tmp_path / "x.svg"]


def test_parallel_and_serial_rendering_write_the_same_files(comp: Comparison,
                                                            tmp_path: Path) -> None:
    def jobs(sub: str) -> list[figures.Job]:
        return [figures.Job(partial(figures.latency, f"t{i}", block(comp),
                                    figures.palette(LABELS), "avg"), tmp_path / sub / f"f{i}",
                            "png") for i in range(8)]

    serial = figures.render_all(jobs("a"), workers=1)
    parallel = figures.render_all(jobs("b"), workers=2)
    assert [p.name for p in serial] == [p.name for p in parallel] == [f"f{i}.png"
                                                                     for i in range(8)]
    assert all(p.read_bytes().startswith(PNG) for p in parallel)


def test_palette_gives_distinct_colours() -> None:
    many = [f"a{i}" for i in range(15)]
    assert len(set(figures.palette(many).values())) == 15
    assert isinstance(figures.latency("t", [], {}, "avg"), Figure)  # nothing to draw: no error
