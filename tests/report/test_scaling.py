"""The report's scaling figures: one per collective and placement, every algorithm measured
at two or more process counts, and no one-point figure per process count of a sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from collbench.analyse import Comparison, compare
from collbench.records import make_row
from collbench.report import figures
from collbench.report.output import Output
from collbench.report.scaling import MAX_TICKS, Machine
from collbench.report.sections import collectives
from collbench.store import Store
from tests.report import latency, row

CORE = ("default", "binomial", "pipeline", "chain")
SOCKET = ("binomial", "pipeline")
COUNTS = range(2, 41)  # a scaling sweep at 4 B: every process count
POWERS = (2, 4, 8, 16, 32)  # with a size sweep at these


def sweep(root: Path) -> Store:
    """One repetition, as an ingested OSU table: 4 B at every count, sizes at powers of
    two (map-by core, four algorithms); 4 B at every count for two of them by socket."""
    store = Store(root)
    store.create({"name": "sweep", "seed": 1}, "", {"launches": []}, {"cores": 64})
    rows = []
    for mapping, algs in (("core", CORE), ("socket", SOCKET)):
        for np_ in COUNTS:
            sizes = (4, 1024, 65536) if mapping == "core" and np_ in POWERS else (4,)
            for alg in algs:
                for size in sizes:
                    r = row("sweep", "csv", 0, "bcast", alg, np_, size,
                            latency(alg, size, np_), "ok")
                    rows.append(make_row(**dict(r, mapping=mapping, binding=None)))
    store.write_launch("csv", rows, {"status": "ok"})
    return store


@pytest.fixture(scope="module")
def comp(tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return compare(sweep(tmp_path_factory.mktemp("sweep") / "res"))


def test_one_figure_per_placement_with_every_algorithm(comp: Comparison,
                                                       tmp_path: Path) -> None:
    dest = Output(tmp_path / "rep", "png")
    (section,) = collectives(comp, {("bcast", "ok"): 1}, {}, dest, Machine(64, 2))
    assert [f.path.name for f in section.figures] == ["bcast_scaling_map-by=core.png",
                                                      "bcast_scaling_map-by=socket.png"]
    drawn: dict[str, Figure] = {j.stem.name: j.draw() for j in dest.jobs
                                if "_scaling" in j.stem.name}
    core, socket = drawn["bcast_scaling_map-by=core"], drawn["bcast_scaling_map-by=socket"]
    legend = figures.describe(core)["legend"]
    assert {a for a in CORE if any(e.startswith(a) for e in legend)} == set(CORE)
    assert {a for a in CORE if any(e.startswith(a)
                                   for e in figures.describe(socket)["legend"])} == set(SOCKET)
    # the 4 B sweep (every count) is a panel, with the largest size and one between
    titles = [a["title"] for a in figures.describe(core)["axes"]]
    assert titles == ["size 4", "size 1K", "size 64K"]
    assert all(len([t for t in ax.get_xticks() if 2 <= t <= 40]) <= MAX_TICKS
               for ax in core.axes)
    sweep_lines = [ln for ln in core.axes[0].get_lines() if len(ln.get_xdata()) == 39]  # type: ignore[arg-type]
    assert len(sweep_lines) >= len(CORE)
    # the one-size blocks of the sweep (odd counts) draw nothing of their own; the
    # blocks with a size sweep keep their latency figure
    stems = {j.stem.name for j in dest.jobs}
    assert "bcast_np3_map-core_latency" not in stems
    assert "bcast_np3_map-core_ratio" not in stems
    assert "bcast_np4_map-core_latency" in stems
    np3 = next(b for b in section.blocks if b.title == "bcast np=3 map-by=core")
    assert not np3.figures and any("scaling figure" in n for n in np3.notes)
    assert len(stems) < 2 * len(COUNTS)  # not a figure or two per process count
