"""`platform calibrate --simulations DIR [--resume]`: every simulated ping-pong (and, with
--collectives, every candidate's collectives) is a SimGrid campaign kept in DIR, with
provenance and a row per simulated point; a resumed calibration launches nothing and
writes the same platform. Real smpirun (skipped without SimGrid)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store
from tests.simgrid_support import needs_smpi

SAMPLE = (Path(__file__).resolve().parents[1] / "data" / "samples" / "osu-7.4"
          / "osu_latency_np2.txt")
LINE = """\
name = "line"
nodes = 1
sockets_per_node = 1
cores_per_socket = 4
[levels.intra_socket]
latency_us = 2.0
bandwidth_mbs = 10000.0
{extra}
"""


def launches(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_mtime_ns)
                  for p in root.rglob("launches/*"))


def without_date(path: Path) -> str:
    return "\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("date"))


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    """osu_latency at --map-by core (intra-socket), 21 sizes."""
    out = tmp_path / "probe"
    assert main(["ingest", str(SAMPLE), "-o", str(out), "--nprocs", "2", "--mapping", "core",
                 "--collective", "latency"]) == 0
    return out


@needs_smpi
def test_simulations_are_kept_campaigns_and_resume_launches_nothing(
        probe: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        sim_env: Path) -> None:
    sims = tmp_path / "sims"
    argv = ["platform", "calibrate", str(probe), "--from", "orfeo-thin", "--simulations",
            str(sims)]
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "a.toml")]) == 0
    printed = capsys.readouterr().out
    folders = sorted(sims.iterdir())
    assert [f.name for f in folders] == [f"pingpong-{k}" for k in range(len(folders))]
    for folder in folders:
        prov = json.loads((folder / "provenance.json").read_text())
        assert prov["simgrid"]["platform"] == "orfeo-thin" and "kernel" in prov
        con = Store(folder).connect()
        rows = con.execute("SELECT collective, backend, mapping, nprocs, status, size_bytes, "
                           "avg_us FROM measurements ORDER BY size_bytes").fetchall()
        assert len(rows) == 21
        assert {r[:5] for r in rows} == {("latency", "simgrid", "core", 2, "ok")}
    # the table's simulated column is the last simulation's rows
    (largest,) = [ln.split() for ln in printed.splitlines()
                  if ln.startswith("intra_socket ") and ln.split()[1] == "1048576"]
    assert float(largest[3]) == pytest.approx(rows[-1][6], abs=0.006)
    assert main(["show", str(folders[0]), "--format", "csv"]) == 0
    assert "latency" in capsys.readouterr().out

    before = launches(sims)
    assert main([*argv, "--resume", "-o", str(tmp_path / "b.toml")]) == 0
    assert launches(sims) == before  # every simulation was stored: nothing launched
    assert capsys.readouterr().out.replace("b.toml", "a.toml") == printed
    assert without_date(tmp_path / "a.toml") == without_date(tmp_path / "b.toml")
    # resuming with other inputs would mix two descriptions' simulations: one line
    assert main([*argv, "--resume", "--name", "other", "-o", str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "simulated another platform description" in err, err
    assert launches(sims) == before


@pytest.mark.slow
@needs_smpi
def test_collectives_candidates_are_kept_and_resumed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], sim_env: Path) -> None:
    truth = tmp_path / "truth.toml"
    truth.write_text(LINE.format(extra="send_overhead_us = 0.4\nrecv_overhead_us = 0.4\n"
                                       "lat_factor = [[0, 0.6]]"))
    for tag, body in (("pp", 'collectives = ["latency"]\nsizes = [0, 65536]\nnprocs = [2]'),
                      ("real", 'collectives = ["bcast"]\nalgorithms = ["basic_linear"]\n'
                               "sizes = [1024]\nnprocs = [4]")):
        spec = tmp_path / f"{tag}.toml"
        spec.write_text(f'[campaign]\nname = "{tag}"\n[measure]\n{body}\niterations = 2\n'
                        f'warmup = 1\n[run]\nbackend = "simgrid"\n[run.simgrid]\n'
                        f'platform = "{truth}"\n')
        assert main(["run", str(spec), "-o", str(tmp_path / tag)]) == 0
    base = tmp_path / "base.toml"
    base.write_text(LINE.format(extra=""))
    sims = tmp_path / "sims"
    argv = ["platform", "calibrate", str(tmp_path / "pp"), "--from", str(base),
            "--collectives", str(tmp_path / "real"), "--simulations", str(sims)]
    capsys.readouterr()
    assert main([*argv, "-o", str(tmp_path / "a.toml")]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in sims.iterdir()) == [f"candidate-{i}" for i in range(5)]
    for candidate in sims.iterdir():
        kept = sorted(p.name for p in candidate.iterdir())
        assert kept[0] == "collectives" and kept[1] == "pingpong-0", kept
        (row,) = Store(candidate / "collectives").connect().execute(
            "SELECT collective, algorithm, nprocs, size_bytes, status FROM measurements"
        ).fetchall()
        assert row == ("bcast", "basic_linear", 4, 1024, "ok")
        assert (candidate / "collectives" / "provenance.json").is_file()
    before = launches(sims)
    assert main([*argv, "--resume", "-o", str(tmp_path / "b.toml")]) == 0
    assert launches(sims) == before
    assert capsys.readouterr().out.replace("b.toml", "a.toml") == printed


@pytest.mark.parametrize(("where", "message"), [
    ("file", "--simulations {tmp}/file: is a file; valid: a folder"),
    ("file/sub", "--simulations {tmp}/file/sub: cannot be created"),
    (None, "--resume: nothing to resume; valid: with --simulations DIR"),
])
def test_a_bad_simulations_folder_is_one_line_exit_2(
        where: str | None, message: str, probe: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("not a folder\n")
    extra = ["--simulations", str(tmp_path / where)] if where else ["--resume"]
    capsys.readouterr()
    assert main(["platform", "calibrate", str(probe), "-o", str(tmp_path / "x.toml"),
                 *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(tmp=tmp_path) in err, err
    assert not (tmp_path / "x.toml").exists()
