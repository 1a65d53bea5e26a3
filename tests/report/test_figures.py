"""The report's figures: the matplotlib objects they return and the files they write."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy
import pytest
from matplotlib import colormaps
from matplotlib.collections import PathCollection
from matplotlib.colors import LogNorm, to_rgba
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D

from collbench.analyse import Comparison, PointStat, compare
from collbench.report import figures, heatmap
from collbench.report.output import Output
from collbench.report.scaling import Machine, Series, scaling
from collbench.report.sections import collectives
from collbench.report.spread import clip_limits, spread
from collbench.store import Store
from tests.report import SIZES, make_results

PNG = b"\x89PNG\r\n\x1a\n"
LABELS = ["default", "binomial", "pipeline"]
BLACK = (0.0, 0.0, 0.0, 1.0)


@pytest.fixture(scope="module")
def comp(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare(Store(make_results(tmp_path_factory.mktemp("f") / "res")))


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare(Store(make_results(tmp_path_factory.mktemp("s") / "res", repetitions=1)))


def block(c: Comparison, nprocs: int = 2) -> list[PointStat]:
    return [p for p in c.points if p.nprocs == nprocs]


def winners(c: Comparison, nprocs: int = 2) -> list[figures.WinSpan]:
    return [figures.WinSpan(r.algorithm, r.size_from, r.size_to) for r in c.ranges
            if r.nprocs == nprocs]


@pytest.fixture(scope="module")
def four(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    """binomial wins small sizes, pipeline large ones, linear (as fast as default) none."""
    return compare(Store(make_results(tmp_path_factory.mktemp("4") / "res",
                                      algorithms=(*LABELS, "linear"))))


def test_latency_highlights_baseline_and_winners_and_greys_the_rest(four: Comparison) -> None:
    comp = four
    wins = winners(comp)
    won = {w.label for w in wins} - {"default"}
    assert won == {"binomial", "pipeline"}
    fig = figures.latency("bcast np=2", block(comp), figures.palette(LABELS), "avg",
                          "default", wins)
    (ax,) = fig.axes
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    lines = {str(ln.get_label()): ln for ln in ax.get_lines()}
    base = lines["default (baseline)"]
    assert to_rgba(base.get_color()) == BLACK and base.get_linewidth() > 2
    for label in won:
        assert lines[label].get_linewidth() < base.get_linewidth()
        assert to_rgba(lines[label].get_color()) != BLACK
    grey = [ln for name, ln in lines.items() if name.startswith("other algorithms") or
            name == "_"]
    assert len(grey) == 1 and all(ln.get_linewidth() < 1 for ln in grey)
    assert all(len(ln.get_xdata()) == len(SIZES) for ln in lines.values())  # type: ignore[arg-type]
    bands = [c for c in ax.collections if c.get_alpha() == pytest.approx(0.15)]
    assert len(bands) == 1 + len(won)  # bands only for the highlighted lines
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "64", "4K", "64K", "1M"]
    assert ax.get_xlabel() == "message size (bytes per rank)"
    assert ax.get_ylabel() == "avg latency (µs), median over repetitions"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]  # type: ignore[union-attr]
    assert legend[0] == "default (baseline)" and legend[-1].startswith("other algorithms (")
    assert len(ax.patches) >= len(wins)  # the winner strip along the bottom


def test_shared_scale_is_applied(comp: Comparison) -> None:
    fig = figures.latency("t", block(comp), {}, "avg", "default", (), (0.5, 5000.0))
    assert fig.axes[0].get_ylim() == pytest.approx((0.5, 5000.0))


def test_latency_band_is_min_to_max_over_ranks_with_one_repetition(single: Comparison) -> None:
    points = block(single)
    fig = figures.latency("t", points, figures.palette(LABELS), "avg", "default")
    band = numpy.asarray(fig.axes[0].collections[0].get_paths()[0].vertices, dtype=float)
    default = [p for p in points if p.label == "default"]
    assert band[:, 1].min() == pytest.approx(min(p.min_us or 0 for p in default))
    assert band[:, 1].max() == pytest.approx(max(p.max_us or 0 for p in default))


@pytest.mark.parametrize("size", [0, 4096])
def test_one_size_is_a_dot_chart_not_a_one_point_line(comp: Comparison, size: int) -> None:
    points = [replace(p, size_bytes=size) for p in block(comp) if p.size_bytes == 1]
    fig = figures.latency("barrier", points, figures.palette(LABELS), "avg", "default")
    ax = fig.axes[0]
    assert not [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 1  # type: ignore[arg-type]
                and ln.get_linestyle() not in ("None", "none", "")]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert sorted(labels) == sorted(LABELS)
    values = {p.label: p.value for p in points}
    assert labels == sorted(LABELS, key=values.__getitem__)  # fastest on top
    assert "µs" in ax.get_xlabel() and ax.get_ylabel() == "algorithm"
    assert ax.get_legend() is not None and "size" in ax.get_title()


def _cells(fig: Figure) -> numpy.ndarray:
    images = [im for im in fig.axes[0].get_images() if isinstance(im, AxesImage)]
    return numpy.asarray(images[0].get_array())


def test_heatmap_one_fixed_scale_faded_non_significant(comp: Comparison) -> None:
    ratios = [r for r in comp.ratios if r.point.nprocs == 2]
    assert any(r.significant for r in ratios) and not all(r.significant for r in ratios)
    fig = heatmap.heatmap("bcast np=2", ratios, "default", comp.repetitions)
    bar = fig.colorbar_axes = [a for a in fig.axes if a.get_label() == "colorbar"]
    assert bar and bar[0].get_ylim() == pytest.approx((0.25, 4.0))
    norm = LogNorm(1 / heatmap.RATIO_SPAN, heatmap.RATIO_SPAN)
    assert norm.vmin * norm.vmax == pytest.approx(1.0)  # 1 is the centre of the colours
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    sizes = sorted({r.point.size_bytes for r in ratios})
    cells = _cells(fig)
    for r in ratios:
        rgba = cells[labels.index(r.point.label), sizes.index(r.point.size_bytes)]
        full = numpy.asarray(colormaps["RdBu_r"](norm(r.ratio)))
        if r.significant:
            assert rgba == pytest.approx(full), r
        else:  # faded toward grey: a third of the colour left
            assert numpy.ptp(rgba[:3]) == pytest.approx(heatmap.FADED * numpy.ptp(full[:3]))
    # Another block's heat map uses the very same scale.
    other = heatmap.heatmap("np=4", [r for r in comp.ratios if r.point.nprocs == 4], "default",
                            comp.repetitions)
    assert next(a for a in other.axes if a.get_label() == "colorbar").get_ylim() == \
        pytest.approx((0.25, 4.0))
    assert not [p for p in ax.patches if p.get_hatch()]  # all tested: nothing hatched
    assert {t.get_text() for t in fig.legends[0].get_texts()} == {
        "significant", "not significant (faded)", "not measured"}
    assert f"{ratios[0].ratio:.2f}" in {t.get_text() for t in ax.texts}


def test_heatmap_hatches_untested_cells(comp: Comparison) -> None:
    ratios = [r for r in comp.ratios if r.point.nprocs == 2]
    untested = [replace(r, significant=None) if r.point.size_bytes == 1 else r for r in ratios]
    fig = heatmap.heatmap("t", untested, "default", comp.repetitions)
    assert len([p for p in fig.axes[0].patches if p.get_hatch()]) == 2
    assert "untested" in {t.get_text() for t in fig.legends[0].get_texts()}
    assert heatmap.untested(untested, 5) and not heatmap.untested(ratios, 5)


def test_heatmap_with_one_repetition_says_so(single: Comparison) -> None:
    fig = heatmap.heatmap("t", single.ratios, "default", 1)
    assert "1 repetition" in fig.axes[0].get_title()
    assert not [p for p in fig.axes[0].patches if p.get_hatch()]


def test_few_repetitions_are_strips_of_dots(comp: Comparison) -> None:
    shown = ["default", "binomial"]
    fig = spread("t", block(comp), shown, "default", figures.palette(LABELS))
    ax = fig.axes[0]
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 2 and all(len(c.get_offsets()) == len(SIZES) * 5 for c in dots)
    assert not ax.patches  # no boxes
    legend = ax.get_legend()
    assert legend is not None and [t.get_text() for t in legend.get_texts()] == shown
    assert ax.get_yscale() == "log" and "(×)" in ax.get_ylabel()


def test_many_repetitions_are_boxes_and_extremes_are_clipped(tmp_path: Path) -> None:
    c = compare(Store(make_results(tmp_path / "r", repetitions=12, sizes=(64, 4096))))
    pts = block(c)
    wild = [replace(p, values=(*p.values[:-1], p.values[-1] * 1000))
            if p.label == "binomial" and p.size_bytes == 64 else p for p in pts]
    fig = spread("t", wild, ["default", "binomial"], "default", figures.palette(LABELS))
    ax = fig.axes[0]
    assert len(ax.patches) == 4  # a box per size and algorithm
    assert ax.get_ylim()[1] < 100  # the 1000x value does not set the scale...
    notes = [t.get_text() for t in ax.texts]
    assert len(notes) == 1 and notes[0].endswith("×")  # ...it is named at the edge
    assert float(notes[0].rstrip("×")) > 200
    assert "clipped (value shown)" in [t.get_text() for t in ax.get_legend().get_texts()]  # type: ignore[union-attr]
    assert clip_limits([1.0, 1.1, 0.9, 1.05]) == pytest.approx((0.9, 1.1))


def test_scaling_lines_cross_node_boundaries_and_flag_oversubscription() -> None:
    def series(label: str, size: int) -> Series:
        return Series(label, "map-by=core", size, (2, 4, 8, 16), (1.0, 2.0, 3.0, 5.0),
                      (0.9, 1.8, 2.7, 4.0), (1.1, 2.2, 3.3, 6.0), (1, 1, 2, 4),
                      (False, False, False, True))
    lines = [series(lab, size) for lab in ("default", "ring") for size in (1, 1024)]
    fig = scaling("bcast", lines, [1, 1024], "avg", Machine(cores=4, sockets=2), "default")
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert ax.get_xscale() == "log" and ax.get_xlabel() == "processes (MPI ranks)"
        data = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-"]
        assert len(data) == 2  # one continuous line per algorithm, across 1, 2 and 4 nodes
        hollow = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "white"]
        assert len(hollow) == 2 and all(list(ln.get_xdata()) == [16] for ln in hollow)
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert len(dashed) == 2  # 4 -> 8 and 8 -> 16 processes add nodes
    assert "µs" in fig.axes[0].get_ylabel()
    legend = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]  # type: ignore[union-attr]
    assert legend == ["default (baseline)", "ring", "oversubscribed (hollow, shaded)",
                      "node boundary"]
    base = max(fig.axes[0].get_lines(), key=lambda ln: ln.get_linewidth())
    assert to_rgba(base.get_color()) == BLACK
    two = [*lines, replace(lines[0], placement="map-by=socket")]
    fig = scaling("bcast", two, [1, 1024], "avg", Machine(cores=4, sockets=2), "default")
    legend = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]  # type: ignore[union-attr]
    assert legend[:3] == ["default map-by=core (baseline)", "default map-by=socket (baseline)",
                          "ring map-by=core"]
    one_node = [replace(s, nodes=(1, 1, 1, 1), over=(False,) * 4) for s in lines]
    fig = scaling("bcast", one_node, [1, 1024], "avg", Machine(cores=16, sockets=2))
    assert [ln.get_xdata()[0] for ln in fig.axes[0].get_lines()  # type: ignore[index]
            if ln.get_linestyle() == ":"] == [8.5]  # the socket boundary


def test_tails_plot_p99_over_p50() -> None:
    rows = [figures.Tail(lab, s, 100, 2.0, 2.0 * k) for k, lab in enumerate(LABELS, 1)
            for s in SIZES]
    fig = figures.tails("t", rows, figures.palette(LABELS))
    lines = fig.axes[0].get_lines()
    assert [str(line.get_label()) for line in lines] == LABELS
    assert list(lines[2].get_ydata()) == [3.0] * len(SIZES)  # type: ignore[arg-type]


def test_save_writes_png_and_svg_with_their_description(comp: Comparison,
                                                       tmp_path: Path) -> None:
    fig = figures.latency("t", block(comp), figures.palette(LABELS), "avg", "default")
    png, svg = figures.save(fig, tmp_path / "sub" / "lat", "both")
    assert png.read_bytes().startswith(PNG) and png.stat().st_size > 10_000
    assert b"<svg" in svg.read_bytes()[:1000]
    for path in (png, svg):
        meta = json.loads(figures.description(path) or "{}")
        assert meta["axes"] == [{"x": "message size (bytes per rank)",
                                 "y": "avg latency (µs), median over repetitions",
                                 "title": "t"}]
        assert meta["legend"][0] == "default (baseline)"
    assert figures.save(fig, tmp_path / "x", "svg") == [tmp_path / "x.svg"]


def test_no_figure_of_a_report_is_a_one_point_line_chart(tmp_path: Path) -> None:
    """Shapes that used to give one-point lines: one size, one process count per size."""
    res = make_results(tmp_path / "r", sizes=(4096,), nprocs=(2, 4), samples=True)
    out = Output(tmp_path / "out", "png")
    parts = collectives(compare(Store(res)), {("bcast", "ok"): 1}, {}, out)
    assert parts and out.jobs
    for job in out.jobs:
        fig = job.draw()
        for ax in fig.axes:
            for ln in ax.get_lines():
                if ln.get_linestyle() not in ("None", "none", "") and ln.get_label() != "_":
                    xs = numpy.unique(numpy.asarray(ln.get_xdata(), dtype=float))
                    trans = ln.get_transform() != ax.transData
                    assert len(xs) >= 2 or trans, (job.stem.name, ln.get_label())


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
    assert isinstance(Line2D, type)


def test_study_score_boxplot_clips_an_extreme_score_and_names_it() -> None:
    from collbench.study.decide import Decision, Setting
    from collbench.study.figures import score_boxplot

    def setting(value: str, scores: tuple[float, ...], base: bool = False) -> Setting:
        return Setting(value, base, scores, len(scores), None, None, None, None, None, None)

    decision = Decision("coll_tuned_priority", "mca", "30", "40", "faster", 10, "avg_us", 0.95,
                        0.0, (setting("30", (1.0, 1.02, 0.98, 1.01, 0.99), True),
                              setting("40", (0.8, 0.82, 0.79, 0.81, 250.0))))
    fig = score_boxplot(decision, "stage 1")
    ax = fig.axes[0]
    assert ax.get_ylim()[1] < 20  # the 250x score does not set the scale
    assert [t.get_text() for t in ax.texts] == ["250×"]
    assert ax.get_xlabel() == "setting" and "(×)" in ax.get_ylabel()
    legend = ax.get_legend()
    assert legend is not None and "kept setting" in [t.get_text() for t in legend.get_texts()]


def test_study_stage_gets_latency_vs_process_count_per_setting(tmp_path: Path) -> None:
    from collbench.study.decide import Decision, Setting
    from collbench.study.figures import scaling_series, write_stage

    values = {setting: {rep: {("bcast", n, "default", 0, 0, size): scale * n * (1 + size)
                              * (1 + 0.01 * rep)
                              for n in (2, 4, 8) for size in (1, 64, 4096, 65536)}
                        for rep in range(3)}
              for setting, scale in (("30", 1.0), ("40", 0.8))}
    series, sizes = scaling_series(values, ("bcast", "default", 0, 0))
    assert sizes == [1, 4096, 65536]  # smallest, middle, largest
    first = next(s for s in series if s.label == "40" and s.size_bytes == 1)
    assert first.nprocs == (2, 4, 8) and first.values == pytest.approx((3.232, 6.464, 12.928))
    assert first.low == pytest.approx((3.2, 6.4, 12.8))  # bars: min to max over repetitions

    def setting(value: str, base: bool = False) -> Setting:
        return Setting(value, base, (1.0, 1.0, 1.0), 3, None, None, None, None, None, None)

    decision = Decision("p", "mca", "30", "40", "faster", 12, "avg_us", 0.95, 0.0,
                        (setting("30", True), setting("40")))
    written = write_stage(decision, values, tmp_path, "stage1", "stage 1")
    assert [p.name for p in written if "scaling" in p.name] == [
        "stage1-bcast-default-scaling.png"]


def test_a_dot_in_a_stem_never_makes_two_figures_share_a_file(tmp_path: Path) -> None:
    """An OSU version in a slug (osu-5.9): with_suffix would cut `.9_overlap` and
    `.9_overall` alike, and the second figure would overwrite the first."""
    dest = Output(tmp_path, "both")
    stem = dest.slug("nb-ibcast osu-5.9")
    for kind in ("overlap", "overall"):
        dest.figure(Figure, f"{stem}_{kind}", kind)
    written = [p for job in dest.jobs for p in figures.render(job)]
    assert len(written) == 4 and len(set(written)) == 4
    assert all(p.exists() and "5.9_over" in p.name for p in written)


def test_scaling_figure_shows_every_algorithm_measured(tmp_path: Path) -> None:
    """Four algorithms asked for, at two process counts: all four are lines of the latency
    vs process count figure, not only the baseline and the winners."""
    algs = ("default", "binomial", "pipeline", "chain")
    comp4 = compare(Store(make_results(tmp_path / "res", algorithms=algs)))
    dest = Output(tmp_path / "rep", "png")
    collectives(comp4, {("bcast", "ok"): 1}, {}, dest, Machine(64, 2))
    job = next(j for j in dest.jobs if j.stem.name.endswith("_scaling"))
    legend = figures.describe(job.draw())["legend"]
    assert {a for a in algs if any(e.startswith(a) for e in legend)} == set(algs)
