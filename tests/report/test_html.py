"""`collbench report`: the page (self-contained, escaped, complete), tables and edge cases."""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import pytest

from collbench.commands.report import add_parser
from collbench.errors import UserError
from collbench.report import Options, Written, build_report
from collbench.report import html as page_html
from collbench.store import Store
from tests.report import SIZES, make_results

EVIL = "<script>alert(1)</script>&\"'"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Written:
    tmp = tmp_path_factory.mktemp("r")
    res = make_results(tmp / "res", collectives=("bcast", "allreduce"), samples=True,
                       outlier=True)
    return build_report(res, tmp / "report", Options())


@pytest.fixture(scope="module")
def page(report: Written) -> str:
    return report.index.read_text()


def attributes(text: str, name: str) -> list[str]:
    return re.findall(rf'\b{name}\s*=\s*"([^"]*)"', text)


def test_page_is_self_contained(page: str) -> None:
    assert not re.search(r"<script|<link|<iframe|@import|url\(", page, re.IGNORECASE)
    refs = attributes(page, "src") + attributes(page, "href")
    assert not [r for r in refs if re.match(r"\s*(https?:)?//", r)]
    images = re.findall(r"<img\b[^>]*>", page)
    assert images and all('src="data:image/png;base64,' in img for img in images)


def test_every_figure_written_is_on_the_page(report: Written, page: str) -> None:
    pngs = [p for p in report.figures if p.suffix == ".png"]
    assert len(re.findall(r"<img\b", page)) == len(pngs)
    # Per block of bcast/allreduce × np 2/4: latency, ratio, repetitions, tails; one scaling
    # figure per collective.
    assert len(pngs) == 2 * 2 * 4 + 2
    assert {p.name for p in pngs} >= {"bcast_np2_map-core_bind-core_latency.png",
                                      "bcast_np4_map-core_bind-core_ratio.png",
                                      "bcast_np2_map-core_bind-core_repetitions.png",
                                      "bcast_np2_map-core_bind-core_tails.png",
                                      "bcast_scaling.png"}


def test_page_has_every_section(page: str) -> None:
    for needle in ('id="summary"', 'id="warnings"', 'id="provenance"', "<h2>bcast</h2>",
                   "<h2>allreduce</h2>", "bcast np=2 map-by=core bind-to=core",
                   "Recommendation per size range", "Ratio to the baseline per size",
                   "Statistical method", "openmpi 5.0.3", "node1", "Test CPU",
                   "up to 5 per point", "avg_us: median over repetitions", "raw samples",
                   "OMPI_MCA_btl", "OMPI_MCA_mpi_yield_when_idle is set"):
        assert needle in page, needle


def test_stability_warnings_come_with_advice(page: str) -> None:
    section = page[page.index('id="warnings"'):page.index('id="provenance"')]
    assert "a repetition lies far above the median" in section
    assert section.count('<li class="warn">') == section.count("What to do:") >= 1


def test_recommendation_and_ratios_show_significance(page: str) -> None:
    assert "binomial" in page and "significantly faster at" in page
    assert re.search(r'<td class="num faster[^"]*">0\.\d+\*</td>', page)


def test_tables_for_papers(report: Written) -> None:
    names = {p.name for p in report.tables}
    assert {"bcast_np2_map-core_bind-core.md", "bcast_np2_map-core_bind-core.csv",
            "recommendations.md", "recommendations.csv"} <= names
    folder = report.index.parent / "tables"
    rows = list(csv.DictReader((folder / "bcast_np2_map-core_bind-core.csv").open()))
    assert len(rows) == 3 * len(SIZES)
    first = rows[0]
    assert {"median_avg_us", "min_min_us", "max_max_us", "ratio", "ratio_ci_low", "effect",
            "significant", "fastest", "p99_us"} <= set(first)
    assert [r["algorithm"] for r in rows[:3]] == ["default", "binomial", "pipeline"]
    md = (folder / "bcast_np2_map-core_bind-core.md").read_text()
    assert "| size | algorithm | n | median_avg_us |" in md and "| * |" in md and "fastest" in md
    assert "Recommended: " in md


def test_data_strings_are_escaped(tmp_path: Path) -> None:
    res = make_results(tmp_path / "res", campaign=EVIL, algorithms=("default", EVIL),
                       nprocs=(2,), repetitions=2)
    w = build_report(res, tmp_path / "out", Options())
    text = w.index.read_text()
    assert "<script" not in text and "alert(1)</" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#x27;" in text
    assert all(re.fullmatch(r"[\w.=+-]+", p.name) for p in (*w.figures, *w.tables))


def test_table_cells_and_figure_captions_are_escaped(tmp_path: Path) -> None:
    (tmp_path / "f.png").write_bytes(b"png")
    table = page_html.table(page_html.Table(("<b>",), (("<i>",), (page_html.Cell("&", "num"),)),
                                            caption="<u>"))
    fig = page_html.figure(page_html.FigureRef(tmp_path / "f.png", '"><script>'))
    assert "<b>" not in table and "<i>" not in table and "<u>" not in table
    assert "&lt;b&gt;" in table and '<td class="num">&amp;</td>' in table
    assert "<script>" not in fig and "&quot;&gt;&lt;script&gt;" in fig


def test_one_repetition_skips_the_spread_figure_and_says_why(tmp_path: Path) -> None:
    w = build_report(make_results(tmp_path / "res", repetitions=1, nprocs=(2,)),
                     tmp_path / "out", Options())
    text = w.index.read_text()
    assert not [p for p in w.figures if "repetitions" in p.name]
    assert "One repetition: no spread across repetitions" in text
    assert "Single repetition" in text
    assert "1 repetition" in text  # the heat map's caption


