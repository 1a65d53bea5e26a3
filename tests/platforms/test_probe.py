"""`platform calibrate --probe` (issue 25): the ping-pong above the eager limit scaled by a
2-rank collective's ratio to it, read from a results folder; bad probes are one line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from collbench.analyse.modeldata import probe_medians
from collbench.cli import main
from collbench.errors import UserError
from collbench.platforms.calibrate import probe_ratios, with_probe

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
EPYC = SHARED / "data" / "orfeo-epyc" / "collectives.csv"
PINGPONG = {8: 0.2, 4096: 0.4, 8192: 0.6, 16384: 1.0, 32768: 2.0, 65536: 4.0, 1 << 20: 80.0}


def test_ratios_above_the_eager_limit_interpolated_and_held() -> None:
    probe = {8: 0.4, 16384: 2.0, 65536: 4.0}  # ratios 2 (ignored: eager), 2, 1
    ratios = probe_ratios(PINGPONG, probe, 4096)
    assert set(ratios) == {8192, 16384, 32768, 65536, 1 << 20}  # above 4096 only
    assert ratios[8192] == ratios[16384] == pytest.approx(2.0)  # held below the first
    assert ratios[32768] == pytest.approx(math.sqrt(2.0))  # halfway in log size
    assert ratios[1 << 20] == ratios[65536] == pytest.approx(1.0)  # held above the last
    assert probe_ratios(PINGPONG, {16384: 3.0}, 16384) == {}  # nothing above the limit


def test_only_probed_levels_change_and_the_notes_say_how() -> None:
    measured = {"intra_socket": dict(PINGPONG), "inter_node": dict(PINGPONG)}
    notes: list[str] = []
    out = with_probe(measured, {"intra_socket": {32768: 5.0}}, 4096, "p", notes)
    assert out["inter_node"] == PINGPONG and measured["intra_socket"] == PINGPONG
    assert out["intra_socket"][4096] == 0.4  # eager: as the ping-pong measured it
    assert out["intra_socket"][1 << 20] == pytest.approx(80.0 * 2.5)
    assert notes == ["intra_socket: above 4096 B the ping-pong × the 2-rank probe's ratio "
                     "(--probe): 2.50 at 32768 B"]


@pytest.mark.parametrize(("probe", "limit", "says"), [
    ({"inter_socket": {32768: 5.0}}, 4096, "2-rank rows on inter_socket but no inter_socket "
                                           "ping-pong"),
    ({"intra_socket": {2048: 5.0}}, 4096, "no intra_socket size above the eager limit (4096 "
                                          "B) that the ping-pong measured too"),
])
def test_a_probe_that_cannot_scale_is_refused(probe: dict[str, dict[int, float]], limit: int,
                                              says: str) -> None:
    with pytest.raises(UserError, match="^" + re.escape(f"--probe: p: {says}")):
        with_probe({"intra_socket": dict(PINGPONG)}, probe, limit, "p", [])


@pytest.mark.skipif(not EPYC.is_file(), reason="the dev set (../shared/data) is not here")
def test_the_published_two_rank_rows_are_read_per_level(tmp_path: Path) -> None:
    out = tmp_path / "probe"
    assert main(["ingest", str(EPYC), "--where", "source_repo=eruoppolo/HPC_2023", "--where",
                 "map_by=core", "--where", "nprocs=2", "--column", "collective=collective",
                 "--column", "algorithm=algorithm", "--column", "nprocs=nprocs", "--column",
                 "mapping=map_by", "--column", "size_bytes=size_bytes", "--column",
                 "avg_us=avg_us", "--mpi", "openmpi", "-o", str(out)]) == 0
    found = probe_medians(out)
    assert list(found) == ["intra_socket"]  # --map-by core, two cores of one CCX
    assert min(found["intra_socket"]) == 2 and max(found["intra_socket"]) == 262144
    # the eager limit's step: the 2-rank message costs about twice the ping-pong above it
    assert found["intra_socket"][32768] > 2 * found["intra_socket"][8192]


def test_bad_probe_folders_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    pp = tmp_path / "pp"
    (tmp_path / "pp.csv").write_text("size_bytes,avg_us\n8,0.2\n1024,0.5\n65536,4\n")
    assert main(["ingest", str(tmp_path / "pp.csv"), "--collective", "latency", "--nprocs",
                 "2", "--mapping", "core", "--column", "size_bytes=size_bytes", "--column",
                 "avg_us=avg_us", "--mpi", "openmpi", "-o", str(pp)]) == 0
    capsys.readouterr()
    assert main(["platform", "calibrate", str(pp), "-o", str(tmp_path / "x.toml"), "--probe",
                 str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--probe" in err[0] and "not a results folder" in err[0]
    # a folder without 2-rank collectives (the ping-pongs themselves)
    assert main(["platform", "calibrate", str(pp), "-o", str(tmp_path / "x.toml"), "--probe",
                 str(pp)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no ok 2-rank bcast/scatter/gather rows" in err[0]
    assert not (tmp_path / "x.toml").exists()
