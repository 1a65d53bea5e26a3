"""`tune --model` on several nodes under Open MPI 5.0 writes han's rules file beside the
coll/tuned one, as `tune` does from measurements (tune/han.py): the modelled default there
is coll/han's hierarchy, so a tuned rule reaches the top level only through han's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.cli import main
from collbench.models.predict import Request
from collbench.tune import han
from collbench.tune.model import han_note
from collbench.tune.select import Choice, Selection
from tests.models.folders import P2P_TEXT


def test_rules_from_a_two_node_model_come_with_hans_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p2p, rules = tmp_path / "m.p2p.toml", tmp_path / "p.rules"
    p2p.write_text(P2P_TEXT)
    keep = tmp_path / "pred"
    assert main(["tune", "--model", str(p2p), "--nprocs", "8,16", "--ppn", "8",
                 "--collectives", "bcast,alltoall", "--sizes", "1:4K", "-o", str(rules),
                 "--keep-predictions", str(keep)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {rules}.han" in out and f"coll_han_dynamic_rules_filename {rules}.han" in out
    got = han.read(Path(f"{rules}.han"))
    assert {c.collective for c in got.collectives} == {"bcast"}  # han serves no alltoall
    # the han file agrees with the tuned rules of the 2-node regime, size by size: tuned at
    # the top level where the table leaves the default, han where it keeps it
    table = [line for line in out.splitlines() if line.startswith("bcast np=16: ")]
    assert table, out
    for size in (1, 64, 1024, 4096):
        picked = _choice_at(table[0], size)
        want = "han" if picked == "default" else "tuned"
        assert got.component("bcast", 16, size) == want, (size, picked)
        assert got.component("bcast", 8, size) == "han"  # one node: not tuned, han's default
    assert main(["rules", "check", f"{rules}.han", "--han"]) == 0


def _choice_at(line: str, size: int) -> str:
    """The algorithm a printed table line ('bcast np=16: >=0 binomial, >=1K default') picks
    at `size` bytes."""
    from collbench.sizes import parse_size

    picked = "default"
    for part in line.split(": ", 1)[1].split(", "):
        start, alg = part.split()[:2]
        if parse_size(start.removeprefix(">=")) <= size:
            picked = alg.split("[")[0]
    return picked


def test_why_no_han_file_is_said_in_one_line_where_nodes_are_several() -> None:
    tables = {("alltoall", 16): (Choice(0, "linear", 2, 0, 0, 1, 1.0),)}
    selection = Selection("openmpi", "5.0", 1, False, tables)
    two_nodes = Request(("alltoall",), (16,), 8, None, "core", (8,))
    why = han_note(selection, two_nodes)
    assert why is not None and "\n" not in why and "coll/tuned's in every regime" in why
    assert han_note(selection, Request(("alltoall",), (8,), 8, None, "core", (8,))) is None
    old = Request(("alltoall",), (16,), 8, None, "core", (8,), version="4.1")
    assert "priority 0" in str(han_note(selection, old))
    # where han's default was modelled, the file is written: nothing to explain
    han_regime = Selection("openmpi", "5.0", 1, False, {("bcast", 16): (
        Choice(0, "binomial", 6, 0, 0, 1, 0.9),)}, han_defaults=frozenset({("bcast", 16)}))
    assert han_note(han_regime, two_nodes) is None
