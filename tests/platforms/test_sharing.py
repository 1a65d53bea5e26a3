"""How concurrent transfers share a node ([memory]: receiver_copies, socket_bandwidth_mbs):
validated when read (one line naming file, key, value and range), written to the SimGrid
XML only when set, set by `platform calibrate --receiver-copies --socket-bandwidth`, and in
a simulation a linear root's concurrent large messages run in parallel with receiver
copies and are held to the socket's bandwidth with it; a ping-pong is the same either way."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collbench.catalog.mpi import find_mpi
from collbench.cli import main
from collbench.commands.simulated_pingpong import simulate_pingpong
from collbench.errors import UserError
from collbench.platforms.model import load_cluster, parse_cluster
from collbench.platforms.simgrid_xml import platform_xml
from collbench.platforms.template import cluster_toml
from tests.simgrid_support import TWO_SOCKETS as TWO
from tests.simgrid_support import linear_bcast_max_us, needs_smpi

# TWO: a root on socket 0 sends to 3 cores of its own socket and to 4 of the other, whose
# traffic all leaves through socket 0's fabric when it has one.


@pytest.mark.parametrize(("extra", "key", "shown"), [
    ("[memory]\nsocket_bandwidth_mbs = -1.0", "memory.socket_bandwidth_mbs", "-1.0"),
    ("[memory]\nsocket_bandwidth_mbs = 1e300", "memory.socket_bandwidth_mbs", "1e+300"),
    ("[memory]\nsocket_bandwidth_mbs = nan", "memory.socket_bandwidth_mbs", "nan"),
    ("[memory]\nreceiver_copies = \"yes\"", "memory.receiver_copies", "yes"),
    ("[memory]\nreceiver_copy = true", "memory", "receiver_copy"),
])
def test_bad_sharing_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         extra: str, key: str, shown: str) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(TWO.format(extra=extra))
    assert main(["platform", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err and key in err and shown in err, err
    assert "valid" in err or "expected true or false" in err, err  # the valid choices


def test_sharing_is_written_to_the_xml_and_read_back() -> None:
    plain = parse_cluster(TWO.format(extra=""), "plain")
    xml = platform_xml(plain)
    assert "-out" not in xml and "fabric" not in xml and 'symmetrical="NO"' not in xml
    assert "[memory]" not in cluster_toml(plain)  # the default is not written
    shared = parse_cluster(TWO.format(extra="[memory]\nreceiver_copies = true\n"
                                            "socket_bandwidth_mbs = 20000"), "shared")
    xml = platform_xml(shared)
    assert '<link id="node0-c0-mem-out" bandwidth="10000MBps" latency="0.25us" ' \
           'sharing_policy="FATPIPE"/>' in xml
    assert '<link id="node0-c0-mem-in" bandwidth="10000MBps" latency="0.25us" ' \
           'sharing_policy="SHARED"/>' in xml
    assert '<link id="node0-s1-fabric" bandwidth="20000MBps" latency="0us" ' \
           'sharing_policy="SPLITDUPLEX"/>' in xml
    assert ('<route src="node0-x0" dst="node0-x1"><link_ctn id="node0-s0-fabric" '
            'direction="UP"/><link_ctn id="node0-bus"/><link_ctn id="node0-s1-fabric" '
            'direction="DOWN"/></route>') in xml
    again = parse_cluster(cluster_toml(shared), "again")
    assert again.memory == shared.memory


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
def test_memory_table_on_arbitrary_bytes_is_a_cluster_or_one_line(data: bytes) -> None:
    text = TWO.format(extra="[memory]\n" + data.decode("utf-8", "replace"))
    try:
        cluster = parse_cluster(text, "fuzz.toml")
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith("fuzz.toml")
        return
    assert "inf" not in platform_xml(cluster) and "nan" not in platform_xml(cluster)


@needs_smpi
@pytest.mark.slow
def test_receiver_copies_overlap_a_roots_sends_and_the_socket_holds_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text(TWO.format(extra=""))
    variants = {"shared": [], "copies": ["--receiver-copies"],
                "fabric": ["--receiver-copies", "--socket-bandwidth", "10000"]}
    times, pingpongs = {}, {}
    for tag, flags in variants.items():
        # the calibration's own input: a ping-pong simulated on the plain platform
        out = tmp_path / f"{tag}.toml"
        cluster = parse_cluster(base.read_text(), str(base))
        text = cluster_toml(cluster)
        out.write_text(text)
        if flags:  # calibrate from the plain platform's ping-pong with the sharing flags
            pp = tmp_path / "pp"
            if not pp.exists():
                body = ('[measure]\ncollectives = ["latency"]\nsizes = [1, 1048576]\n'
                        'nprocs = [2]\nmap_by = ["core", "socket"]\niterations = 2\nwarmup = 1')
                spec = tmp_path / "pp-spec.toml"
                spec.write_text(f'[campaign]\nname = "pp"\n{body}\n[run]\nbackend = '
                                f'"simgrid"\n[run.simgrid]\nplatform = "{base}"\n')
                assert main(["run", str(spec), "-o", str(pp)]) == 0
            assert main(["platform", "calibrate", str(pp), "-o", str(out), "--force",
                         "--from", str(base), *flags]) == 0
            assert "note: sharing:" in capsys.readouterr().out
        loaded, _, _ = load_cluster(out)
        pingpongs[tag] = simulate_pingpong(loaded, ["intra_socket", "inter_socket"], [1 << 20],
                                           tmp_path / f"pp-{tag}", find_mpi())
        times[tag] = linear_bcast_max_us(out, tmp_path, tag, 1048576, "4.1")
    for tag in variants:  # one flow: the sharing terms do not change a ping-pong
        for level in ("intra_socket", "inter_socket"):
            assert pingpongs[tag][level][1 << 20] == pytest.approx(
                pingpongs["shared"][level][1 << 20], rel=0.02), (tag, level)
    # 7 MiB from one root: its link carries them one after another (>= 7 × 1 MiB at 5-10
    # GB/s) unless receivers copy; then the 4 leaving the socket share its 10 GB/s fabric.
    assert times["copies"] < 0.5 * times["shared"], times
    assert times["fabric"] > 1.5 * times["copies"], times
    assert times["fabric"] >= 4 * (1 << 20) / 10000 * 0.95, times
