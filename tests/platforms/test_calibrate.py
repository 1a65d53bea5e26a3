"""Calibration: fit per level, simulate with real smpirun, reproduce the measured ping-pong."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.analyse.modeldata import pingpong_medians as read_pingpongs
from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.commands.simulated_pingpong import simulate_pingpong
from collbench.platforms.calibrate import fit_factors, hockney
from collbench.platforms.model import load_cluster, parse_cluster
from tests.simgrid_support import SMALL, needs_smpi

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples" / "osu-7.4"
SIZES = [0] + [2**i for i in range(21)]


def test_hockney_recovers_a_straight_line() -> None:
    points = {m: 0.8 + m / 9000.0 for m in SIZES}
    alpha, beta = hockney(points)
    assert alpha == pytest.approx(0.8, rel=1e-9) and 1 / beta == pytest.approx(9000, rel=1e-9)
    lat, bw = fit_factors(points, alpha, beta)
    # a line needs almost no correction (only for SMPI's 16-byte envelope); buckets start
    # just above the previous size
    assert all(f == pytest.approx(1, abs=1e-2) for _, f in lat + bw)
    assert [b for b, _ in lat][:4] == [0, 1, 2, 3]


def _osu_latency(path: Path, f: object) -> None:
    assert callable(f)
    lines = ["# OSU MPI Latency Test v7.4", "# Datatype: MPI_CHAR.",
             "# Size       Avg Latency(us)"]
    lines += [f"{s:<10d}{f(s):>18.2f}" for s in SIZES]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    """A results folder of ping-pongs at three levels, each with its own shape: the real
    osu_latency sample of this repository (intra-socket) and two curves with protocol
    steps at different sizes (inter-socket, inter-node)."""
    out = tmp_path / "probe"
    socket, node = tmp_path / "socket.txt", tmp_path / "node.txt"
    _osu_latency(socket, lambda s: 0.54 + s / 5680 + (0.9 if s > 8192 else 0.0))
    _osu_latency(node, lambda s: 1.07 + s / (12176 * (0.6 if s < 65536 else 1.0))
                 + (1.5 if s > 16384 else 0.0))
    for file, mapping, nodes in ((SAMPLES / "osu_latency_np2.txt", "core", "1"),
                                 (socket, "socket", "1"), (node, "node", "2")):
        assert main(["ingest", str(file), "-o", str(out), "--nprocs", "2", "--nodes", nodes,
                     "--mapping", mapping, "--collective", "latency"]) == 0
    return out


def test_read_pingpongs_groups_rows_by_placement_level(probe: Path) -> None:
    measured, _ = read_pingpongs(probe)
    assert sorted(measured) == ["inter_node", "inter_socket", "intra_socket"]
    assert measured["intra_socket"][1048576] == pytest.approx(60.22)  # the OSU sample
    assert len(measured["inter_node"]) == len(SIZES)


@needs_smpi
def test_uncalibrated_platform_reproduces_its_own_numbers(tmp_path: Path,
                                                          sim_env: Path) -> None:
    # SMPI's default factors (fitted on another machine) would roughly double latency.
    cluster = parse_cluster(SMALL, "small")
    sim = simulate_pingpong(cluster, ["intra_socket", "inter_socket", "inter_node"],
                            [1, 1048576], tmp_path / "sim", find_mpi())
    for name, level in (("intra_socket", cluster.levels.intra_socket),
                        ("inter_socket", cluster.levels.inter_socket),
                        ("inter_node", cluster.levels.inter_node)):
        assert level is not None
        for size, took in sim[name].items():
            # SMPI adds a 16-byte envelope to every message
            expected = level.latency_us + (size + 16) / level.bandwidth_mbs
            assert took == pytest.approx(expected, rel=1e-4), (name, size)


@needs_smpi
def test_calibration_round_trip_reproduces_the_measured_pingpong(
        probe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        sim_env: Path) -> None:
    out = tmp_path / "mycluster.toml"
    assert main(["platform", "calibrate", str(probe), "-o", str(out), "--from",
                 "orfeo-thin", "--name", "mycluster"]) == 0
    assert "wrote" in capsys.readouterr().out
    cluster, _, _ = load_cluster(out)  # the file as written, read back
    assert cluster.name == "mycluster" and cluster.nodes == 2 and cluster.calibrated()
    measured, _ = read_pingpongs(probe)
    # Simulate independently of the calibration code: the written file alone must do it.
    sim = simulate_pingpong(cluster, list(measured), SIZES, tmp_path / "sim", find_mpi())
    errors = {(lv, s): sim[lv][s] / t - 1 for lv, pts in measured.items()
              for s, t in pts.items()}
    worst = max(errors.items(), key=lambda kv: abs(kv[1]))
    assert abs(worst[1]) < 0.02, worst  # within 2 % at every size and level
    assert cluster.calibration["max_error_pct_inter_node"] < 2
    # the straight-line part: the inter-socket level's latency is its measured small size
    assert cluster.levels.inter_socket is not None
    assert cluster.levels.inter_socket.latency_us == pytest.approx(0.54, rel=0.03)


def test_calibrate_without_latency_rows_is_a_clear_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bcast"
    assert main(["ingest", str(SAMPLES / "osu_bcast_np2.txt"), "-o", str(out),
                 "--nprocs", "2"]) == 0
    assert main(["platform", "calibrate", str(out), "-o", str(tmp_path / "x.toml")]) == 2
    err = capsys.readouterr().err
    assert "no ok latency rows" in err and err.count("\n") == 1
