"""Non-blocking campaigns under real Open MPI (2 and 4 ranks): rows carry the overlap
figures per MPI_Test count, `compare --stat overlap_pct` reads them, and a libnbc
algorithm forced at launch (`--mca coll_libnbc_ibcast_algorithm N`) is the one that runs,
proved by the launch's recorded command and Open MPI's pml monitoring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store

pytestmark = pytest.mark.mpi

SPEC = """\
[campaign]
name = "nb-mpi"
[measure]
collectives = ["iallgather", "ibcast"]
algorithms = {{ ibcast = ["default", "binomial"] }}
sizes = ["1K", "256K"]
nprocs = [2, 4]
iterations = 20
warmup = 2
validate = true
nonblocking = {{ test_calls = [0, 25] }}
[run]
seed = 5
timeout = 120
{run}
{mca}
"""


def metrics_rows(out: Path) -> list[tuple[str, int, str, int, str, dict[str, object]]]:
    con = Store(out).connect()
    return [(c, n, a, s, st, json.loads(m)) for c, n, a, s, st, m in con.execute(
        "SELECT collective, nprocs, algorithm, size_bytes, status, metrics FROM measurements "
        "ORDER BY ALL").fetchall()]


@pytest.mark.slow
def test_campaign_stores_overlap_figures_per_test_calls(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    spec.write_text(SPEC.format(run="", mca=""))
    assert main(["run", str(spec), "-o", str(out)]) == 0
    rows = metrics_rows(out)
    # 2 process counts x (iallgather + 2 ibcast algorithms) x 2 test counts x 2 sizes
    assert len(rows) == 2 * 3 * 2 * 2
    for coll, nprocs, _alg, size, status, m in rows:
        assert status == "ok", (coll, nprocs, size, m)
        assert m["test_calls"] in (0, 25) and m["compute"] == "auto"
        for key in ("overall_us", "compute_us", "init_us", "test_us", "wait_us", "pure_us",
                    "overlap_pct", "overlap_imb_pct"):
            assert isinstance(m[key], float | int), (key, m)
        assert 0 <= float(m["overlap_pct"]) <= 100  # type: ignore[arg-type]
        assert float(m["overall_us"]) >= float(m["compute_us"])  # type: ignore[arg-type]
        # OSU counts MPI_Test time apart: none without test calls, some with 25 of them
        if m["test_calls"] == 0:
            assert m["test_us"] == 0
        else:
            assert float(m["test_us"]) > 0  # type: ignore[arg-type]
    capsys.readouterr()
    assert main(["compare", str(out), "--stat", "overlap_pct", "--collective", "ibcast",
                 "--nprocs", "4", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stat"] == "overlap_pct" and result["effect"] == "difference"
    tests = {json.loads(p["params"])["nonblocking"]["test_calls"] for p in result["points"]}
    assert tests == {0, 25}
    assert {p["label"] for p in result["points"]} == {"default", "binomial"}


def bytes_to_rank3(prof: Path) -> int:
    """Bytes rank 0 sent to rank 3 inside collectives (pml monitoring's `I` line)."""
    for row in prof.read_text().splitlines():
        f = row.split("\t")
        if f[:3] == ["I", "0", "3"]:
            return int(f[3].split()[0])
    return 0


def test_libnbc_algorithm_forced_at_launch_is_the_one_that_runs(tmp_path: Path) -> None:
    """At 4 ranks libnbc's linear ibcast (id 1) sends rank 0's 1024 bytes straight to rank 3;
    binomial (id 2) never does (rank 0 sends to ranks 1 and 2). Each campaign forces one of
    them at launch (run.selection = "launch"), with pml monitoring on through [mca]."""
    sent, commands = {}, {}
    for alg in ("linear", "binomial"):
        prefix = tmp_path / f"prof-{alg}"
        spec, out = tmp_path / f"{alg}.toml", tmp_path / alg
        spec.write_text(f"""\
[campaign]
name = "force-{alg}"
[measure]
collectives = ["ibcast"]
algorithms = ["{alg}"]
sizes = [1024]
nprocs = 4
iterations = 4
warmup = 1
[mca]
fixed = {{ pml_monitoring_enable = 2, pml_monitoring_enable_output = 3, \
pml_monitoring_filename = "{prefix}" }}
[run]
selection = "launch"
timeout = 120
""")
        assert main(["run", str(spec), "-o", str(out)]) == 0
        rows = metrics_rows(out)
        assert [(r[2], r[4]) for r in rows] == [(alg, "ok")]
        store = Store(out)
        (lid,) = store.finished()
        meta = json.loads((store.launch_dir / f"{lid}.meta.json").read_text())
        commands[alg] = " ".join(meta["command"])
        sent[alg] = bytes_to_rank3(Path(f"{prefix}.0.prof"))
        # the forcing key is not an experiment parameter: params hold the user's MCA only
        params = Store(out).connect().execute("SELECT params FROM measurements").fetchone()
        assert params is not None and "coll_libnbc" not in params[0]
    assert "--mca coll_libnbc_ibcast_algorithm 1" in commands["linear"]
    assert "--mca coll_libnbc_ibcast_algorithm 2" in commands["binomial"]
    # pure + overlapped loop: (4 + 1) * 2 calls of 1024 bytes each
    assert sent["linear"] >= 10 * 1024
    assert sent["binomial"] == 0
