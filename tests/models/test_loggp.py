"""`collbench model loggp`: the PLogP benchmark (kernel/plogp.c) at 2 ranks, its fit
(models/loggp.py) and the `[levels.<level>.loggp]` table it writes.

The tests marked `mpi` run Open MPI for real (about 15 s in all on a 2-core machine)."""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collbench.cli import main
from collbench.errors import UserError
from collbench.kernel.plogp import PlogpPoint, parse_output
from collbench.launch.program import build_program
from collbench.models.loggp import fit_level_loggp
from collbench.models.p2pfile import read_p2p
from collbench.spec.workload import Workload
from tests.conftest import mpirun_command, run_mpi

HAND = """format = "collbench-p2p"
version = 1
[source]
origin = "hand"
[levels.node]
latency = "1.5 us"
bandwidth = "5 GB/s"
"""


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("plogp-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLLBENCH_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def measured(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any],
                                                                             Path]:
    """One real run at --map-by core, 0 B to 1 MiB (a subprocess, to read what it prints):
    its JSON output and the file it wrote."""
    out = tmp_path_factory.mktemp("loggp") / "m.p2p.toml"
    exe = Path(sys.executable).parent / "collbench"
    done = subprocess.run([str(exe), "model", "loggp", "--map-by", "core", "--sizes", "0:1M",
                           "--reps", "10", "-o", str(out), "--format", "json"],
                          capture_output=True, text=True, timeout=180, check=False,
                          env={**os.environ, "COLLBENCH_CACHE": str(cache)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


@pytest.fixture(scope="module")
def report(measured: tuple[dict[str, Any], Path]) -> dict[str, Any]:
    return measured[0]


# --- real runs ------------------------------------------------------------------------------

@pytest.mark.mpi
def test_benchmark_measures_positive_parameters(report: dict[str, Any]) -> None:
    points = report["points"]
    assert [p["size_bytes"] for p in points] == [0] + [2 ** k for k in range(21)]
    for p in points:
        for key in ("half_rtt_us", "o_s_us", "o_r_us", "g_us"):
            assert math.isfinite(p[key]) and p[key] > 0, (key, p)
    (row,) = report["loggp"]
    assert row["level"] == "core"
    for key in ("L_us", "o_s_us", "o_r_us", "g_us", "G_ns_per_byte"):
        assert math.isfinite(row[key]) and row[key] >= 0, key
    assert row["G_ns_per_byte"] > 0 and row["o_s_us"] > 0 and row["o_r_us"] > 0
    assert row["g_us"] > 0


@pytest.mark.mpi
def test_large_messages_keep_the_sender_busy_for_the_whole_gap(
        report: dict[str, Any]) -> None:
    """On shared memory the CPUs copy the data (no NIC takes over): from 64 KiB on, a send
    lasts as long as the gap between sends, o_s(m) ~ g(m) (the model's g(m) >= o_s(m) holds
    with equality, within the noise of a shared machine), and g grows with m (G > 0)."""
    large = [p for p in report["points"] if p["size_bytes"] >= 64 * 1024]
    ratios = sorted(p["g_us"] / p["o_s_us"] for p in large)
    assert all(1 / 3 <= r <= 3 for r in ratios), ratios
    assert 0.75 <= ratios[len(ratios) // 2] <= 1.33, ratios
    assert large[-1]["g_us"] > 4 * large[0]["g_us"]


@pytest.mark.mpi
def test_written_file_reads_back(measured: tuple[dict[str, Any], Path],
                                 capsys: pytest.CaptureFixture[str]) -> None:
    _, path = measured
    model = read_p2p(path, required_levels=("core",))
    lm = model.levels["core"]
    assert lm.loggp is not None and lm.loggp.G_us_per_byte > 0
    assert lm.loggp.method is not None and "Kielmann" in lm.loggp.method
    assert lm.regimes[0].alpha_us > 0  # the Hockney fit of the same round trips
    code, text, _ = run(capsys, "model", "p2p", "--show", path)
    assert code == 0 and "LogGP/PLogP" in text and "o_s_us" in text
    code, text, _ = run(capsys, "model", "p2p", "--show", path, "--format", "json")
    shown = json.loads(text)["loggp"][0]
    assert shown["L_us"] == lm.loggp.L_us and shown["G_from_bytes"] == lm.loggp.G_from_bytes


@pytest.mark.mpi
def test_update_keeps_the_existing_levels(cache: Path, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    hand = tmp_path / "hand.p2p.toml"
    hand.write_text(HAND)
    out = tmp_path / "out.p2p.toml"
    code, text, err = run(capsys, "model", "loggp", "--map-by", "core", "--sizes", "0:16K",
                          "--reps", "5", "--update", hand, "-o", out)
    assert code == 0, err
    assert f"wrote {out} (levels of {hand} kept)" in text
    before, after = read_p2p(hand, required_levels=()), read_p2p(out, required_levels=())
    assert after.levels["node"] == before.levels["node"]
    assert after.levels["core"].loggp is not None  # a level the file lacked: fitted here
    assert after.source["origin"] == "hand" and "PLogP" in after.source["loggp"]
    # the same file again: core keeps its Hockney fit, its loggp table is replaced
    code, _, err = run(capsys, "model", "loggp", "--map-by", "core", "--sizes", "0:16K",
                       "--reps", "5", "--update", out, "-o", out)
    assert code == 0, err
    again = read_p2p(out, required_levels=())
    assert again.levels["core"].regimes == after.levels["core"].regimes


DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"


@pytest.mark.mpi
def test_documented_commands_run(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/models.md's `model loggp` block, in order (the one needing 2 nodes left out),
    with small sizes to stay short."""
    text = DOCS.read_text()
    block = text[text.index("## LogGP/PLogP parameters measured here"):]
    block = block[block.index("```") + 3:]
    lines = [ln.strip() for ln in block[:block.index("```")].splitlines() if ln.strip()]
    assert len(lines) == 4
    monkeypatch.chdir(tmp_path)
    (tmp_path / "machine.p2p.toml").write_text(HAND)
    for line in lines:
        argv = shlex.split(line)[1:]
        if "--nodes" in argv:
            continue
        if argv[:2] == ["model", "loggp"]:
            argv += ["--sizes", "0:64K", "--reps", "5"]
        code, out, err = run(capsys, *argv)
        assert code == 0, f"{line}: {err}{out[-1000:]}"
    model = read_p2p(tmp_path / "machine.p2p.toml", required_levels=("core", "node"))
    assert model.levels["core"].loggp is not None
    assert set(read_p2p(tmp_path / "machine.loggp.p2p.toml", required_levels=()).levels) == {
        "core", "socket"}
    assert "LogGP/PLogP" in out


@pytest.mark.mpi
def test_benchmark_refuses_bad_arguments(cache: Path, tmp_path: Path) -> None:
    from tests.conftest import mpi_tool

    mpicc = mpi_tool("mpicc")
    assert mpicc is not None
    binary = build_program(mpicc, Workload(app="plogp"), "plogp", cache_dir=cache)
    for args in (["size=4"], ["max=-1"], ["reps=2", "reps=3"], ["tol=nan"], ["min=8", "max=4"],
                 ["plain"]):
        done = run_mpi([*mpirun_command(2), str(binary.path), *args], timeout=60)
        assert done.returncode == 2, (args, done.stderr)
        own = [ln for ln in done.stderr.splitlines() if ln.startswith("collbench_plogp:")]
        assert len(own) == 1 and "valid" in own[0], (args, done.stderr)
        assert done.stdout == ""


# --- without MPI ----------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["--map-by", "rack"], "--map-by 'rack' is not valid; valid: core, socket, node"),
    (["--map-by", "node"], "--map-by node on one node is not a level"),
    (["--map-by", "core,core"], "names a placement twice"),
    (["--map-by", "core", "--sizes", "1:2"], "valid: a range of at least 3 sizes"),
    (["--map-by", "core", "--sizes", "0:1G"], "valid: MIN:MAX with MIN <= MAX <= 64M"),
    (["--map-by", "core", "--sizes", "x:1M"], "--sizes"),
    (["--map-by", "core", "--mca", "btl"], "valid: KEY=VALUE"),
    (["--map-by", "core", "--reps", "0"], "valid: 3 to 10000"),
    (["--map-by", "core", "--burst", "1e9"], "--burst"),
    (["--map-by", "core", "--timeout", "inf"], "--timeout"),
    (["--map-by", "core", "--update", "/nonexistent/x.p2p.toml"], "cannot read"),
    ([], "--map-by"),
])
def test_bad_arguments_are_one_line_exit_2(argv: list[str], message: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code, _, err = run(capsys, "model", "loggp", *argv, "-o", tmp_path / "x.p2p.toml")
    except SystemExit as e:  # argparse's own mistakes
        code, err = int(e.code or 0), capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "x.p2p.toml").exists()


def test_update_refuses_another_transport_setting(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    hand = tmp_path / "hand.p2p.toml"
    hand.write_text(HAND.replace("[levels.node]\n", "[levels.core]\ntransport = \"btl=self,sm\"\n"
                                 "latency = \"1 us\"\nbandwidth = \"1 GB/s\"\n[levels.node]\n"))
    code, _, err = run(capsys, "model", "loggp", "--map-by", "core", "--update", hand, "-o",
                       tmp_path / "x.p2p.toml")
    assert code == 2 and "levels.core.transport: 'btl=self,sm'" in err and "never" in err


def _points(g0: float = 0.1, per_byte: float = 1e-4, half_rtt0: float = 0.3) -> list[PlogpPoint]:
    out = []
    for m in [0, *(2 ** k for k in range(21))]:
        g = g0 + m * per_byte
        out.append(PlogpPoint(m, 2 * (half_rtt0 - g0 + g), 0.0, g, 8, True, 0.8 * g, 0.0,
                              0.9 * g, 0.0, 5.0, 10))
    return out


def test_fit_recovers_plogp_parameters() -> None:
    fit = fit_level_loggp(_points(), "socket")
    p = fit.model.loggp
    assert p is not None and fit.notes == ()
    assert p.L_us == pytest.approx(0.2)  # RTT(0)/2 - g(0)
    assert (p.o_s_us, p.o_r_us, p.g_us) == pytest.approx((0.08, 0.09, 0.1))
    assert p.G_us_per_byte == pytest.approx(1e-4, rel=1e-6)
    assert fit.model.level == "socket"
    assert fit.model.regimes[0].beta_bytes_per_s == pytest.approx(1e10, rel=1e-6)


def test_fit_notes_negative_latency_and_unsettled_gaps() -> None:
    pts = _points(g0=0.5, half_rtt0=0.3)  # g(0) above half a round trip
    pts[3] = PlogpPoint(**{**pts[3].__dict__, "g_converged": False})
    fit = fit_level_loggp(pts, "core")
    assert fit.model.loggp is not None and fit.model.loggp.L_us == 0.0
    assert any("negative" in n for n in fit.notes)
    assert any("[4]" in n for n in fit.notes)


def test_fit_refuses_too_few_sizes_and_non_positive_gaps() -> None:
    with pytest.raises(UserError, match="at least 3"):
        fit_level_loggp(_points()[:2], "core")
    pts = _points()
    pts[0] = PlogpPoint(**{**pts[0].__dict__, "g_us": -0.01})
    with pytest.raises(UserError, match=r"not positive at size\(s\) \[0\]"):
        fit_level_loggp(pts, "core")


GOOD = ('{"size":0,"rtt_us":0.5,"rtt_min_us":0.4,"g_us":0.06,"g_n":256,"g_converged":true,'
        '"os_us":0.05,"os_min_us":0.05,"or_us":0.2,"or_min_us":0.15,"delta_us":5,"reps":20}')


@pytest.mark.parametrize(("text", "message"), [
    ("", "no measurement"),
    ("not json", "line 1: not a JSON object"),
    ("[1]", "not a JSON object"),
    (GOOD.replace('"os_us":0.05', '"os_us":-1'), "os_us: -1"),
    (GOOD.replace('"rtt_us":0.5', '"rtt_us":"x"'), "rtt_us"),
    (GOOD.replace('"size":0', '"size":-4'), "size: -4"),
    (GOOD.replace("true", "1"), "g_converged"),
    (GOOD + "\n" + GOOD, "not increasing"),
])
def test_output_is_read_strictly(text: str, message: str) -> None:
    with pytest.raises(UserError) as info:
        parse_output(text, "plogp")
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("plogp: ")


def test_output_reads() -> None:
    (p,) = parse_output(GOOD + "\n", "plogp")
    assert (p.size_bytes, p.g_us, p.g_n, p.g_converged) == (0, 0.06, 256, True)
