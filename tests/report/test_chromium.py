"""The report page in a real browser: headless Chromium (Debian package `chromium`).

Checks what static HTML tests cannot: the page renders, the browser logs no console
message (the page has no script, so any message is an error), every figure decodes and
paints something in its place on a screenshot, every figure says what its axes are (with
units) and has a legend, and nothing is fetched from anywhere. The campaign has the
shapes figures must cope with: several sizes, process counts across the node's cores
(oversubscribed at 8 on 4 cores), four algorithms, five repetitions, raw samples, and a
collective measured at one size only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageStat

from collbench.report import Options, Written, build_report
from collbench.store import Store
from tests.report import make_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.skipif(CHROMIUM is None,
                                 reason="no chromium binary (apt-get install chromium)"),
              pytest.mark.slow]
WIDTH = 1200
UNIT = re.compile(r"\((?:[^)]*\b)?(µs|bytes|×|MPI ranks)\b")

# Injected into a copy of the page only: what the browser made of the figures, as JSON in
# an attribute (no element added: the layout stays that of the real page).
PROBE = """<script>window.addEventListener("load", () => {
  const figs = [...document.querySelectorAll("figure")].map(f => {
    const img = f.querySelector("img"), r = img.getBoundingClientRect();
    return {axes: f.dataset.axes || null, decoded: img.complete && img.naturalWidth > 0,
            x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
  });
  const external = performance.getEntriesByType("resource")
    .filter(e => !e.name.startsWith("data:")).length;
  document.body.setAttribute("data-probe", JSON.stringify(
    {figures: figs, external: external, height: document.documentElement.scrollHeight}));
});</script>"""


def chromium(tmp: Path, page: Path, height: int, *flags: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless=new", "--disable-gpu", "--enable-logging=stderr", "--v=0",
           f"--user-data-dir={tmp / 'profile'}", "--no-first-run", "--hide-scrollbars",
           f"--window-size={WIDTH},{height}", *flags, page.resolve().as_uri()]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Written:
    tmp = tmp_path_factory.mktemp("chromium")
    res = make_results(tmp / "res", collectives=("bcast", "allreduce"),
                       algorithms=("default", "binomial", "pipeline", "linear"),
                       nprocs=(2, 4, 8), samples=True, outlier=True,
                       provenance={"host": "node1", "cores": 4, "sockets": 2,
                                   "cpu_model": "Test CPU", "created": "2024-01-01T00:00:00",
                                   "mpi": {"implementation": "openmpi", "version": "5.0.3"}})
    # A collective measured at one size: its figures must not be one-point lines.
    one = make_results(tmp / "one", collectives=("barrier",), sizes=(0,), nprocs=(2, 4))
    store, other = Store(res), Store(one)
    for f in other.launch_files():
        lid = f.name.removesuffix(".jsonl")
        rows = [json.loads(line) for line in f.read_text().splitlines()]
        store.write_launch(f"barrier-{lid}", [dict(r, launch_id=f"barrier-{lid}")
                                               for r in rows], {"status": "ok"}, None)
    return build_report(res, tmp / "report", Options())


@pytest.fixture(scope="module")
def probe(report: Written, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("probe")
    page = report.index.with_name("probe.html")
    page.write_text(report.index.read_text().replace("</body>", PROBE + "</body>"))
    res = chromium(tmp, page, 3000, "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    found = re.search(r'<body[^>]*data-probe="([^"]*)"', res.stdout)
    assert found is not None, res.stdout[:500]
    import html

    data: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return data


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if re.search(r"CONSOLE|Uncaught|Failed to load", line)]


def test_every_figure_has_labelled_axes_with_units_and_a_legend(
        report: Written, probe: dict[str, Any]) -> None:
    figures = probe["figures"]
    pngs = [p for p in report.figures if p.suffix == ".png"]
    assert len(figures) == len(pngs) >= 12 and probe["external"] == 0
    assert all(f["decoded"] for f in figures)
    kinds = {p.stem.rsplit("_", 1)[-1] for p in pngs}
    assert kinds == {"latency", "ratio", "repetitions", "tails", "scaling"}
    for f in figures:
        meta = json.loads(f["axes"])
        first = meta["axes"][0]
        assert first["y"], meta  # panels beside the first share its y axis
        for ax in meta["axes"]:
            assert ax["x"] and UNIT.search(ax["x"] + " " + first["y"]), meta
        assert meta["legend"], meta


def test_figures_paint_their_place_and_the_page_logs_nothing(
        report: Written, probe: dict[str, Any], tmp_path: Path) -> None:
    height = min(int(probe["height"]) + 10, 30_000)
    shot = tmp_path / "page.png"
    res = chromium(tmp_path, report.index, height, f"--screenshot={shot}")
    assert res.returncode == 0, res.stderr[-2000:]
    assert console_messages(res.stderr) == []
    with Image.open(shot) as im:
        page = im.convert("RGB")
        assert page.size[0] == WIDTH
        for f in probe["figures"]:
            if f["y"] + f["h"] > page.size[1]:
                continue  # below what Chromium would capture
            box = (int(f["x"]), int(f["y"]), int(f["x"] + f["w"]), int(f["y"] + f["h"]))
            region = page.crop(box)
            assert f["w"] > 300 and f["h"] > 150, f
            spread = ImageStat.Stat(region.convert("L")).stddev[0]
            assert spread > 10, f"figure at {box} is blank (pixel stddev {spread:.1f})"
            saturation = region.convert("HSV").getchannel("S")
            colour = sum(saturation.histogram()[80:])  # pixels clearly coloured
            assert colour > 100, f"figure at {box} has no colour ({colour} pixels)"
    checked = sum(1 for f in probe["figures"] if f["y"] + f["h"] <= page.size[1])
    assert checked == len(probe["figures"])