def test_one_algorithm_gets_no_heat_map(tmp_path: Path) -> None:
    w = build_report(make_results(tmp_path / "res", algorithms=("default",), nprocs=(2,)),
                     tmp_path / "out", Options())
    assert [p.name for p in w.figures] == ["bcast_np2_map-core_bind-core_latency.png"]
    assert "Only one algorithm measured here (default)" in w.index.read_text()


def test_only_failed_points_give_a_page_that_says_so(tmp_path: Path) -> None:
    w = build_report(make_results(tmp_path / "res", status="failed"), tmp_path / "out",
                     Options())
    text = w.index.read_text()
    assert "No point was measured successfully (points by status: failed 150)" in text
    assert "No successful measurement of bcast" in text
    assert w.figures == () and "<img" not in text


def test_svg_only_is_embedded_as_svg(tmp_path: Path) -> None:
    w = build_report(make_results(tmp_path / "res", nprocs=(2,), repetitions=2),
                     tmp_path / "out", Options(fmt="svg"))
    assert {p.suffix for p in w.figures} == {".svg"}
    assert 'src="data:image/svg+xml;base64,' in w.index.read_text()


def test_a_second_report_replaces_the_first(tmp_path: Path) -> None:
    res = make_results(tmp_path / "res", nprocs=(2,), repetitions=2)
    out = tmp_path / "out"
    build_report(res, out, Options(fmt="both"))
    assert list((out / "figures").glob("*.svg"))
    build_report(res, out, Options(fmt="png"))
    assert not list((out / "figures").glob("*.svg"))


@pytest.mark.parametrize(("setup", "message"), [
    ("missing", "not a collbench results folder"),
    ("no_launches", "no measurements stored yet"),
    ("collective", "no measurements of collective 'bcats'; present: bcast (did you mean bcast?)"),
    ("baseline", "--baseline 'tuned' was not measured here"),
    ("output", "folder is not empty and holds no earlier report"),
    ("format", "--format 'gif' is not valid"),
])
def test_bad_input_is_one_clear_error(tmp_path: Path, setup: str, message: str) -> None:
    res, out, opts = tmp_path / "res", tmp_path / "out", Options()
    if setup == "no_launches":
        Store(res).create({"name": "t"}, "", {}, {})
    elif setup != "missing":
        make_results(res, nprocs=(2,), repetitions=1)
    if setup == "collective":
        opts = Options(collective="bcats")
    elif setup == "baseline":
        opts = Options(baseline="tuned")
    elif setup == "output":
        out.mkdir()
        (out / "thesis.tex").write_text("precious")
    elif setup == "format":
        opts = Options(fmt="gif")
    with pytest.raises(UserError, match=re.escape(message)):
        build_report(res, out, opts)
    if setup == "output":
        assert (out / "thesis.tex").read_text() == "precious"


def test_cli_parses_and_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = make_results(tmp_path / "res", nprocs=(2,), repetitions=2)
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["report", str(res), "-o", str(tmp_path / "out"), "--stat",
                              "median", "--format", "both", "--confidence", "0.9"])
    assert args.func(args) == 0
    assert "index.html (6 figure files, 4 table files)" in capsys.readouterr().out
    assert "median_us: median over repetitions" in (tmp_path / "out" / "index.html").read_text()


def test_a_collective_that_only_failed_is_named_beside_the_others(tmp_path: Path) -> None:
    from tests.report import row

    res = make_results(tmp_path / "res", nprocs=(2,), repetitions=2)
    Store(res).write_launch("bad", [row("t", "bad", 0, "allgather", "default", 2, 64, 1.0,
                                         "timeout")], {"status": "timeout"})
    text = build_report(res, tmp_path / "out", Options()).index.read_text()
    assert "No successful measurement of allgather (points by status: timeout 1)" in text
    assert "<h2>bcast</h2>" in text and "bcast np=2" in text
    only = build_report(res, tmp_path / "out", Options(collective="bcast")).index.read_text()
    assert "allgather" not in only


def test_warnings_worst_first_the_rest_folded(tmp_path: Path) -> None:
    from collbench.report.html import WARNINGS_SHOWN, Page, WarningItem, page

    items = tuple(WarningItem(f"block {i}", f"problem {i}", "advice") for i in range(8))
    text = page(Page("t", (), (), warnings=items))
    section = text[text.index('id="warnings"'):text.index('id="provenance"')]
    shown, folded = section.split("<details>")
    assert shown.count('<li class="warn">') == WARNINGS_SHOWN and "block 0" in shown
    assert f"{8 - WARNINGS_SHOWN} more warnings" in folded and "block 7" in folded


def test_scaling_boundaries_come_from_the_machine_that_ran() -> None:
    from collbench.report.build import _machine
    from collbench.report.scaling import Machine
    from tests.simgrid_support import SMALL

    assert _machine({"cores": 64, "sockets": 2}) == Machine(64, 2)
    assert _machine({"cores": "many"}) == Machine(None, None)
    # A simulation: the platform's nodes (2 sockets x 2 cores), not the simulating host's.
    assert _machine({"cores": 2, "sockets": 1, "simgrid": {"platform_toml": SMALL}}) == \
        Machine(4, 2)
    assert _machine({"cores": 2, "simgrid": {"platform_toml": "not = [toml"}}) == \
        Machine(None, None)
