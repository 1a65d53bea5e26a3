"""The load term (levels.*.load_latency_us): the latency a message gains when many cores of
its node are busy. Validated when read (one line naming file, key and value), written to
the SimGrid XML only when set, read by `model predict`'s platform model, and fitted by
`platform calibrate --load-barrier` so that the simulated barrier takes the measured time
while the ping-pong (two busy cores) is unchanged."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.commands.simulated_barrier import BarrierSimulations
from collbench.commands.simulated_pingpong import read_latencies, simulate_pingpong
from collbench.errors import UserError
from collbench.models.platform import from_cluster
from collbench.platforms.load import _monotone, parse_barrier
from collbench.platforms.model import load_cluster, parse_cluster
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import cluster_toml
from tests.simgrid_support import TWO_SOCKETS as TWO
from tests.simgrid_support import needs_smpi


@pytest.mark.parametrize(("extra", "shown"), [
    ("load_latency_us = [[0, 0.1]]", "0"),
    ("load_latency_us = [[8, -1.0]]", "-1.0"),
    ("load_latency_us = [[8, 0.1], [4, 0.2]]", "4 comes after 8"),
    ("load_latency_us = [[8, 1e300]]", "1e+300"),
    ("load_latency_us = [[8, nan]]", "nan"),
    ("load_latency_us = [[8]]", "load_latency_us"),
])
def test_bad_load_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      extra: str, shown: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(TWO.format(extra=extra))
    assert main(["platform", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and "inter_socket" in err, err
    assert shown in err, err


def test_load_is_written_to_the_xml_read_back_and_seen_by_the_model() -> None:
    plain = parse_cluster(TWO.format(extra=""), "plain")
    assert "load-latency" not in platform_xml(plain) and not plain.calibrated()
    loaded = parse_cluster(TWO.format(extra="load_latency_us = [[2, 0.0], [8, 0.4]]"), "l")
    assert loaded.calibrated()  # the loader applies it
    assert '<prop id="collbench/load-latency/inter_socket" value="2:0;8:4e-07"/>' \
        in platform_xml(loaded)
    assert parse_cluster(cluster_toml(loaded), "again") == loaded
    level = loaded.level("inter_socket")
    assert level is not None
    assert [level.load_at(b) for b in (1, 2, 5, 8, 64)] == pytest.approx(
        [0.0, 0.0, 0.2, 0.4, 0.4])
    model, _ = from_cluster(loaded)
    assert model.level("socket").load_us(5) == pytest.approx(0.2)
    assert model.level("core").load_us(8) == 0.0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=120))
def test_load_table_on_arbitrary_bytes_is_a_cluster_or_one_line(data: bytes) -> None:
    text = TWO.format(extra="load_latency_us = " + data.decode("utf-8", "replace"))
    try:
        cluster = parse_cluster(text, "fuzz.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.toml")
        return
    assert "inf" not in platform_xml(cluster) and "nan" not in platform_xml(cluster)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=4))
def test_load_barrier_items_on_arbitrary_text_are_times_or_one_line(items: list[str]) -> None:
    try:
        times = parse_barrier(items)
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("--load-barrier: ")
        assert "valid: NPROCS=US" in str(e)
        return
    assert all(n >= 3 and 0 < us <= 1e6 for n, us in times.items())


@given(st.lists(st.floats(0, 10), max_size=8))
def test_monotone_is_non_decreasing_and_keeps_the_mean(values: list[float]) -> None:
    out = _monotone(values)
    assert len(out) == len(values)
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(out))
    assert sum(out) == pytest.approx(sum(values))


@needs_smpi
@pytest.mark.slow
def test_calibrate_fits_the_barrier_and_keeps_the_pingpong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text(TWO.format(extra=""))
    plain = parse_cluster(base.read_text(), str(base))
    # "measured": the plain platform's own ping-pong, and a barrier 1.5 times its simulated
    # one (the simulation's statistic, avg_us, as the fit reads it)
    pp = tmp_path / "pp"
    simulate_pingpong(plain, ["intra_socket", "inter_socket"], [1, 4096], pp, find_mpi())
    slow = 1.5 * BarrierSimulations(tmp_path / "b", find_mpi())(plain, [8])[8]
    out = tmp_path / "loaded.toml"
    assert main(["platform", "calibrate", str(pp), "-o", str(out), "--from", str(base),
                 "--load-barrier", f"8={slow:.4f}"]) == 0
    said = capsys.readouterr().out
    assert "note: load: inter_socket latency +" in said, said
    loaded, _, _ = load_cluster(out)
    level = loaded.level("inter_socket")
    assert level is not None and level.load_latency_us[0] == (2, 0.0)
    assert level.load_at(8) > 0.05
    again = BarrierSimulations(tmp_path / "c", find_mpi())(loaded, [8])[8]
    assert again == pytest.approx(slow, rel=0.03)  # the barrier takes what was measured
    pingpong = simulate_pingpong(loaded, ["intra_socket", "inter_socket"], [1, 4096],
                                 tmp_path / "pp2", find_mpi())
    before = read_latencies(pp, ["intra_socket", "inter_socket"], [1, 4096])
    for lv in ("intra_socket", "inter_socket"):  # two busy cores: no load
        assert pingpong[lv] == pytest.approx(before[lv], rel=0.01), lv
    assert main(["platform", "calibrate", str(pp), "-o", str(tmp_path / "x.toml"),
                 "--from", str(base), "--load-barrier", "8=fast"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'8=fast'" in err, err
    # recalibrated from the loaded description without --load-barrier: the refitted
    # level's load term is gone, and the output says so
    assert main(["platform", "calibrate", str(pp), "-o", str(tmp_path / "y.toml"),
                 "--from", str(out)]) == 0
    said = capsys.readouterr().out
    assert "the load term of two on inter_socket is not kept" in said, said
    refit, _, _ = load_cluster(tmp_path / "y.toml")
    level = refit.level("inter_socket")
    assert level is not None and not level.load_latency_us


def test_model_predict_adds_the_load_to_each_message_by_the_busy_cores() -> None:
    """The same term in `model predict`: a root's message to the other socket arrives
    extra_us later with 8 busy cores, and not at all later with a ping-pong's 2."""
    from collbench.models.algorithms import detail
    from collbench.models.topology import Topology

    plain = from_cluster(parse_cluster(TWO.format(extra=""), "plain"))[0]
    loaded = from_cluster(parse_cluster(
        TWO.format(extra="load_latency_us = [[2, 0.0], [8, 0.4]]"), "loaded"))[0]
    eight = Topology(8, 1, 8, 2, 4, "core")  # ranks 4-7 on the other socket
    before = detail(plain, eight, "bcast", "basic_linear", 2, overlap=True).times_us
    after = detail(loaded, eight, "bcast", "basic_linear", 2, overlap=True).times_us
    assert after[1:4] == pytest.approx(before[1:4])  # one socket: no cross-socket latency
    assert [a - b for a, b in zip(after[4:], before[4:], strict=True)] == \
        pytest.approx([0.4] * 4)
    two = Topology(2, 1, 2, 2, 4, "socket")
    assert detail(loaded, two, "bcast", "basic_linear", 2, overlap=True).times_us == \
        pytest.approx(detail(plain, two, "bcast", "basic_linear", 2, overlap=True).times_us)
