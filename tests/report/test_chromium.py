"""The report page in a real browser: headless Chromium (Debian package `chromium`).

Checks what static HTML tests cannot: the page renders, the browser logs no console
message (the page has no script, so any message is an error), every embedded figure
decodes, and nothing is fetched from anywhere.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from PIL import Image

from collbench.report import Options, Written, build_report
from tests.report import make_results

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="no chromium binary (apt-get install chromium)")

# Injected into a copy of the page only: counts what the browser made of the figures.
PROBE = """<script>window.addEventListener("load", () => {
  const imgs = [...document.images];
  const external = performance.getEntriesByType("resource")
    .filter(e => !e.name.startsWith("data:"));
  document.body.dataset.images = imgs.length;
  document.body.dataset.decoded = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
  document.body.dataset.svg = document.querySelectorAll("svg").length;
  document.body.dataset.external = external.length;
});</script>"""


def chromium(tmp: Path, page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, "--headless=new", "--disable-gpu", "--enable-logging=stderr", "--v=0",
           f"--user-data-dir={tmp / 'profile'}", "--no-first-run", "--window-size=1200,3000",
           *flags, page.resolve().as_uri()]
    if os.geteuid() == 0:
        cmd.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Written:
    tmp = tmp_path_factory.mktemp("chromium")
    return build_report(make_results(tmp / "res", samples=True), tmp / "report", Options())


def console_messages(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if re.search(r"CONSOLE|Uncaught|Failed to load", line)]


def test_page_renders_without_console_errors(report: Written, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"
    res = chromium(tmp_path, report.index, f"--screenshot={shot}")
    assert res.returncode == 0, res.stderr[-2000:]
    assert console_messages(res.stderr) == []
    assert shot.stat().st_size > 50_000
    with Image.open(shot) as im:
        assert im.size == (1200, 3000)
        small = im.convert("RGB").resize((240, 600))
        dark = sum(small.convert("L").histogram()[:200]) / (240 * 600)  # text, lines
        colour = sum(small.convert("HSV").split()[1].histogram()[100:]) / (240 * 600)
    assert dark > 0.02, "the screenshot is nearly blank"
    assert colour > 0.002, "no coloured pixels: the figures did not render"


def test_every_figure_is_in_the_dom_and_decodes(report: Written, tmp_path: Path) -> None:
    probe = report.index.with_name("probe.html")
    probe.write_text(report.index.read_text().replace("</body>", PROBE + "</body>"))
    res = chromium(tmp_path, probe, "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", res.stdout)
    assert body is not None, res.stdout[:500]
    found = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    figures = len([p for p in report.figures if p.suffix == ".png"])
    assert figures == 9  # bcast at np 2 and 4: 4 figures each, plus the scaling figure
    assert found == {"images": str(figures), "decoded": str(figures), "svg": "0",
                     "external": "0"}
    assert res.stdout.count("<img") == figures
