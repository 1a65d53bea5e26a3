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


def test_share_of_the_smallest_message_split_between_sender_and_receiver() -> None:
    got = shared_overheads(MEASURED, {"intra_socket": 0.9, "inter_node": 0.5}, "x")
    assert got["intra_socket"] == pytest.approx((0.09, 0.09))
    assert got["inter_node"] == pytest.approx((0.4, 0.4))


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
