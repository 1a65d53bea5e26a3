"""`collbench regress OLD NEW`: significant slowdowns beyond a threshold, exit 1 / 0 / 2."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collbench.analyse.regress import regress
from collbench.campaign import create_folder
from collbench.cli import main
from collbench.store import Store
from tests.test_points import row as points_row

SIZES = (1, 1024, 65536)
NOISE = (1.00, 1.01, 0.99, 1.02, 0.98)


def row(**kw: Any) -> dict[str, Any]:
    """tests/test_points.py's row, as a local campaign of the kernel writes it."""
    return points_row(**{"backend": "local", "selection": "none", **kw})


def folder(root: Path, slow: dict[int, float] | None = None, reps: int = 5,
           **fields: Any) -> Path:
    """bcast default and binomial at SIZES; `slow` multiplies default's time per size."""
    store = Store(root)
    create_folder(store, {"name": root.name, "seed": 0, "backend": "local"}, "# test\n",
                  {"launches": []}, {"cores": 8})
    for rep in range(reps):
        lid = f"r{rep}"
        store.write_launch(lid, [
            row(launch_id=lid, repetition=rep, algorithm=alg, size_bytes=size,
                avg_us=(10 + size / 100) * (1 + a) * NOISE[rep % 5]
                * ((slow or {}).get(size, 1.0) if alg == "default" else 1.0), **fields)
            for a, alg in enumerate(("default", "binomial")) for size in SIZES],
            {"status": "ok"})
    return root


def test_a_significant_slowdown_beyond_the_threshold_is_a_regression(tmp_path: Path) -> None:
    old = folder(tmp_path / "old")
    new = folder(tmp_path / "new", slow={1024: 1.30, 65536: 1.03}, mpi="openmpi-5.0.12",
                 mpi_version="5.0.12")
    r = regress(Store(old), Store(new), threshold=0.05)
    assert len(r.changes) == 2 * len(SIZES)
    got = {(c.algorithm, c.size_bytes): c.verdict for c in r.changes}
    assert got[("default", 1024)] == "regression"
    assert got[("default", 65536)] == "same"  # 3 %: real, but within the threshold
    assert got[("binomial", 1024)] == "same"
    (reg,) = r.regressions
    assert reg.ratio == pytest.approx(1.30) and reg.ratio_low is not None and reg.ratio_low > 1


def test_each_folder_is_read_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """OLD was read twice (once for the statistic's figure, once for its points)."""
    from collbench import points

    old, new = folder(tmp_path / "old"), folder(tmp_path / "new", slow={1024: 1.3})
    reads: list[Path] = []
    connect = points.connect

    def counted(store: Store) -> Any:
        reads.append(store.root)
        return connect(store)

    monkeypatch.setattr(points, "connect", counted)
    assert main(["regress", str(old), str(new)]) == 1
    assert "1 regressions of 6 matched points" in capsys.readouterr().out
    assert sorted(reads) == sorted([old, new])


