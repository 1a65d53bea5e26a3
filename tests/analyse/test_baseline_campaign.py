"""`compare --baseline btl=...` on folders that `collbench run` wrote: the fake backend
(every run) and real Open MPI over two transports (marked mpi and slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.analyse import compare
from collbench.cli import main
from collbench.store import Store

SPEC = """\
[campaign]
name = "btl-sweep"
[measure]
collectives = ["bcast"]
algorithms = ["default", "binomial"]
sizes = ["1", "1K"]
nprocs = [2]
iterations = {iterations}
warmup = 2
[run]
seed = 5
repetitions = 3
timeout = 120
{run}
[mca.sweep]
btl = [{btls}]
"""


def run_sweep(tmp: Path, btls: tuple[str, str], run: str = "",
              iterations: int = 20) -> Path:
    spec, out = tmp / "spec.toml", tmp / "res"
    spec.write_text(SPEC.format(run=run, iterations=iterations,
                                btls=", ".join(f'"{b}"' for b in btls)))
    assert main(["run", str(spec), "-o", str(out)]) == 0
    return out


def check_sweep(out: Path, btls: tuple[str, str]) -> None:
    base, other = btls
    c = compare(Store(out), baseline=f"btl={base}")
    assert (c.column, c.baseline) == ("mca.btl", base)
    assert {p.label for p in c.points} == set(btls)
    assert {p.n for p in c.points} == {3}
    # one block per algorithm, the swept btl out of its context
    algorithms = {json.loads(p.params or "{}")["algorithm"] for p in c.points}
    assert algorithms == {"default", "binomial"}
    assert all("btl" not in (p.params or "") for p in c.points)
    assert len(c.ratios) == 2 * 2  # per algorithm and size: the other btl against the base
    assert all(r.point.label == other and r.ratio > 0 for r in c.ratios)


def test_fake_campaign_sweeping_btl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    btls = ("self,vader", "self,tcp")
    out = run_sweep(tmp_path, btls, run='backend = "fake"')
    check_sweep(out, btls)
    capsys.readouterr()
    # the fake backend's times ignore MCA settings: nothing differs, the baseline is kept
    assert main(["compare", str(out), "--baseline", "btl=self,vader", "--summary",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["column"] == "mca.btl" and data["baseline"] == "mca.btl=self,vader"
    assert len(data["blocks"]) == 2
    assert all(r["algorithm"] == "self,vader" for b in data["blocks"] for r in b["ranges"])
    assert main(["compare", str(out), "--baseline", "btl=self,sm"]) == 2
    assert "values of mca.btl: self,tcp, self,vader" in capsys.readouterr().err


@pytest.mark.mpi
@pytest.mark.slow
def test_real_open_mpi_shared_memory_against_tcp(tmp_path: Path) -> None:
    btls = ("self,sm", "self,tcp")
    out = run_sweep(tmp_path, btls, iterations=200)
    check_sweep(out, btls)
