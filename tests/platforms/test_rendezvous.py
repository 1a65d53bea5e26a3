"""[smpi] rendezvous_bytes (issue 25): blocking sends of that size or more wait for their
receive, as an MPI's rendezvous does (SimGrid's send-is-detached-thresh); written by
`platform calibrate --rendezvous`, read back, and (SimGrid) a root's blocking sends then
wait for each receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from collbench.platforms.model import parse_cluster
from collbench.platforms.simgrid_xml import DETACHED_DEFAULT, config_items
from collbench.platforms.template import cluster_toml
from tests.simgrid_support import SMALL, needs_smpi, simulated_us, small_platform

RENDEZVOUS = SMALL + "\n[smpi]\nrendezvous_bytes = 4097\n"


def test_the_threshold_is_simgrids_and_survives_a_write() -> None:
    cluster = parse_cluster(RENDEZVOUS, "r.toml")
    assert dict(config_items(cluster))["smpi/send-is-detached-thresh"] == "4097"
    assert "smpi/send-is-detached-thresh" not in dict(config_items(parse_cluster(SMALL, "s")))
    again = parse_cluster(cluster_toml(cluster, "# r"), "again.toml")
    assert again.smpi.rendezvous_bytes == 4097
    # beside an eager receive threshold, the send side is the one said
    both = parse_cluster(SMALL + "\n[smpi]\neager_threshold = 1024\nrendezvous_bytes = 4097\n",
                         "b.toml")
    assert dict(config_items(both)) == {"smpi/async-small-thresh": "1024",
                                        "smpi/send-is-detached-thresh": "4097"}
    assert DETACHED_DEFAULT == 65536


@pytest.mark.parametrize("value", ["-1", "4.5", '"x"'])
def test_a_bad_threshold_is_one_line(tmp_path: Path, value: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(SMALL + f"\n[smpi]\nrendezvous_bytes = {value}\n")
    assert main(["platform", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "rendezvous_bytes" in err[0] and "bad.toml" in err[0]


@needs_smpi
def test_a_roots_blocking_sends_wait_for_each_receiver(tmp_path: Path,
                                                       sim_env: Path) -> None:
    """scatter basic_linear: the root's MPI_Send of 32 KiB per rank. Detached (SMPI's
    default below 64 KiB) they leave back to back; from the threshold on, each waits until
    its receiver has it, so the ranks' average grows."""
    eager = simulated_us(small_platform(tmp_path), tmp_path, "eager", 32768, "scatter",
                         "avg_us", "4.1")
    (tmp_path / "r").mkdir()
    waiting = simulated_us(small_platform(tmp_path / "r", RENDEZVOUS), tmp_path, "waiting",
                           32768, "scatter", "avg_us", "4.1")
    assert waiting > 1.2 * eager


def test_model_predict_switches_where_the_platform_does() -> None:
    """`model predict --platform` under --network mpi takes the platform's threshold (the
    one its SimGrid runs use): a 4 KiB linear scatter is eager from the platform that says
    4097, rendezvous (each send waits) from one that leaves it to the network's 4096."""
    from collbench.models.networks import NETWORKS
    from collbench.models.platform import from_cluster
    from collbench.models.predict import predict_point, topology

    eager_model, shape = from_cluster(parse_cluster(RENDEZVOUS, "r.toml"))
    plain_model, _ = from_cluster(parse_cluster(SMALL, "s.toml"))
    assert (eager_model.rendezvous, plain_model.rendezvous) == (4097, None)
    topo = topology(8, 2, 4, "core", shape, "model")
    eager, plain = (predict_point(m, topo, "scatter", "basic_linear", 4096,
                                  net=NETWORKS["mpi"])[0] for m in (eager_model, plain_model))
    assert plain > eager
    # above both thresholds, the same protocol: the same prediction
    assert predict_point(eager_model, topo, "scatter", "basic_linear", 8192,
                         net=NETWORKS["mpi"]) == predict_point(
        plain_model, topo, "scatter", "basic_linear", 8192, net=NETWORKS["mpi"])
    # SimGrid's own network model keeps its threshold
    assert predict_point(eager_model, topo, "scatter", "basic_linear", 4096,
                         net=NETWORKS["smpi"]) == predict_point(
        plain_model, topo, "scatter", "basic_linear", 4096, net=NETWORKS["smpi"])


def test_above_the_threshold_the_pingpongs_excess_is_latency() -> None:
    """`--rendezvous`: from the threshold on, a size keeps the largest size's bandwidth
    factor and its time beyond that bandwidth is the handshake's latency (concurrent
    messages overlap it); below it the fit is unchanged, and every size's time is the same
    in both splits (to the fit's ridge)."""
    from collbench.platforms.calibrate import SMPI_ENVELOPE, fit_factors, hockney

    pts = {8: 0.4, 1024: 0.7, 8192: 3.0, 65536: 12.0, 1 << 20: 90.0, 1 << 22: 340.0}
    alpha, beta = hockney(pts)
    plain, split = fit_factors(pts, alpha, beta), fit_factors(pts, alpha, beta, rendezvous=4097)
    sizes = sorted(pts)

    def times(tables: tuple[list[tuple[int, float]], list[tuple[int, float]]]) -> list[float]:
        return [alpha * lat + (s + SMPI_ENVELOPE) * beta / bw
                for s, (_, lat), (_, bw) in zip(sizes, *tables, strict=True)]

    assert times(split) == pytest.approx(times(plain), rel=1e-3)
    # above the threshold the split gives the measured time itself (no ridge in it)
    assert times(split)[2:] == pytest.approx([pts[s] for s in sizes[2:]], rel=1e-9)
    assert plain[0][:2] == split[0][:2] and plain[1][:2] == split[1][:2]  # 8 B, 1 KiB
    link = plain[1][-1][1]
    assert all(bw == link for _, bw in split[1][2:])
    # the excess went to latency: 64 KiB takes more latency than the plain split gives it
    assert split[0][3][1] > plain[0][3][1]
