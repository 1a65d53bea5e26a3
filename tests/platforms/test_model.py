"""Cluster descriptions: built-ins, validation errors, template, XML, placement (no SimGrid)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.errors import UserError
from collbench.platforms.model import builtin_names, load_cluster, parse_cluster
from collbench.platforms.placement import hostfile, nodes_used, place
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import Shape, cluster_toml, new_template


def test_builtins_load_with_the_issue_numbers() -> None:
    assert {"orfeo-thin", "jupiter"} <= set(builtin_names())
    orfeo, _, _ = load_cluster("orfeo-thin")
    assert (orfeo.nodes, orfeo.sockets_per_node, orfeo.cores_per_socket) == (2, 2, 12)
    levels = orfeo.levels
    assert levels.inter_socket is not None and levels.inter_node is not None
    assert (levels.intra_socket.latency_us, levels.intra_socket.bandwidth_mbs) == (0.22, 6450)
    assert (levels.inter_socket.latency_us, levels.inter_socket.bandwidth_mbs) == (0.54, 5680)
    assert (levels.inter_node.latency_us, levels.inter_node.bandwidth_mbs) == (1.07, 12176)
    epyc, _, _ = load_cluster("orfeo-epyc")  # the CCX (4 cores) is its "socket"
    assert (epyc.nodes, epyc.sockets_per_node, epyc.cores_per_socket) == (2, 32, 4)
    assert epyc.calibrated() and epyc.levels.inter_node is not None
    jupiter, _, _ = load_cluster("jupiter")
    assert (jupiter.nodes, jupiter.cores_per_node, jupiter.cores) == (32, 16, 512)
    assert jupiter.topology.kind == "fat-tree"


TEMPLATE = new_template(Shape("t"))


@pytest.mark.parametrize(("change", "message"), [
    (("nodes = 2", "nodes = 0"), "t.toml: nodes: must be at least 1, got 0"),
    (("nodes = 2", "nodez = 2"), "t.toml: unknown key 'nodez'; valid: name, description"),
    (('kind = "flat"', 'kind = "torus"'),
     "t.toml: topology.kind: 'torus' is not valid; valid: flat, fat-tree"),
    (("latency_us = 0.54", "latency_us = -1"),
     "t.toml: levels.inter_socket.latency_us: must be greater than 0, got -1"),
    (("[levels.inter_node]", "[levels.internode]"),
     "t.toml: levels: unknown key 'internode'; valid: intra_socket, inter_socket, "
     "inter_package, inter_node (did you mean inter_node?)"),
    (("latency_us = 1.07", "latency_us = 0.3"),
     "t.toml: levels.inter_node.latency_us: 0.3 is below levels.inter_socket.latency_us"),
    (("cfg = []", 'cfg = ["smpi/bcast:flattree"]'),
     "t.toml: smpi.cfg[0]: 'smpi/bcast' is set by collbench"),
])
def test_invalid_description_is_one_line_naming_the_key(change: tuple[str, str],
                                                        message: str) -> None:
    text = TEMPLATE.replace(*change, 1)
    assert text != TEMPLATE
    with pytest.raises(UserError) as e:
        parse_cluster(text, "t.toml")
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_missing_level_and_raw_xml_are_rejected(tmp_path: Path) -> None:
    one_level = TEMPLATE.split("[levels.inter_socket]")[0] + "[topology]\nkind = \"flat\"\n"
    with pytest.raises(UserError, match=r"levels\.inter_socket: required when sockets_per_node"):
        parse_cluster(one_level, "t.toml")
    xml = tmp_path / "p.xml"
    xml.write_text("<platform/>")
    with pytest.raises(UserError, match="SimGrid XML file is not accepted"):
        load_cluster(xml)
    with pytest.raises(UserError, match=r"neither a built-in nor a file; valid: .*orfeo-thin"):
        load_cluster("orfeo-thn")


def test_template_and_writer_round_trip() -> None:
    for topology in ("flat", "fat-tree"):
        cluster = parse_cluster(new_template(Shape("t", nodes=40, topology=topology)), "t")
        assert cluster.topology.kind == topology and cluster.cores == 960
        again = parse_cluster(cluster_toml(cluster, "# header"), "again")
        assert again == cluster


def test_platform_xml_is_well_formed_and_deterministic() -> None:
    for name in builtin_names():
        cluster, _, _ = load_cluster(name)
        text = platform_xml(cluster)
        assert text == platform_xml(cluster)
        root = ET.fromstring(text.split("\n", 2)[2])  # past the XML and DOCTYPE lines
        hosts = root.findall(".//host")
        assert len(hosts) == cluster.cores  # one host per core
        ids = [e.get("id") for e in root.iter() if e.get("id") and e.tag in ("host", "link")]
        assert len(ids) == len(set(ids))


def test_placement_follows_open_mpi_mapping() -> None:
    c, _, _ = load_cluster("orfeo-thin")  # 2 nodes × 2 sockets × 12 cores
    # core: fill node 0 socket 0 first
    assert place(c, 3, "core") == [(0, 0), (0, 1), (0, 2)]
    # socket: round-robin over the sockets of node 0 (core 12 is socket 1's first)
    assert place(c, 4, "socket") == [(0, 0), (0, 12), (0, 1), (0, 13)]
    # node: round-robin over nodes
    assert place(c, 4, "node") == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert nodes_used(c, 24, "core") == 1 and nodes_used(c, 25, "core") == 2
    assert nodes_used(c, 2, "node") == 2
    assert hostfile(c, 2, "node") == "node0-c0\nnode1-c0\n"
    with pytest.raises(UserError, match="nprocs 49 exceeds the 48 cores of platform orfeo-thin"):
        place(c, 49, "core")
    with pytest.raises(UserError, match="map_by 'numa' is not simulated; valid: core, socket"):
        place(c, 2, "numa")


def test_platform_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["platforms"]) == 0
    out = capsys.readouterr().out
    assert "orfeo-thin" in out and "jupiter" in out and "12176" in out
    target = tmp_path / "mine.toml"
    assert main(["platform", "new", str(target), "--nodes", "4", "--cores", "8"]) == 0
    assert parse_cluster(target.read_text(), "mine").cores == 4 * 2 * 8
    assert main(["platform", "new", str(target)]) == 2  # exists: needs --force
    assert "already exists" in capsys.readouterr().err
    assert main(["platform", "show", "jupiter"]) == 0
    assert "32 nodes" in capsys.readouterr().out
    xml = tmp_path / "j.xml"
    assert main(["platform", "xml", str(target), "-o", str(xml)]) == 0
    assert xml.read_text().count("<host ") == 64


def test_platform_cfg_replaces_what_collbench_derives_from_eager_threshold() -> None:
    # SimGrid keeps the first of two props with one key: the platform's own value must be
    # the only one, not a second prop after collbench's.
    text = TEMPLATE.replace("eager_threshold = 0", "eager_threshold = 8192").replace(
        "cfg = []", 'cfg = ["smpi/send-is-detached-thresh:4096", "smpi/or:0:1e-7:0"]')
    xml = platform_xml(parse_cluster(text, "t.toml"))
    props = re.findall(r'<prop id="(smpi/[^"]+)" value="([^"]*)"/>', xml)
    assert props == [("smpi/async-small-thresh", "8192"),
                     ("smpi/send-is-detached-thresh", "4096"), ("smpi/or", "0:1e-7:0")]
    default = platform_xml(parse_cluster(TEMPLATE.replace("eager_threshold = 0",
                                                          "eager_threshold = 8192"), "t"))
    assert '<prop id="smpi/send-is-detached-thresh" value="65536"/>' in default
