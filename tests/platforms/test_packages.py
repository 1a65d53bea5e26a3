"""Packages (issue 25): a node's sockets grouped into processors, with an `inter_package`
level between them: validation (one line), the SimGrid routes, the models' pricing, the
calibration that derives the level from a cross-package ping-pong, and (SimGrid) the
simulated cross-package ping-pong."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.errors import UserError
from collbench.models.algorithms import detail
from collbench.models.platform import from_cluster
from collbench.models.predict import topology
from collbench.platforms.calibrate import with_package
from collbench.platforms.load import with_load
from collbench.platforms.model import Cluster, load_cluster, parse_cluster
from collbench.platforms.simgrid_xml import host_id, platform_xml
from collbench.platforms.template import Shape, cluster_toml, new_template
from collbench.store import Store
from tests.platforms.test_platform_bounds import _check
from tests.simgrid_support import needs_smpi

# 1 node × 4 sockets (2 packages of 2) × 2 cores, the template's numbers (inter_socket 0.54
# µs, inter_package 0.54 µs): tests set inter_package's latency.
TEMPLATE = new_template(Shape("p", nodes=2, sockets=4, cores=2, sockets_per_package=2))
PKG = "[levels.inter_package]  # two sockets in different packages of one node (--map-by " \
      "package)\nlatency_us = 0.54"


def packaged(latency: float = 0.9, per_package: int = 2) -> Cluster:
    text = TEMPLATE.replace(PKG, PKG.replace("0.54", repr(latency)), 1) \
        .replace("sockets_per_package = 2", f"sockets_per_package = {per_package}", 1)
    return parse_cluster(text, "p.toml")


@pytest.mark.parametrize(("change", "message"), [
    (("sockets_per_package = 2", "sockets_per_package = 3"),
     "p.toml: sockets_per_package: 3 does not divide sockets_per_node (4); valid: 1, 2, 4"),
    (("sockets_per_package = 2", "sockets_per_package = 0"),
     "p.toml: sockets_per_package: must be at least 1, got 0"),
    (("sockets_per_package = 2", "sockets_per_package = 4"),
     "p.toml: levels.inter_package: needs packages: set sockets_per_package below "
     "sockets_per_node (4)"),
    ((PKG, PKG.replace("0.54", "0.3")),
     "p.toml: levels.inter_package.latency_us: 0.3 is below levels.inter_socket.latency_us "
     "(0.54)"),
])
def test_bad_package_values_are_one_line(change: tuple[str, str], message: str) -> None:
    text = TEMPLATE.replace(*change, 1)
    assert text != TEMPLATE
    with pytest.raises(UserError) as e:
        parse_cluster(text, "p.toml")
    assert str(e.value).startswith(message), str(e.value)
    assert "\n" not in str(e.value)


def test_bad_command_line_values_are_one_line_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["platform", "new", str(tmp_path / "x.toml"), "--sockets", "4",
                 "--sockets-per-package", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--sockets-per-package: 3 is not valid; valid: a divisor of "
                        "--sockets (4) below it") and "\n" not in err
    assert not (tmp_path / "x.toml").exists()
    csv = tmp_path / "pp.csv"
    csv.write_text("size_bytes,latency_us\n2,0.4\n1024,0.8\n")
    for mapping, folder in (("socket", "pp"), ("core", "pp"), ("socket", "pkg")):
        assert main(["ingest", str(csv), "--collective", "latency", "--nprocs", "2",
                     "--column", "size_bytes=size_bytes", "--column", "avg_us=latency_us",
                     "--mapping", mapping, "-o", str(tmp_path / folder)]) == 0
    capsys.readouterr()
    calibrate = ["platform", "calibrate", str(tmp_path / "pp"), "-o", str(tmp_path / "y.toml")]
    for extra, said in (
            (["--inter-package", str(tmp_path / "nowhere")],
             f"--inter-package: {tmp_path / 'nowhere'}: not a results folder"),
            (["--inter-package", str(tmp_path / "pkg")],  # the template: one package
             f"--inter-package: {tmp_path / 'pkg'}: --from y has one package per node"),
            (["--inter-package", str(tmp_path / "pp")],
             f"--inter-package: {tmp_path / 'pp'}: ping-pongs at inter_socket, intra_socket;"
             " valid: rows with mapping socket only")):
        assert main([*calibrate, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"collbench: error: {said}") and "\n" not in err, err
    assert not (tmp_path / "y.toml").exists()


def _route_latency(xml: str, src: str, dst: str) -> tuple[float, list[str]]:
    """Latency (µs) and links of the route src -> dst inside one node's zone: host to its
    gateway, gateway to gateway, gateway to host (as Floyd composes the one-hop routes)."""
    root = ET.fromstring(xml.split("\n", 2)[2])
    lat = {ln.get("id"): float(str(ln.get("latency")).removesuffix("us"))
           for ln in root.iter("link")}
    hops = {(r.get("src"), r.get("dst")): [c.get("id") for c in r.iter("link_ctn")]
            for r in root.iter("route")}

    def gateway(host: str) -> str:
        return next(d for (s, d) in hops if s == host and "-x" in str(d))

    gs, gd = gateway(src), gateway(dst)
    links = [*hops[(src, gs)], *(hops.get((gs, gd)) or hops[(gd, gs)]), *hops[(dst, gd)]]
    return sum(lat[str(k)] for k in links), [str(k) for k in links]


def test_a_cross_package_route_takes_the_levels_latency() -> None:
    c = packaged(0.9)
    xml = platform_xml(c)
    assert '<prop id="collbench/sockets_per_package" value="2"/>' in xml
    # cores 0-1 socket 0, 2-3 socket 1 (package 0), 4-5 socket 2 (package 1)
    same, links = _route_latency(xml, host_id(0, 0), host_id(0, 2))
    assert same == pytest.approx(0.54) and "node0-xgmi" not in links
    cross, links = _route_latency(xml, host_id(0, 0), host_id(0, 4))
    assert cross == pytest.approx(0.9) and "node0-xgmi" in links
    # without the level: no hop, every pair of sockets is inter_socket
    flat = parse_cluster(TEMPLATE.split("[levels.inter_package]")[0]
                         + TEMPLATE.split("[levels.inter_package]")[1].split("\n", 3)[3],
                         "flat.toml")
    assert flat.levels.inter_package is None and flat.packages_per_node == 2
    xml = platform_xml(flat)
    assert "xgmi" not in xml and "sockets_per_package" not in xml
    assert _route_latency(xml, host_id(0, 0), host_id(0, 4))[0] == pytest.approx(0.54)
    assert parse_cluster(cluster_toml(c), "again") == c  # the writer keeps both keys


def test_model_predict_prices_cross_package_messages_with_the_level() -> None:
    c = packaged(0.9)
    model, shape = from_cluster(c)
    assert shape.sockets_per_package == 2 and "package" in model.levels
    # --map-by socket, 4 ranks: rank 0 socket 0, 1 socket 1, 2 socket 2 (other package)
    topo = topology(4, 1, 4, "socket", shape)
    assert [topo.link_level(0, r) for r in (1, 2, 3)] == ["socket", "package", "package"]
    assert [topo.level(0, r) for r in (1, 2, 3)] == ["socket"] * 3  # explain's 3 levels
    pred = detail(model, topology(3, 1, 3, "socket", shape), "bcast", "basic_linear", 8,
                  overlap=True)
    flat_model, flat_shape = from_cluster(c.model_copy(update={
        "levels": c.levels.model_copy(update={"inter_package": None})}))
    assert "package" not in flat_model.levels  # falls back to inter_socket
    flat = detail(flat_model, topology(3, 1, 3, "socket", flat_shape), "bcast",
                  "basic_linear", 8, overlap=True)
    # rank 1 (same package) as before; rank 2 (the other package) the level's 0.36 µs later
    assert pred.times_us[1] == pytest.approx(flat.times_us[1])
    assert pred.times_us[2] - flat.times_us[2] == pytest.approx(0.9 - 0.54)


def test_model_predict_platform_command_uses_the_level(tmp_path: Path) -> None:
    """`model predict --platform FILE`: a bcast whose root's messages cross packages takes
    the level's extra latency, which the same platform without the level does not."""
    c = packaged(0.9)
    flat = c.model_copy(update={"levels": c.levels.model_copy(update={"inter_package": None})})
    times = []
    for name, cluster in (("pkg", c), ("flat", flat)):
        (tmp_path / f"{name}.toml").write_text(cluster_toml(cluster))
        out = tmp_path / f"pred-{name}"
        assert main(["model", "predict", "--platform", str(tmp_path / f"{name}.toml"),
                     "--collective", "bcast", "--algorithms", "basic_linear", "--nprocs",
                     "3", "--map-by", "socket", "--sizes", "8", "-o", str(out)]) == 0
        times.append(Store(out).connect().execute(
            "SELECT avg_us FROM measurements").fetchall()[0][0])
    assert times[0] > times[1] + 0.1  # the package hop (0.36 µs) on rank 2's message


