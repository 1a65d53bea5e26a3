"""Numbers that cannot be (issue 26): a cluster description's values are bounded when read
(one line naming the file, key, value and range), calibration never writes one out of
range, and a simulated time beyond the bound is stored failed, not ok. Property tests: the
reader on arbitrary bytes and on finite but absurd values gives a valid cluster (whose
SimGrid XML holds only finite numbers) or one line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.errors import UserError
from collbench.models.predict import MAX_US
from collbench.platforms.calibrate import calibrate, fit_factors, hockney
from collbench.platforms.model import Cluster, Level, parse_cluster
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import Shape, cluster_toml, new_template
from collbench.store import Store
from tests.simgrid_support import SMALL, needs_smpi, small_platform

TEMPLATE = new_template(Shape("t", topology="fat-tree"))


@pytest.mark.parametrize(("change", "key", "bad"), [
    (("latency_us = 0.22", "latency_us = 1e300"), "levels.intra_socket.latency_us", "1e+300"),
    (("latency_us = 0.22", "latency_us = inf"), "levels.intra_socket.latency_us", "inf"),
    (("latency_us = 0.22", "latency_us = 1e-300"), "levels.intra_socket.latency_us",
     "1e-300"),
    (("bandwidth_mbs = 6450", "bandwidth_mbs = 1e-300"), "levels.intra_socket.bandwidth_mbs",
     "1e-300"),
    (("bandwidth_mbs = 6450", "bandwidth_mbs = 1e300"), "levels.intra_socket.bandwidth_mbs",
     "1e+300"),
    (("bandwidth_mbs = 6450", "bandwidth_mbs = 6450\nlat_factor = [[0, 1e300]]"),
     "levels.intra_socket.lat_factor", "1e+300"),
    (("bandwidth_mbs = 6450", "bandwidth_mbs = 6450\nbw_factor = [[0, 1.0], "
                              "[4611686018427387904, 1.0]]"),
     "levels.intra_socket.bw_factor", "4611686018427387904"),
    (("hop_latency_us = 0.1", "hop_latency_us = 1e308"), "topology.hop_latency_us",
     "1e+308"),
    (("oversubscription = 1.0", "oversubscription = 1e300"), "topology.oversubscription",
     "1e+300"),
    (("nodes_per_leaf = 16", "nodes_per_leaf = 4611686018427387904"),
     "topology.nodes_per_leaf", "4611686018427387904"),
    (("eager_threshold = 0", "eager_threshold = 4611686018427387904"),
     "smpi.eager_threshold", "4611686018427387904"),
    (("cfg = []", "cfg = []\n[calibration]\nmax_error_pct_intra_socket = nan"),
     "calibration.max_error_pct_intra_socket", "nan"),
])
def test_absurd_values_are_one_line_naming_key_value_and_range(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str], key: str,
        bad: str) -> None:
    text = TEMPLATE.replace(*change, 1)
    assert text != TEMPLATE
    path = tmp_path / "absurd.toml"
    path.write_text(text)
    assert main(["platform", "show", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}: {key}: " in err and bad in err, err
    assert "valid: " in err, err


def test_calibration_refuses_a_time_that_is_not_one() -> None:
    """A ping-pong of 0 µs (a p2p model with latency 0 evaluated at 0 B) is one line, not
    a division by zero, and nothing is simulated."""
    base = parse_cluster(SMALL, "small")

    def never(*_: object) -> dict[str, dict[int, float]]:
        raise AssertionError("simulated an impossible measurement")

    for t in (0.0, math.inf, -1.0, 1e300):
        with pytest.raises(UserError) as e:
            calibrate({"intra_socket": {0: t, 1024: 1.0, 65536: 5.0}}, base, never, "m")
        assert "\n" not in str(e.value) and "intra_socket" in str(e.value)


def test_calibration_fits_stay_in_range() -> None:
    """A flat curve (no growth with size) would give a bandwidth of 1e9 MB/s, beyond any
    network: it is the bound instead, and every factor is within its range, so the
    description written reads back."""
    flat = {0: 1.0, 1024: 1.0, 65536: 1.0}
    alpha, beta = hockney(flat)
    assert 1e-3 <= alpha <= 1e6 and 1 / beta <= 1e7
    Level(latency_us=alpha, bandwidth_mbs=1 / beta)  # a description holds it
    lat, bw = fit_factors({0: 1.0, 1024: 1e5, 65536: 1e-3}, 1.0, 1e-4)
    assert all(1e-3 <= f <= 1e3 for _, f in lat + bw)


# --- property tests ----------------------------------------------------------------------

# The documented ranges (docs/simgrid.md, "Bounds"), inclusive.
LATENCY, BANDWIDTH, FACTOR, OVERHEAD = (1e-3, 1e6), (1e-3, 1e7), (1e-3, 1e3), (0.0, 1e6)
SIZE, COUNT, OVERSUBSCRIPTION = (0, 1 << 40), (1, 1 << 17), (1.0, 1e3)


def _within(value: float, bounds: tuple[float, float]) -> bool:
    return math.isfinite(value) and bounds[0] <= value <= bounds[1]


def _bounded(c: Cluster) -> None:
    for lv in (c.level(name) for name in ("intra_socket", "inter_socket", "inter_node")):
        if lv is None:
            continue
        assert _within(lv.latency_us, LATENCY) and _within(lv.bandwidth_mbs, BANDWIDTH), lv
        assert _within(lv.send_overhead_us, OVERHEAD), lv
        assert _within(lv.recv_overhead_us, OVERHEAD), lv
        for b, f in (*lv.lat_factor, *lv.bw_factor):
            assert _within(b, SIZE) and _within(f, FACTOR), lv
    for n in (c.nodes, c.sockets_per_node, c.cores_per_socket):
        assert _within(n, COUNT), c
    t = c.topology
    assert t.nodes_per_leaf is None or _within(t.nodes_per_leaf, COUNT), t
    assert _within(t.oversubscription, OVERSUBSCRIPTION), t
    assert _within(t.hop_latency_us, OVERHEAD), t
    assert _within(c.smpi.eager_threshold, SIZE), c.smpi
    bw = c.memory.socket_bandwidth_mbs
    assert bw == 0 or _within(bw, BANDWIDTH), c.memory
    for v in c.calibration.values():
        assert not isinstance(v, float) or math.isfinite(v), c.calibration


def _check(text: str) -> None:
    try:
        cluster = parse_cluster(text, "fuzz.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.toml"), str(e)
        return
    _bounded(cluster)
    xml = platform_xml(cluster)
    assert not re.search(r"\b(inf|nan)", xml, re.I)
    _bounded(parse_cluster(cluster_toml(cluster, exact=True), "again"))  # written: reads


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=1500))
def test_platform_reader_on_arbitrary_bytes(data: bytes) -> None:
    _check(data.decode("utf-8", errors="replace"))


_ABSURD_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 5e-324, 1e-300, 1e-4, 1e3, 1e6, 1e7, 1e8, 1e300, -1.0, math.inf,
                     math.nan, 1.7976931348623157e308]))
_ABSURD_INTS = st.one_of(st.integers(min_value=-2, max_value=2 ** 63 - 1),
                         st.sampled_from([0, 1, 1 << 17, (1 << 17) + 1, (1 << 40) + 1,
                                          1 << 62]))


def _f(sane: float) -> st.SearchStrategy[float]:
    return st.one_of(st.just(sane), _ABSURD_FLOATS)


def _i(sane: int) -> st.SearchStrategy[int]:
    return st.one_of(st.just(sane), _ABSURD_INTS)


def _toml(x: float) -> str:
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf") if math.isinf(x) \
        else repr(x)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lat=_f(1.07), bw=_f(6450.0), factor=_f(1.0), start=_i(1024), hop=_f(0.1),
       over=_f(1.0), leaf=_i(1), eager=_i(0), nodes=_i(2), o_s=_f(0.0))
def test_platform_reader_on_finite_but_absurd_values(lat: float, bw: float, factor: float,
                                                     start: int, hop: float, over: float,
                                                     leaf: int, eager: int, nodes: int,
                                                     o_s: float) -> None:
    text = (TEMPLATE.replace("latency_us = 1.07", f"latency_us = {_toml(lat)}")
            .replace("bandwidth_mbs = 6450", f"bandwidth_mbs = {_toml(bw)}\n"
                     f"lat_factor = [[0, 1.0], [{start}, {_toml(factor)}]]\n"
                     f"send_overhead_us = {_toml(o_s)}")
            .replace("hop_latency_us = 0.1", f"hop_latency_us = {_toml(hop)}")
            .replace("oversubscription = 1.0", f"oversubscription = {_toml(over)}")
            .replace("nodes_per_leaf = 16", f"nodes_per_leaf = {leaf}")
            .replace("eager_threshold = 0", f"eager_threshold = {eager}")
            .replace("nodes = 2", f"nodes = {nodes}", 1))
    _check(text)


# --- simulated times -----------------------------------------------------------------------

@needs_smpi
def test_a_simulated_time_beyond_the_bound_is_stored_failed(
        tmp_path: Path, sim_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The slowest bandwidth a description may hold (1 kB/s) moves 1 GiB in 1.07e12 µs:
    beyond any run, so that point is failed with the reason; 1 B is an ok row."""
    platform = small_platform(tmp_path, SMALL.replace("bandwidth_mbs = 6000",
                                                      "bandwidth_mbs = 0.001"))
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "slow"\n[measure]\ncollectives = ["latency"]\n'
                    'sizes = [1, "1G"]\nnprocs = [2]\nmap_by = ["core"]\niterations = 1\n'
                    'warmup = 0\n[run]\nbackend = "simgrid"\ntimeout = 300\n')
    out = tmp_path / "sim"
    main(["run", str(spec), "--platform", str(platform), "-o", str(out)])
    got = {r[0]: r[1:] for r in Store(out).connect().execute(
        "SELECT size_bytes, status, avg_us, error FROM measurements").fetchall()}
    assert got[1][0] == "ok" and 0 < got[1][1] < MAX_US, got
    status, avg, error = got[1 << 30]
    assert (status, avg) == ("failed", None), got
    assert "beyond" in error and "1e+12" in error, error
