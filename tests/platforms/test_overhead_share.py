"""`platform calibrate --overhead-share LEVEL=SHARE`: per-message CPU overheads from the
ping-pong itself (no SimGrid needed for these checks; the recipe test runs it for real)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.errors import UserError
from collbench.platforms.calibrate import shared_overheads
from tests.models.folders import pingpong_folder

MEASURED = {"intra_socket": {1: 0.2, 8: 0.25, 1024: 0.5}, "inter_node": {0: 1.6, 64: 1.7}}


def test_share_of_each_eager_size_split_between_sender_and_receiver() -> None:
    got = shared_overheads(MEASURED, {"intra_socket": 0.9, "inter_node": 0.5}, "x")
    # per measured size up to the eager limit, then the smallest message's again
    assert [r[0] for r in got["intra_socket"]] == [0, 8, 1024, 4097]
    assert got["intra_socket"][0][1:] == pytest.approx((0.09, 0.09))
    assert got["intra_socket"][2][1:] == pytest.approx((0.225, 0.225))
    assert got["intra_socket"][3][1:] == pytest.approx((0.09, 0.09))
    assert got["inter_node"][1][1:] == pytest.approx((0.425, 0.425))
    sender = shared_overheads(MEASURED, {"intra_socket": 0.9}, "x", sender=0.9,
                              eager_limit=512)
    assert [r[0] for r in sender["intra_socket"]] == [0, 8, 513]
    assert sender["intra_socket"][1][1:] == pytest.approx((0.2025, 0.0225))


def test_per_size_overheads_are_what_the_platform_charges() -> None:
    from collbench.platforms.model import Level
    from collbench.platforms.simgrid_xml import overhead_value

    rows = shared_overheads(MEASURED, {"intra_socket": 0.9}, "x", sender=0.8)["intra_socket"]
    level = Level(latency_us=0.25, bandwidth_mbs=1000.0, send_overhead_us=rows[0][1],
                  recv_overhead_us=rows[0][2], overhead_per_size=rows)
    assert level.overhead_at(8)[0] == pytest.approx(0.8 * 0.9 * 0.25)
    middle = level.overhead_at(516)  # linear between 8 B and 1024 B, as the loader does
    assert sum(middle) == pytest.approx(0.9 * (0.25 + 0.25 * (516 - 8) / (1024 - 8)))
    assert level.overhead_at(10_000) == pytest.approx(rows[0][1:])
    assert overhead_value(level).startswith("0:1.44e-07:3.6e-08;8:")
    with pytest.raises(ValueError, match="overhead_per_size starts with"):
        Level(latency_us=0.25, bandwidth_mbs=1000.0, send_overhead_us=0.01,
              recv_overhead_us=0.01, overhead_per_size=rows)
    with pytest.raises(ValueError, match="sizes must increase"):
        Level(latency_us=0.25, bandwidth_mbs=1000.0, overhead_per_size=[(0, 0.0, 0.0),
                                                                        (0, 1.0, 1.0)])


@pytest.mark.parametrize(("shares", "message"), [
    ({"inter_socket": 0.5}, "x: level 'inter_socket' has no ping-pong; valid: inter_node, "
                            "intra_socket"),
    ({"intra_socket": 0.95}, "x: intra_socket=0.95 is not valid; valid: a share from 0 to 0.9"),
    ({"intra_socket": -0.1}, "x: intra_socket=-0.1 is not valid"),
])
def test_bad_shares_are_one_line(shares: dict[str, float], message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        shared_overheads(MEASURED, shares, "x")


@pytest.mark.parametrize(("argv", "message"), [
    (["--overhead-share", "intra_socket"], "--overhead-share: 'intra_socket' is not valid; "
                                           "valid: LEVEL=SHARE with LEVEL one of intra_socket"),
    (["--overhead-share", "core=0.5"], "--overhead-share: 'core=0.5' is not valid"),
    (["--overhead-share", "intra_socket=nan"], "'intra_socket=nan' is not valid"),
    (["--overhead-share", "intra_socket=2"], "--overhead-share: intra_socket=2 is not valid; "
                                             "valid: a share from 0 to 0.9"),
    (["--overhead-share", "intra_socket=0.5", "--collectives", "x"],
     "--overhead-share: not with --overheads or --collectives"),
])
def test_cli_errors_exit_2_before_any_simulation(tmp_path: Path, argv: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    pp = pingpong_folder(tmp_path / "pp")
    out = tmp_path / "c.toml"
    assert main(["platform", "calibrate", str(pp), "-o", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()
