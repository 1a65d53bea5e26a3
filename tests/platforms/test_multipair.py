"""`platform calibrate --multi-pair RESULTS`: the socket bandwidth fitted to a multi-pair
bandwidth measurement (collbench's mbw_mr, or osu_mbw_mr ingested), checked by simulating
it; refused when the port does not limit the pairs; bad folders are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.analyse.modeldata import multipair_medians
from collbench.cli import main
from collbench.errors import UserError
from collbench.platforms.model import Cluster, load_cluster, parse_cluster
from collbench.platforms.multipair import fit_socket, usable
from tests.simgrid_support import TWO_SOCKETS as TWO
from tests.simgrid_support import needs_smpi

TRUTH_MBS = 3000.0  # the port: 4 pairs at the inter-socket 5000 MB/s would move 20000

OSU = """\
# OSU MPI Multiple Bandwidth / Message Rate Test v7.4
# [ pairs: {pairs} ] [ window size: 64 ]
# Size                  MB/s        Messages/s
1                      11.61       11608456.34
{size}               {mbs}          16699.94
"""


def ingested(tmp_path: Path, nprocs: int, mapping: str = "core", size: int = 1048576,
             mbs: float = 2900.0) -> Path:
    text = tmp_path / f"osu_mbw_mr_np{nprocs}_{mapping}_{size}.txt"
    text.write_text(OSU.format(pairs=nprocs // 2, size=size, mbs=mbs))
    out = tmp_path / f"mbw-{nprocs}-{mapping}-{size}"
    assert main(["ingest", str(text), "--nprocs", str(nprocs), "--mapping", mapping,
                 "-o", str(out)]) == 0
    return out


IMB = """\
# Benchmarking Uniband
# #processes = 8
#---------------------------------------------------
       #bytes #repetitions   Mbytes/sec      Msg/sec
            0         1000         0.00     14069912
            1         1000        13.93     13926718
      4194304           10     17512.40         4175