def test_calibration_derives_the_level_from_a_cross_package_pingpong() -> None:
    base = packaged(0.9)
    base = with_load(base.model_copy(update={"levels": base.levels.model_copy(
        update={"inter_package": None})}), [(2, 0.0), (8, 0.3)])
    xs = base.levels.inter_socket
    assert xs is not None
    xs_measured = {2: 0.5, 1024: 0.8, 65536: 10.0}
    notes: list[str] = []
    c = with_package(base, {2: 0.8, 1024: 1.2}, xs_measured, notes)
    pkg = c.levels.inter_package
    assert pkg is not None
    hop = 0.35  # median of 0.3 and 0.4
    assert pkg.latency_us == pytest.approx(xs.latency_us + hop)
    for (b, f), (b2, f2) in zip(xs.lat_factor, pkg.lat_factor, strict=True):
        assert b == b2 and pkg.latency_us * f2 == pytest.approx(xs.latency_us * f + hop)
    assert (pkg.bandwidth_mbs, pkg.bw_factor, pkg.load_latency_us) == \
        (xs.bandwidth_mbs, xs.bw_factor, xs.load_latency_us)
    assert c.calibration["inter_package_hop_us"] == pytest.approx(hop)
    assert "inter_package: inter_socket + 0.35 µs" in notes[0]
    loaded = with_load(c, [(2, 0.0), (16, 0.5)])  # the load fit moves both levels
    assert loaded.levels.inter_package is not None
    assert loaded.levels.inter_package.load_latency_us == [(2, 0.0), (16, 0.5)]
    with pytest.raises(UserError, match="faster than inter_socket at 2 B"):
        with_package(base, {2: 0.4}, xs_measured, [])
    with pytest.raises(UserError, match="no inter-socket ping-pong at these sizes"):
        with_package(base, {3: 0.9}, xs_measured, [])
    one, _, _ = load_cluster("orfeo-thin")
    with pytest.raises(UserError, match="one package per node"):
        with_package(one, {2: 0.9}, xs_measured, [])


