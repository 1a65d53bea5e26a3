"""`collbench run/plan` without a spec file: options build the spec, stored like a file's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import collbench
from collbench.cli import main
from collbench.commands.oneliner import spec_text
from collbench.errors import UserError
from collbench.spec import parse_spec
from collbench.store import Store

FAST = ["-c", "bcast", "-n", "2", "-m", "1:16", "-i", "10", "-x", "1",
        "--algorithms", "binomial,default", "--backend", "fake"]


def test_osu_letters_and_long_options_build_the_same_spec(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-c", "bcast", "-m", "1:1M", "-i", "1000", "-x", "100", "-n", "4",
                 "--format", "toml"]) == 0
    short = capsys.readouterr().out
    assert main(["plan", "--collective", "bcast", "--sizes", "1:1M", "--iterations", "1000",
                 "--warmup", "100", "--nprocs", "4", "--format", "toml"]) == 0
    assert capsys.readouterr().out == short
    spec = parse_spec(short, "printed")
    assert spec.measure.collectives == ["bcast"] and spec.measure.nprocs == [4]
    assert spec.measure.sizes[0] == 1 and spec.measure.sizes[-1] == 2**20
    assert (spec.measure.iterations.small, spec.measure.warmup.large) == (1000, 100)


def test_plan_from_options_lists_the_launches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--collective", "bcast", "--algorithms", "all", "--sizes", "1:1M",
                 "--nprocs", "2,4", "--name", "b"]) == 0
    out = capsys.readouterr().out
    # 10 bcast variants: 9 compared with the default at each size, Holm at 5 % needs
    # 2 / C(2n, n) < 0.05 / 9, so n = 6 launches per process count by default
    assert out.startswith("campaign b: 12 launches")
    assert "np=2" in out and "np=4" in out and " rep=5 " in out and " rep=6 " not in out
    assert main(["plan", "--collective", "bcast", "--algorithms", "all", "--nprocs", "2",
                 "--repetitions", "1"]) == 0
    assert capsys.readouterr().out.startswith("campaign cli: 1 launches")


def test_run_stores_the_spec_and_resumes_without_options(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert main(["run", *FAST, "-o", str(out)]) == 0
    stored = Store(out)
    spec = parse_spec(stored.spec_text(), "stored")
    assert spec.campaign.name == "b" and spec.measure.iterations.small == 10
    rows = stored.connect().execute(
        "SELECT DISTINCT algorithm FROM measurements ORDER BY 1").fetchall()
    assert rows == [("binomial",), ("default",)]
    capsys.readouterr()
    # The stored spec is the campaign's: --resume alone, or with the same options, goes on.
    assert main(["run", "-o", str(out), "--resume"]) == 0
    assert main(["run", *FAST, "-o", str(out), "--resume"]) == 0
    # two variants: n = 4 launches, the fewest with 2 / C(2n, n) < 0.05, by default
    assert "nothing to do: all 4 launches already stored" in capsys.readouterr().out
    # ...and is a spec file like any other.
    assert main(["plan", str(out / "spec.toml")]) == 0
    # The notebook API reads the same folder: its spec, plan and rows.
    results = collbench.open(out)
    assert results.spec is not None and results.spec.measure.sizes == [1, 2, 4, 8, 16]
    assert (results.plan.launches, results.plan.stored_launches) == (4, 4)
    frame = results.measurements()
    assert len(frame) == 40 and set(frame["status"]) == {"ok"}


@pytest.mark.parametrize(("argv", "message"), [
    (["-c", "bcsat", "-n", "2"], "command line: --collective[0]: 'bcsat' is not valid; valid: "),
    (["-c", "bcast", "-n", "2,x"], "command line: --nprocs[1]: expected an integer, got 'x'"),
    (["-c", "bcast", "-n", "2", "-m", "1:1Q"], "command line: --sizes: '1Q' is not a size"),
    (["-c", "bcast", "-n", "2", "--algorithms", "nope"],
     "command line: --algorithms[0]: 'nope' is not a bcast algorithm of "),
    (["-c", "bcast"], "--nprocs (-n) is required"),
    (["-n", "2"], "--collective (-c) is required"),
    (["-c", "bcast", "-n", "2", "--name", "a b"],
     "command line: --name: 'a b' is not a valid name"),
    ([], "give a spec file, or a campaign as options"),
])
def test_bad_options_are_one_line(argv: list[str], message: str,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_counts_are_bounded_by_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["plan", "-c", "bcast", "-n", "2", "-i", "-3"])
    assert stop.value.code == 2
    assert "-3 is out of range; valid: 0 to" in capsys.readouterr().err


def test_a_spec_file_and_options_together_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = Path(__file__).parents[1] / "examples" / "quickstart.toml"
    assert main(["run", str(spec), "-c", "bcast", "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "a spec file and --collective together" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_python_dash_m_is_the_same_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "collbench", "plan", "-c", "gather", "-n",
                           "2", "--format", "toml"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert 'collectives = ["gather"]' in done.stdout
    bad = subprocess.run([sys.executable, "-m", "collbench", "show", "/nonexistent"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("collbench: error:")


def test_typed_values_never_end_a_line_of_the_stored_spec() -> None:
    hostile = 'x"\n[run]\nbackend = "slurm"\x7f\\'
    text = spec_text({"campaign": {"name": "n"}, "measure": {
        "collectives": ["bcast"], "nprocs": [2], "algorithms": [hostile, 3]}})
    assert len(text.split("\n")) == 10  # comment, 2 blanks, 2 headers, 4 keys, final newline
    spec = parse_spec(text, "made")
    assert spec.measure.algorithms[0].name == hostile and spec.run.backend == "local"
    with pytest.raises(UserError, match="is not valid text"):
        spec_text({"campaign": {"name": "bad\udcff"}})


def test_run_without_o_measures_into_a_throwaway_folder_and_prints_the_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    argv = ["run", "-c", "bcast", "-n", "2", "-m", "1:64", "-i", "10", "-x", "1",
            "--backend", "fake"]
    assert main([*argv, "-f"]) == 0
    out, err = capsys.readouterr()
    (folder,) = tmp_path.glob("collbench-*/quick")
    assert f"measuring into {folder} (a throw-away folder" in err
    assert "repetitions (launches), the fewest that let the table test significance" in err
    spec = parse_spec(Store(folder).spec_text(), "stored")
    assert spec.run.repetitions == 6  # 10 variants of bcast: 9 compared at each size
    assert f"{folder}: 6 launches ok" in out
    # the size × algorithm table of each statistic asked (-f: min and max too)
    for name in ("median_avg_us", "median_min_us", "median_max_us"):
        assert f"# bcast np=2 map-by=core bind-to=core: {name}" in out
    lines = out.splitlines()
    heads = [line.split() for line in lines if line.lstrip().startswith("size ")]
    rows = [line for line in lines if line.split()[:1] in (["1"], ["64"])]
    assert all(len(line) <= 100 for line in rows) and len(rows) == 12  # 2 blocks × 3 stats
    assert heads[0][:3] == ["size", "recommended", "default"]
    shown = {w for h in heads[:2] for w in h} - {"size", "recommended"}
    assert len(heads) == 6 and len(shown) == 10  # 10 variants wrap into 2 blocks, 3 stats
    first = rows[1].split()  # 64 B, first block: size, recommended, then the variants
    assert first[1] in shown  # a recommended variant per size
    # the fake backend's variants differ far beyond noise: every one is marked significant
    assert all(cell[-1] in "*!" for cell in first[3:])
    assert "--all` shows every one" in out or "stability warning" not in out


def test_stat_takes_only_statistics_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["run", "-c", "bcast", "-n", "2", "--stat", "p99"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--stat" in err and "'p99'" in err and "avg" in err and err.count("\n") == 1