# All processes entering MPI_Finalize
"""


def test_imb_uniband_and_osu_mbw_mr_rows_are_read_alike(tmp_path: Path) -> None:
    """IMB's Uniband is osu_mbw_mr's geometry (rank i to i + P/2, the pairs' aggregate):
    both are read; the 0-byte row (no bandwidth) is not a point."""
    text = tmp_path / "IMB-MPI1_uniband.txt"
    text.write_text(IMB)
    out = ingested(tmp_path, 16, size=65536, mbs=33000.0)
    assert main(["ingest", str(text), "--mapping", "core", "-o", str(out)]) == 0
    found, notes = multipair_medians(out)
    assert found == {(8, 1): 13.93, (8, 4194304): 17512.4, (16, 1): 11.61,
                     (16, 65536): 33000.0}
    assert notes == []


def two(tmp_path: Path, mbs: float, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(TWO.format(extra=f"[memory]\nsocket_bandwidth_mbs = {mbs}"))
    return path


def test_the_fit_scales_until_the_simulation_gives_the_measurement() -> None:
    """A fake simulation whose aggregate is 1.17 x the port (as a level's bw_factor makes
    it in SimGrid) up to what the pairs move alone: the fit finds the port within 0.5 %
    at the largest size of the count whose senders fill a socket."""
    cluster = parse_cluster(TWO.format(extra=""), "two")
    calls: list[float] = []

    def simulate(c: Cluster, pts: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
        port = c.memory.socket_bandwidth_mbs
        calls.append(port)
        return {(n, s): min(1.17 * port * (n // 8), 20000.0 * n / 8) for n, s in pts}

    found = {(8, 1 << 20): 2900.0, (8, 65536): 100.0, (4, 1 << 20): 50.0}
    fit = fit_socket(cluster, found, simulate)
    assert fit.cluster.memory.socket_bandwidth_mbs == pytest.approx(2900 / 1.17, rel=0.005)
    assert list(fit.measured) == [(8, 1 << 20)]  # 4 ranks do not fill a socket of 4 senders
    assert fit.simulated[8, 1 << 20] == pytest.approx(2900, rel=0.005)
    assert calls[0] == 1e7 and len(calls) <= 8  # first: a port that never limits
    assert "8 ranks x 1048576 B 2900 / 2899.9" in fit.note


@pytest.mark.parametrize(("found", "shown"), [
    ({(6, 1 << 20): 1.0}, "valid: nprocs 8 "),
    ({(8, 4096): 1.0}, "up to 4096 B"),
    ({(16, 1 << 20): 1.0}, "valid: nprocs 8 "),  # 16 ranks leave the node of 8 cores
])
def test_counts_and_sizes_the_pairs_cannot_show_are_one_line(
        found: dict[tuple[int, int], float], shown: str) -> None:
    cluster = parse_cluster(TWO.format(extra=""), "two")
    with pytest.raises(UserError) as err:
        usable(found, cluster, "--multi-pair: X")
    assert shown in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["socket", "count", "small", "both", "missing", "empty"])
def test_bad_multi_pair_inputs_are_one_line_and_write_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    pp = tmp_path / "pp"
    assert main(["ingest", str(Path(__file__).resolve().parents[1] / "data" / "samples"
                               / "osu-7.4" / "osu_latency_np2.txt"), "-o", str(pp),
                 "--nprocs", "2", "--mapping", "core", "--collective", "latency"]) == 0
    folder, extra, shown = {
        "socket": (ingested(tmp_path, 8, "socket"), [], "mapping core (found: socket)"),
        "count": (ingested(tmp_path, 6), [], "valid: nprocs 8 "),
        "small": (ingested(tmp_path, 8, size=4096), [], "up to 4096 B"),
        "both": (ingested(tmp_path, 8), ["--socket-bandwidth", "100"],
                 "not with --socket-bandwidth"),
        "missing": (tmp_path / "nowhere", [], "not a results folder"),
        "empty": (pp, [], "no ok mbw_mr/uniband rows"),
    }[case]
    out = tmp_path / "out.toml"
    capsys.readouterr()
    assert main(["platform", "calibrate", str(pp), "-o", str(out), "--from",
                 str(two(tmp_path, 0, "base")), "--multi-pair", str(folder), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and shown in err and "--multi-pair" in err, err
    assert not out.exists()


def launches(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns)
                  for p in root.rglob("launches/*"))


@needs_smpi
def test_the_port_of_a_simulated_cluster_is_found_again_and_resumed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    """Ground truth: a 2 x 4-core node whose sockets share 3000 MB/s each way. Its
    ping-pongs and mbw_mr (8 ranks: one socket's 4 cores sending to the other's; the
    --map-by socket rows are left out with a note), measured by the simulation, calibrate
    a description without a port: the port comes back within 1 %, the simulated aggregate
    within 0.5 % of the measured one; the same command resumed launches nothing (with
    --load-barrier too: those simulations are resumed as well)."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""\
[campaign]
name = "truth"
[measure]
collectives = ["latency", "mbw_mr", "barrier"]
sizes = [8, 1048576]
nprocs = [2, 8]
map_by = ["core", "socket"]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
[run.simgrid]
platform = "{two(tmp_path, TRUTH_MBS, "truth")}"
ompi_version = "4.1"
""")
    measured = tmp_path / "measured"
    assert main(["run", str(spec), "-o", str(measured)]) == 0
    sims = tmp_path / "sims"
    argv = ["platform", "calibrate", str(measured), "--from", str(two(tmp_path, 0, "base")),
            "--multi-pair", str(measured), "--load-barrier", "8=30", "--simulations",
            str(sims)]
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "a.toml")]) == 0
    printed = capsys.readouterr().out
    fitted, _, _ = load_cluster(str(tmp_path / "a.toml"))
    assert fitted.memory.socket_bandwidth_mbs == pytest.approx(TRUTH_MBS, rel=0.01)
    (used,) = fitted.calibration["multi_pair_mbs"]
    n_size, _, pair = used.partition("=")
    got, want = (float(v) for v in pair.split("/"))
    assert n_size == "8x1048576" and got == pytest.approx(want, rel=0.005)
    assert "mbw_mr/uniband rows with mapping socket not used" in printed
    assert any(p.name.startswith("multipair-") for p in sims.iterdir())
    assert any(p.name.startswith("barrier-") for p in sims.iterdir())
    before = launches(sims)
    assert main([*argv, "--resume", "-o", str(tmp_path / "b.toml")]) == 0
    assert launches(sims) == before
    again, _, _ = load_cluster(str(tmp_path / "b.toml"))
    assert again.memory == fitted.memory and again.levels == fitted.levels


@needs_smpi
def test_pairs_the_port_does_not_limit_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    """Without a port the 4 pairs move 4 x 5000 MB/s: a description without a port already
    simulates that much, so no socket bandwidth can be read from it: one line, no file."""
    spec = tmp_path / "spec.toml"
    spec.write_text(f"""\
[campaign]
name = "free"
[measure]
collectives = ["latency", "mbw_mr"]
sizes = [8, 1048576]
nprocs = [2, 8]
map_by = ["core"]
iterations = 2
warmup = 1
[run]
backend = "simgrid"
[run.simgrid]
platform = "{two(tmp_path, 0, "free")}"
""")
    measured = tmp_path / "measured"
    assert main(["run", str(spec), "-o", str(measured)]) == 0
    out = tmp_path / "out.toml"
    capsys.readouterr()
    assert main(["platform", "calibrate", str(measured), "-o", str(out), "--from",
                 str(two(tmp_path, 0, "base")), "--multi-pair", str(measured)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not what limits these pairs" in err, err
    assert not out.exists()
