"""Per-message overheads (LogGP o_s, o_r) in simulated platforms: validated, written to the
SimGrid XML, charged by collbench's platform loader per level, and fitted by `platform
calibrate --overheads` so that the ping-pong still takes what was measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.commands.simulated_pingpong import simulate_pingpong
from collbench.platforms.model import load_cluster, parse_cluster
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import cluster_toml
from tests.simgrid_support import linear_bcast_max_us, needs_smpi

LINE = """\
name = "line"
nodes = 1
sockets_per_node = 1
cores_per_socket = 8
[levels.intra_socket]
latency_us = 2.0
bandwidth_mbs = 10000.0
{extra}
"""
OVER = "send_overhead_us = 1.0\nrecv_overhead_us = 0.5"
# o_s and o_r are part of the ping-pong latency: the link keeps 2.0 - 1.5 = 0.5 µs of it.
SAME_PINGPONG = "lat_factor = [[0, 0.25]]"


def test_overheads_are_bounded_and_part_of_the_latency(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    cluster = parse_cluster(LINE.format(extra=OVER), "line.toml")
    level = cluster.levels.intra_socket
    assert level.overheads() and cluster.calibrated()
    assert 'id="collbench/overhead/intra_socket" value="1e-06:5e-07"' in platform_xml(cluster)
    again = parse_cluster(cluster_toml(cluster), "again")  # written and read back
    assert again.levels.intra_socket.send_overhead_us == 1.0
    assert "collbench/overhead" not in platform_xml(parse_cluster(LINE.format(extra=""), "x"))
    for extra, problem in (("send_overhead_us = -1.0", "must be at least 0, got -1.0"),
                           ("send_overhead_us = 1.5\nrecv_overhead_us = 0.5",
                            "not below latency_us")):
        bad = tmp_path / "bad.toml"
        bad.write_text(LINE.format(extra=extra))
        assert main(["platform", "show", str(bad)]) == 2
        err = capsys.readouterr().err
        assert problem in err and str(bad) in err and err.count("\n") == 1, err


@needs_smpi
def test_send_overheads_serialise_a_linear_broadcast(tmp_path: Path, sim_env: Path) -> None:
    with_o, without = tmp_path / "with.toml", tmp_path / "without.toml"
    with_o.write_text(LINE.format(extra=OVER + "\n" + SAME_PINGPONG))
    without.write_text(LINE.format(extra=""))
    # Both platforms give the same ping-pong: 0.5 µs of link + 1.0 + 0.5 of overheads.
    for path in (with_o, without):
        cluster, _, _ = load_cluster(path)
        sim = simulate_pingpong(cluster, ["intra_socket"], [1], tmp_path / f"pp-{path.stem}",
                                find_mpi())
        assert sim["intra_socket"][1] == pytest.approx(2.0 + 17 / 10000, rel=1e-3), path
    # The root's 7 sends of a linear bcast cost it 1 µs each: the last receiver ends at least
    # 6 µs later than when every send leaves at once (link latency alone).
    later = linear_bcast_max_us(with_o, tmp_path, "with", 1) - \
        linear_bcast_max_us(without, tmp_path, "without", 1)
    assert later >= 6.0 * 0.95, later


@needs_smpi
def test_calibrate_takes_overheads_from_a_loggp_file_and_keeps_the_pingpong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    p2p = tmp_path / "m.p2p.toml"
    p2p.write_text("""
format = "collbench-p2p"
version = 1
[levels.core]
latency = "0.8 us"
bandwidth = "9 GB/s"
[levels.core.loggp]
L = "0.3 us"
o_s = "0.2 us"
o_r = "0.3 us"
g = "0.25 us"
G = "0.0001 us/B"
""")
    base, out = tmp_path / "base.toml", tmp_path / "cal.toml"
    assert main(["platform", "new", str(base), "--nodes", "1", "--sockets", "1",
                 "--cores", "4"]) == 0
    capsys.readouterr()
    assert main(["platform", "calibrate", str(p2p), "-o", str(out), "--from", str(base)]) == 0
    printed = capsys.readouterr().out
    assert "o_s 0.2 µs, o_r 0.3 µs per message" in printed
    cluster, _, _ = load_cluster(out)
    level = cluster.levels.intra_socket
    assert (level.send_overhead_us, level.recv_overhead_us) == (0.2, 0.3)
    sim = simulate_pingpong(cluster, ["intra_socket"], [0, 1024, 1 << 20], tmp_path / "pp",
                            find_mpi())
    for size, took in sim["intra_socket"].items():
        assert took == pytest.approx(0.8 + size / 9000, rel=0.02), size
    # A file without LogGP tables given as --overheads: one line, exit 2.
    plain = tmp_path / "plain.p2p.toml"
    plain.write_text(p2p.read_text().split("[levels.core.loggp]")[0])
    assert main(["platform", "calibrate", str(p2p), "-o", str(tmp_path / "x.toml"),
                 "--from", str(base), "--overheads", str(plain)]) == 2
    err = capsys.readouterr().err
    assert "no [levels.<level>.loggp] table" in err and err.count("\n") == 1
    assert json.dumps(cluster.calibration)  # the summary stays plain data


def _campaign(tmp: Path, tag: str, platform: Path, body: str) -> Path:
    spec = tmp / f"{tag}-spec.toml"
    spec.write_text(f'[campaign]\nname = "{tag}"\n{body}\n[run]\nbackend = "simgrid"\n'
                    f'[run.simgrid]\nplatform = "{platform}"\n')
    assert main(["run", str(spec), "-o", str(tmp / tag)]) == 0
    return tmp / tag


@pytest.mark.slow
@needs_smpi
def test_collectives_choose_the_overheads_that_produced_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    """Ground truth from a simulation: a platform whose 2 µs latency is 40 % CPU overhead
    (0.4 µs each side) measures a ping-pong and some collectives; calibrating from the
    ping-pong alone cannot tell the overhead apart, the collectives can."""
    truth = tmp_path / "truth.toml"
    truth.write_text(LINE.format(extra="send_overhead_us = 0.4\nrecv_overhead_us = 0.4\n"
                                       "lat_factor = [[0, 0.6]]"))
    pp = _campaign(tmp_path, "pp", truth, '[measure]\ncollectives = ["latency"]\n'
                   "sizes = [0, 1, 1024, 65536]\nnprocs = [2]\niterations = 2\nwarmup = 1")
    real = _campaign(tmp_path, "real", truth,
                     '[measure]\ncollectives = ["bcast", "gather"]\n'
                     'algorithms = { bcast = ["basic_linear", "binomial"], '
                     'gather = ["basic_linear"] }\nsizes = [1, 1024, 65536]\n'
                     "nprocs = [4, 8]\niterations = 2\nwarmup = 1")
    base, out = tmp_path / "base.toml", tmp_path / "fitted.toml"
    base.write_text(LINE.format(extra=""))
    capsys.readouterr()
    assert main(["platform", "calibrate", str(pp), "-o", str(out), "--from", str(base),
                 "--collectives", str(real)]) == 0
    printed = capsys.readouterr().out
    assert "40% of latency" in printed and "0% of latency" in printed
    cluster, _, _ = load_cluster(out)
    level = cluster.levels.intra_socket
    assert cluster.calibration["collectives_choice"] == "40% of latency", printed
    assert level.send_overhead_us == pytest.approx(0.4, rel=0.02)
    assert cluster.calibration["collectives_median_error_pct"] < 2.0, printed
