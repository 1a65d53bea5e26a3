"""The built-in platforms calibrated from published ping-pongs are what their documented
recipe writes: docs/simgrid.md's commands, run as shown on ../shared/data, give the
built-in's levels (latency, bandwidth, size factors)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from collbench.platforms.model import PLATFORM_LEVELS, Cluster, load_cluster
from tests.simgrid_support import needs_smpi

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"


def recipe(name: str) -> list[list[str]]:
    """The collbench commands of the block after `<!-- recipe: NAME -->`."""
    text = (ROOT / "docs" / "simgrid.md").read_text()
    block = text.split(f"<!-- recipe: {name} -->", 1)[1].split("```")[1]
    return [shlex.split(line)[1:] for line in block.splitlines()
            if line.startswith("collbench ")]


def test_recipe_blocks_are_found() -> None:
    epyc = recipe("orfeo-epyc")
    assert epyc[0][:2] == ["platform", "new"] and epyc[-1][:2] == ["platform", "calibrate"]
    assert sum(c[0] == "ingest" for c in epyc) == 8
    thin = recipe("orfeo-thin")
    assert [c[0] for c in thin] == ["ingest", "ingest", "platform"]


@needs_smpi
@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data" / "orfeo-epyc").is_dir(),
                    reason="the dev set (../shared/data) is not here")
@pytest.mark.parametrize("name", ["orfeo-epyc"])
def test_builtin_is_what_its_recipe_writes(tmp_path: Path, name: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)  # the recipe reads ../shared/data
    _run(recipe(name), repo)
    calibrate = recipe(name)[-1]
    written, _, _ = load_cluster(repo / calibrate[calibrate.index("-o") + 1])
    _same_levels(written, name)


def _same_levels(written: Cluster, name: str) -> None:
    """`written` has the built-in `name`'s shape, levels, factors, overheads, load term and
    sharing."""
    builtin, _, _ = load_cluster(name)
    assert (written.nodes, written.sockets_per_node, written.cores_per_socket,
            written.sockets_per_package) == (builtin.nodes, builtin.sockets_per_node,
                                             builtin.cores_per_socket,
                                             builtin.sockets_per_package)
    assert written.memory == builtin.memory
    assert written.smpi == builtin.smpi  # the rendezvous switch too
    for level in PLATFORM_LEVELS:
        w, b = written.level(level), builtin.level(level)
        assert (w is None) == (b is None), level
        if w is None or b is None:
            continue
        assert w.latency_us == pytest.approx(b.latency_us, rel=1e-5), level
        assert w.bandwidth_mbs == pytest.approx(b.bandwidth_mbs, rel=1e-5), level
        assert (w.send_overhead_us, w.recv_overhead_us) == \
            pytest.approx((b.send_overhead_us, b.recv_overhead_us), rel=1e-5), level
        assert [c for c, _ in w.load_latency_us] == [c for c, _ in b.load_latency_us], level
        assert [us for _, us in w.load_latency_us] == \
            pytest.approx([us for _, us in b.load_latency_us], rel=1e-4, abs=1e-6), level
        for mine, theirs in ((w.lat_factor, b.lat_factor), (w.bw_factor, b.bw_factor)):
            assert [s for s, _ in mine] == [s for s, _ in theirs]
            assert [f for _, f in mine] == pytest.approx([f for _, f in theirs], rel=1e-5)


def _run(recipe_argv: list[list[str]], repo: Path) -> None:
    for argv in recipe_argv:
        done = subprocess.run([sys.executable, "-m", "collbench", *argv], cwd=repo,
                              capture_output=True, text=True, timeout=600, check=False,
                              env=dict(os.environ))
        assert done.returncode == 0, (argv, done.stderr[-2000:])


@needs_smpi
@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "data" / "orfeo-thin").is_dir(),
                    reason="the dev set (../shared/data) is not here")
def test_orfeo_thin_recipe_fits_the_all_pairs_pingpongs(tmp_path: Path) -> None:
    import csv
    import statistics

    repo = tmp_path / "repo"
    repo.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)
    _run(recipe("orfeo-thin"), repo)
    written, _, _ = load_cluster(repo / "orfeo-thin-pp.toml")
    builtin, _, _ = load_cluster("orfeo-thin")
    assert written.name == "orfeo-thin-pp" and written.levels.inter_node == \
        builtin.levels.inter_node  # no inter-node pair in the file: kept
    with (SHARED / "data" / "orfeo-thin" / "pingpong.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    for placement, level in (("core", "intra_socket"), ("socket", "inter_socket")):
        small = statistics.median(float(r["latency_us"]) for r in rows
                                  if r["placement"] == placement and r["size_bytes"] == "1")
        got = written.level(level)
        assert got is not None and got.overheads()
        # 0.9 of the measured 1-byte median, nine tenths of it the sender's
        assert got.send_overhead_us == pytest.approx(0.81 * small, rel=1e-3)
    assert written.calibration["max_error_pct_intra_socket"] < 2
    assert written.calibration["max_error_pct_inter_socket"] < 2
    assert written.memory.receiver_copies and written.memory.socket_bandwidth_mbs > 0
    _same_levels(written, "orfeo-thin-pp")  # the built-in is what the recipe writes