def test_builtin_orfeo_epyc_has_its_two_processors() -> None:
    c, _, _ = load_cluster("orfeo-epyc")
    xs, pkg = c.levels.inter_socket, c.levels.inter_package
    assert (c.sockets_per_node, c.sockets_per_package, c.packages_per_node) == (32, 16, 2)
    assert xs is not None and pkg is not None
    # the published 2-byte cpu0-cpu64 ping-pong over the cross-CCX one
    assert c.calibration["inter_package_hop_us"] == pytest.approx(
        pkg.latency_us - xs.latency_us)
    assert 0.2 < c.calibration["inter_package_hop_us"] < 0.4


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(per=st.one_of(st.integers(-2, 70), st.sampled_from([1 << 17, 1 << 40])),
       lat=st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                     st.sampled_from([0.54, 0.9, 1e-300, 1e6, 1e7])))
def test_package_keys_on_absurd_values(per: int, lat: float) -> None:
    """A valid cluster (finite XML, written back as read) or one line naming the file."""
    text = "nan" if math.isnan(lat) else ("inf" if lat > 0 else "-inf") \
        if math.isinf(lat) else repr(lat)
    _check(TEMPLATE.replace(PKG, PKG.replace("0.54", text), 1)
           .replace("sockets_per_package = 2", f"sockets_per_package = {per}", 1)
           .replace('name = "p"', 'name = "fuzz"'))


@needs_smpi
@pytest.mark.slow
def test_simulated_cross_package_pingpong_adds_the_hop(tmp_path: Path, sim_env: Path) -> None:
    """SimGrid through collbench's loader (a calibrated platform): with one socket per
    package, --map-by socket's two ranks are in different packages, and the ping-pong takes
    inter_socket's time plus the hop at every size, factors and overheads included."""
    from collbench.catalog.mpi import find_mpi
    from collbench.commands.simulated_pingpong import simulate_pingpong

    epyc, _, _ = load_cluster("orfeo-epyc")
    shape = parse_cluster(new_template(Shape("two", nodes=1, sockets=2, cores=2,
                                             sockets_per_package=1)), "two.toml")
    both = shape.model_copy(update={"levels": shape.levels.model_copy(update={
        "intra_socket": epyc.levels.intra_socket, "inter_socket": epyc.levels.inter_socket,
        "inter_package": epyc.levels.inter_package})})
    assert both.calibrated()
    sizes = [2, 1024, 65536]
    cross = simulate_pingpong(both, ["inter_socket"], sizes, tmp_path / "cross",
                              find_mpi())["inter_socket"]
    one = both.model_copy(update={"sockets_per_package": None, "levels": both.levels
                                  .model_copy(update={"inter_package": None})})
    within = simulate_pingpong(one, ["inter_socket"], sizes, tmp_path / "within",
                               find_mpi())["inter_socket"]
    hop = epyc.calibration["inter_package_hop_us"]
    for m in sizes:
        assert cross[m] - within[m] == pytest.approx(hop, abs=2e-3), m
