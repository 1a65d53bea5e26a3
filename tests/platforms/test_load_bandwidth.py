"""[memory] load_bandwidth (issue 25): the load term slows a level's bytes as well as its
latency, by 1 + load_latency / latency_us at that many busy cores of the sender's node (a
copy moves its cache lines at the loaded latency: Little's law). Written by `platform
calibrate --load-bandwidth`, read back, carried to SimGrid's loader and to `model
predict`, which then agree; a ping-pong's two busy cores see no change."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from collbench.platforms.model import parse_cluster
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import cluster_toml
from tests.simgrid_support import SMALL, needs_smpi, simulated_us, small_platform

# 8 ranks --map-by core keep 4 cores of each node busy: cross-socket latency + 0.5 µs,
# its bytes 1 + 0.5 / 0.5 = 2 times slower with the flag
LOADED = SMALL.replace("bandwidth_mbs = 5000\n", "bandwidth_mbs = 5000\n"
                       "load_latency_us = [[2, 0.0], [4, 0.5]]\n") + "\n[memory]\n"
SLOWED = LOADED + "load_bandwidth = true\n"
SIZE = 1 << 20


def test_the_slowdown_follows_the_load_and_reaches_the_loader() -> None:
    cluster = parse_cluster(SLOWED, "s.toml")
    level = cluster.levels.inter_socket
    assert level is not None
    assert [level.slowdown_at(b) for b in (1, 2, 3, 4, 64)] == [1.0, 1.0, 1.5, 2.0, 2.0]
    xml = platform_xml(cluster)
    assert 'id="collbench/load-slowdown/inter_socket" value="2:1;4:2"' in xml
    assert "load-slowdown" not in platform_xml(parse_cluster(LOADED, "l.toml"))
    again = parse_cluster(cluster_toml(cluster, "# s"), "again.toml")
    assert again.memory.load_bandwidth and not parse_cluster(LOADED, "l").memory.load_bandwidth


def test_a_bad_value_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(LOADED + 'load_bandwidth = "often"\n')
    assert main(["platform", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "load_bandwidth" in err[0] and "bad.toml" in err[0]


def test_calibrate_needs_a_load_term(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "pp.csv"
    csv.write_text("size_bytes,avg_us\n8,0.2\n1024,0.5\n65536,4.0\n")
    assert main(["ingest", str(csv), "--collective", "latency", "--nprocs", "2", "--mapping",
                 "core", "--column", "size_bytes=size_bytes", "--column", "avg_us=avg_us",
                 "--mpi", "openmpi", "-o", str(tmp_path / "pp")]) == 0
    capsys.readouterr()
    assert main(["platform", "calibrate", str(tmp_path / "pp"), "--from", "orfeo-thin",
                 "--load-bandwidth", "-o", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--load-bandwidth" in err[0] and "--load-barrier" in err[0]
    assert not (tmp_path / "c.toml").exists()


def _model(text: str) -> tuple[float, float, float]:
    from collbench.models.networks import NETWORKS
    from collbench.models.platform import from_cluster
    from collbench.models.predict import predict_point, topology

    model, shape = from_cluster(parse_cluster(text, "m.toml"))
    return predict_point(model, topology(8, 2, 4, "core", shape, "model"), "scatter",
                         "basic_linear", SIZE, net=NETWORKS["mpi"])


@needs_smpi
def test_simgrid_and_the_model_slow_the_same_bytes(tmp_path: Path, sim_env: Path) -> None:
    """scatter basic_linear, 8 ranks × 1 MiB: the root's blocking sends go one after
    another, two of them across sockets (210 µs each at 5000 MB/s). Slowed, those take
    twice as long: the last receiver over 2 × 210 µs later, in SimGrid and in the model
    alike (within 2 %); the other levels' transfers are not slowed."""
    times = {}
    for tag, text in (("loaded", LOADED), ("slowed", SLOWED)):
        (tmp_path / tag).mkdir()
        platform = small_platform(tmp_path / tag, text)
        times[tag] = simulated_us(platform, tmp_path / tag, "max", SIZE, "scatter", "max_us",
                                  "4.1")
    cross = SIZE / 5000.0  # µs: one cross-socket transfer's bytes, unloaded
    assert times["slowed"] - times["loaded"] == pytest.approx(2 * cross, rel=0.05), times
    for tag, text in (("loaded", LOADED), ("slowed", SLOWED)):
        assert _model(text)[2] == pytest.approx(times[tag], rel=0.02), (tag, times)
