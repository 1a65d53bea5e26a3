"""report.explain: messages and bytes per level on the critical path, and the dominant term,
predicted from the schedules (compare --against M.p2p.toml --explain)."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from collbench.models.accuracy import Key
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.predict import Shape
from collbench.report.explain import PREDICTED_ONLY, explain, render

A = {"core": 0.5, "socket": 1.0, "node": 5.0}  # µs
BW = {"core": 1e10, "socket": 5e9, "node": 1e9}  # B/s
MODEL = P2PModel({lv: LevelModel(lv, (Regime(0, A[lv], BW[lv]),)) for lv in A})


def test_a_linear_bcast_sends_p_minus_1_messages_from_the_root() -> None:
    keys = [Key("bcast", "basic_linear", 4, "core", s) for s in (8, 1 << 20)]
    whys, notes = explain(MODEL, keys, Shape(sockets=1))
    assert notes == []
    small, large = whys
    assert (small.band, large.band) == ("<= 1 KiB", ">= 64 KiB")
    # the slowest rank waits for the root's 3 sends, one after another, all in one socket
    assert large.messages == {"core": 3, "socket": 0, "node": 0}
    assert large.nbytes == {"core": 3 << 20, "socket": 0, "node": 0}
    assert (small.dominant, large.dominant) == ("intra-socket latency",
                                                "intra-socket bandwidth")
    # 3 x 0.5 µs against 3 x 8 B / 10 GB/s: latency is all but all of it
    assert small.share == pytest.approx(1.5 / (1.5 + 3 * 8 / 1e4), rel=1e-6)


def test_two_nodes_put_the_path_on_the_network() -> None:
    whys, _ = explain(MODEL, [Key("bcast", "binomial", 4, "node", 1 << 20)],
                      Shape(sockets=1), {(4, "node"): (2, 2)})
    (why,) = whys
    assert why.messages["node"] >= 1 and why.dominant == "inter-node bandwidth"
    text = render(whys, [])
    assert "inter-node msgs" in text and PREDICTED_ONLY in text


def test_explain_needs_a_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.models.folders import collective_folder

    real = collective_folder(tmp_path / "real", MODEL, nprocs=(4,),
                             collectives={"bcast": ("binomial", "basic_linear")},
                             sizes=(1, 1024))
    assert main(["compare", str(real), "--against", str(real), "--explain"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--explain" in err[0] and "p2p.toml" in err[0]
    from collbench.models.p2pfile import write_p2p

    write_p2p(MODEL, tmp_path / "m.p2p.toml")
    assert main(["compare", str(real), "--against", str(tmp_path / "m.p2p.toml"),
                 "--explain"]) == 0
    out = capsys.readouterr().out
    assert "Why: critical path per level" in out
    why = out[out.index("Why: critical path"):]
    assert sum(line.startswith("bcast ") for line in why.splitlines()) == 2  # 2 algs, 1 band


def test_the_report_models_section_explains(tmp_path: Path) -> None:
    from collbench.models.p2pfile import write_p2p
    from tests.models.folders import collective_folder

    real = collective_folder(tmp_path / "real", MODEL, nprocs=(4,),
                             collectives={"bcast": ("binomial", "basic_linear")},
                             sizes=(1, 65536))
    write_p2p(MODEL, tmp_path / "m.p2p.toml")
    assert main(["report", str(real), "-o", str(tmp_path / "rep"), "--model",
                 str(tmp_path / "m.p2p.toml"), "--baseline", "binomial"]) == 0
    page = (tmp_path / "rep" / "index.html").read_text()
    assert "Why: messages and bytes per level on the critical path" in page
    assert PREDICTED_ONLY in page