def test_exit_status_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = folder(tmp_path / "old")
    new = folder(tmp_path / "new", slow={1024: 1.5})
    assert main(["regress", str(old), str(new), "--threshold", "10%"]) == 1
    out = capsys.readouterr().out
    assert "1 regressions of 6 matched points" in out and "median_avg_us" in out
    assert "default" in out and "regression" in out
    assert main(["regress", str(old), str(new), "--threshold", "10%", "--format", "csv"]) == 1
    head, row = capsys.readouterr().out.splitlines()  # a CSV has no heading: rows name it
    assert head.endswith(",verdict,statistic") and row.endswith(",median_avg_us")
    assert main(["regress", str(old), str(old / ".." / "old2")]) == 2  # no such folder
    capsys.readouterr()
    same = folder(tmp_path / "same")
    assert main(["regress", str(old), str(same), "--format", "json", "--all"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["regressions"] == 0 and len(data["changes"]) == 6
    assert {c["verdict"] for c in data["changes"]} == {"same"}


def test_single_repetitions_are_judged_by_the_threshold_and_named_untested(
        tmp_path: Path) -> None:
    old = folder(tmp_path / "old", reps=1)
    new = folder(tmp_path / "new", reps=1, slow={1: 1.2, 1024: 1.02})
    r = regress(Store(old), Store(new), threshold=0.05)
    got = {(c.algorithm, c.size_bytes): c for c in r.changes}
    assert got[("default", 1)].verdict == "regression (untested)"
    assert got[("default", 1)].p_value is None
    assert got[("default", 1024)].verdict == "same"


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    old = folder(tmp_path / "old")
    assert main(["regress", str(old), str(old)]) == 2
    assert "same folder" in capsys.readouterr().err
    for bad in ("-5%", "abc", "nan"):
        with pytest.raises(SystemExit) as e:
            main(["regress", str(old), str(old), "--threshold", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--threshold" in err[0]
    other = folder(tmp_path / "other", collective="allreduce")
    assert main(["regress", str(old), str(other)]) == 2
    assert "no ok point" in capsys.readouterr().err


def test_a_folder_with_two_settings_per_point_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = folder(tmp_path / "old")
    swept = Store(folder(tmp_path / "new", params=json.dumps({"mca": {"btl": "self,sm"}})))
    swept.write_launch("tcp", [row(launch_id="tcp", params=json.dumps(
        {"mca": {"btl": "self,tcp"}}))], {"status": "ok"})
    assert main(["regress", str(old), str(swept.root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MCA/environment/workload setting" in err[0], err


def test_two_campaigns_from_collbench_run(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Folders `collbench run` wrote (fake backend): the same spec twice is no regression."""
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "r"\n[measure]\ncollectives = ["bcast"]\n'
                    'algorithms = ["default", "binomial"]\nsizes = ["1:1K"]\nnprocs = [2]\n'
                    '[run]\nbackend = "fake"\nrepetitions = 3\nseed = 1\n')
    for name in ("a", "b"):
        assert main(["run", str(spec), "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["regress", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json",
                 "--all"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["changes"]) == 2 * 11 and data["regressions"] == 0


@pytest.mark.mpi
@pytest.mark.slow
def test_real_open_mpi_tcp_is_a_regression_against_shared_memory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two real campaigns (the Open MPI wheel, 2 ranks): NEW runs over TCP loopback, OLD
    over shared memory; at 256 KiB TCP is several times slower, significantly."""
    for name, btl in (("old", "self,sm"), ("new", "self,tcp")):
        spec = tmp_path / f"{name}.toml"
        spec.write_text('[campaign]\nname = "r"\n[measure]\ncollectives = ["bcast"]\n'
                        'algorithms = ["default"]\nsizes = ["256K"]\nnprocs = [2]\n'
                        'iterations = 50\nwarmup = 5\n[run]\nrepetitions = 4\nseed = 2\n'
                        f'timeout = 120\n[mca.fixed]\nbtl = "{btl}"\n')
        assert main(["run", str(spec), "-o", str(tmp_path / name)]) == 0
    capsys.readouterr()
    assert main(["regress", str(tmp_path / "old"), str(tmp_path / "new"), "--format",
                 "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    (change,) = data["changes"]
    assert change["verdict"] == "regression" and change["ratio"] > 1.05


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_at_a_random_moment_is_one_line_and_writes_nothing_half(
        tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C or SIGTERM while the command starts, reads or writes: `collbench:
    interrupted` and exit 130 (never a traceback or a silent death), the table written whole
    or not at all; or it finished first: the verdict (1) and the whole table."""
    old, new = folder(tmp_path / "old"), folder(tmp_path / "new", slow={1024: 1.5})
    args = ["regress", str(old), str(new), "--format", "markdown", "-o"]
    assert main([*args, str(tmp_path / "whole.md")]) == 1
    whole = (tmp_path / "whole.md").read_text()
    out, temp = tmp_path / "out", tmp_path / "tmp"
    out.mkdir()
    temp.mkdir()
    rnd = random.Random(sig)
    for low, high in [(0.15, 0.25), (0.25, 0.4), (0.4, 0.7)] * 2:  # start-up, reads, writes
        proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", *args,
                                 str(out / "regress.md")], env=dict(os.environ, TMPDIR=str(temp)),
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(low, high))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        if proc.returncode != 1:  # 1: it finished first (a regression)
            assert (proc.returncode, err) == (130, "collbench: interrupted\n")
        assert [p.read_text() for p in out.iterdir()] in ([], [whole])  # no part, no aside
        assert list(temp.iterdir()) == []
        (out / "regress.md").unlink(missing_ok=True)
