"""SimGrid backend end to end with real smpirun: mapping, determinism, placement, errors."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from collbench.catalog import ompi_decisions
from collbench.catalog.collectives import COLLECTIVES, Kind
from collbench.catalog.load import load_catalog
from collbench.catalog.mpi import find_mpi
from collbench.catalog.simgrid import (
    MPICH,
    OPENMPI,
    SMPI_ALGORITHMS,
    SMPI_SWITCHES,
    selector,
)
from collbench.cli import main
from collbench.launch.simgrid import SmpiTools
from collbench.records import COLUMNS
from collbench.store import Store
from tests.simgrid_support import SMALL, needs_smpi, small_platform

pytestmark = needs_smpi

SPEC = """\
[campaign]
name = "sim"

[measure]
collectives = {collectives}
algorithms = {algorithms}
sizes = {sizes}
nprocs = {nprocs}
map_by = {map_by}
iterations = 3
warmup = 1
{extra}

[run]
backend = "{backend}"
seed = 5
timeout = 120
"""


def spec(tmp_path: Path, name: str = "spec.toml", collectives: str = '["bcast", "gather"]',
         algorithms: str = '["default", "binomial"]', sizes: str = "[1, 65536]",
         nprocs: str = "[8]", map_by: str = '["core"]', extra: str = "",
         backend: str = "simgrid") -> Path:
    path = tmp_path / name
    path.write_text(SPEC.format(collectives=collectives, algorithms=algorithms, sizes=sizes,
                                nprocs=nprocs, map_by=map_by, extra=extra, backend=backend))
    return path


def rows(out: Path, where: str = "TRUE") -> list[dict[str, Any]]:
    con = Store(out).connect()
    cur = con.execute(f"SELECT * FROM measurements WHERE {where} ORDER BY collective, "
                      "algorithm, mapping, nprocs, size_bytes")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def smpi_algorithms(tools: SmpiTools, kernel: Path, platform: Path, coll: str,
                    tmp_path: Path) -> set[str]:
    """SMPI's own list for a collective, from its error on an unknown name."""
    xml, hosts = tmp_path / "p.xml", tmp_path / "h.txt"
    assert main(["platform", "xml", str(platform), "-o", str(xml)]) == 0
    hosts.write_text("node0-c0\n")
    done = subprocess.run([str(tools.smpirun), "-np", "1", "-platform", str(xml), "-hostfile",
                           str(hosts), f"--cfg=smpi/{coll}:__list__", str(kernel), "--jobs",
                           "/dev/null", "--output", str(tmp_path / "o.jsonl")],
                          capture_output=True, text=True, timeout=120, check=False)
    m = re.search(r"Valid algorithms: (.*?)\.?$", done.stdout + done.stderr, re.M)
    assert m, done.stderr[-500:]
    return {a.strip() for a in m.group(1).split(",")}


def test_mapping_names_exist_in_smpi_for_every_collective(
        tmp_path: Path, smpi_tools: SmpiTools, smpi_kernel: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    platform = small_platform(tmp_path)
    catalog = load_catalog(find_mpi())
    blocking = [c for c, d in COLLECTIVES.items() if d.kind is not Kind.P2P]
    for coll in SMPI_SWITCHES:
        have = smpi_algorithms(smpi_tools, smpi_kernel, platform, coll, tmp_path)
        assert selector("openmpi") in have and selector("mpich") in have
        # smpi:<name> accepts exactly SMPI's list (without its selector and auto-tuner)
        assert set(SMPI_ALGORITHMS[coll]) == have - {"default", "automatic"}, coll
        for table in (OPENMPI, MPICH):
            for name, alg in table.get(coll, {}).items():
                assert alg is None or alg.smpi in have, (coll, name, alg)
    # every coll/tuned algorithm of every collective is either mapped or said to be missing
    for coll in blocking:
        if coll not in ompi_decisions.ALGORITHMS:
            continue  # gatherv, scatterv: no coll/tuned algorithm; non-blocking: libnbc's
        for known in catalog.of(coll):
            assert known.name in OPENMPI.get(coll, {}), (coll, known.name)
    assert main(["algorithms", "--backend", "simgrid", "bcast"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"bcast\s+binomial\s+6\s+port\s+smpi:binomial_tree\s+equivalent", out)
    assert re.search(r"bcast\s+chain\s+2\s+port\s+-\s+not in SMPI", out)
    assert re.search(r"bcast\s+smpi:NTSL\s+smpi\s+SMPI only", out)


def test_run_gives_rows_shaped_like_a_local_run(
        tmp_path: Path, sim_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sim, local = tmp_path / "sim", tmp_path / "local"
    platform = small_platform(tmp_path)
    assert main(["run", str(spec(tmp_path)), "--backend", "simgrid", "--platform",
                 str(platform), "-o", str(sim)]) == 0
    got = rows(sim)
    assert len(got) == 2 * 2 * 2  # collectives × algorithms × sizes
    assert all(r["status"] == "ok" and r["backend"] == "simgrid"
               and r["mpi"].startswith("smpi-") for r in got)  # the key: smpi-<version>
    assert all(r["avg_us"] > 0 and r["min_us"] <= r["avg_us"] <= r["max_us"] for r in got)
    assert {r["selection"] for r in got} == {"none", "launch"}
    assert {(r["nodes"], r["ppn"]) for r in got} == {(2, 4)}  # 4 cores per node
    prov = json.loads((sim / "provenance.json").read_text())
    assert prov["simgrid"]["version"] == prov["mpi"]["version"]
    assert prov["simgrid"]["platform"] == "small"
    assert (sim / "platform.toml").read_text() == SMALL and (sim / "platform.xml").exists()
    for meta_file in (sim / "launches").glob("*.meta.json"):  # every launch runs the ports
        command = json.loads(meta_file.read_text())["command"]
        assert any(c.startswith("COLLBENCH_PORTS_TABLE=") for c in command)
        assert not any(c.startswith("--cfg=smpi/coll-selector:") for c in command)
    # the same spec through the real local backend (Open MPI, 2 ranks)
    assert main(["run", str(spec(tmp_path, "local.toml", collectives='["bcast"]',
                                 algorithms='["default"]', nprocs="[2]", backend="local")),
                 "-o", str(local)]) == 0
    here = rows(local)[0]
    assert set(here) == set(got[0]) == set(COLUMNS)
    filled = {k for k, v in here.items() if v is not None}
    assert filled - {"metrics"} <= {k for k, v in got[0].items() if v is not None}


def test_same_spec_twice_gives_identical_numbers(tmp_path: Path, sim_env: Path) -> None:
    platform = str(small_platform(tmp_path))
    path = spec(tmp_path, collectives='["allreduce", "alltoall"]', algorithms='"all"',
                sizes="[4, 4096]", map_by='["node"]')
    runs = []
    for out in (tmp_path / "a", tmp_path / "b"):
        assert main(["run", str(path), "--platform", platform, "-o", str(out)]) == 0
        runs.append([(r["collective"], r["algorithm"], r["size_bytes"], r["avg_us"],
                      r["min_us"], r["max_us"], r["median_us"]) for r in rows(out)])
    assert runs[0] == runs[1]
    assert len(runs[0]) >= 2 * 2 * 4 and len({r[3] for r in runs[0]}) > 4


def test_placement_moves_messages_onto_slower_links(tmp_path: Path, sim_env: Path) -> None:
    path = spec(tmp_path, collectives='["bcast", "latency"]', algorithms='["default"]',
                sizes="[1]", nprocs="[2, 4]", map_by='["core", "socket", "node"]')
    out = tmp_path / "res"
    assert main(["run", str(path), "--platform", str(small_platform(tmp_path)), "-o",
                 str(out)]) == 0
    lat = {(r["mapping"], r["nprocs"]): r["avg_us"] for r in rows(out, "collective='latency'")}
    # a ping-pong takes each level's latency (+ the 1-byte and 16-byte envelope transfer)
    assert lat[("core", 2)] == pytest.approx(0.2, rel=0.02)
    assert lat[("socket", 2)] == pytest.approx(0.5, rel=0.02)
    assert lat[("node", 2)] == pytest.approx(1.5, rel=0.02)
    bcast = {(r["mapping"], r["nprocs"]): r["max_us"] for r in rows(out, "collective='bcast'")}
    for n in (2, 4):
        assert bcast[("core", n)] < bcast[("socket", n)] < bcast[("node", n)], bcast
    nodes = {(r["mapping"], r["nprocs"]): r["nodes"] for r in rows(out)}
    assert nodes[("core", 4)] == 1 and nodes[("node", 4)] == 2


def test_invalid_platform_fails_before_any_simulation(
        tmp_path: Path, sim_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = small_platform(tmp_path, SMALL.replace("bandwidth_mbs = 5000", "bandwidth_mbs = 0"))
    out = tmp_path / "res"
    assert main(["run", str(spec(tmp_path)), "--platform", str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: levels.inter_socket.bandwidth_mbs: must be greater than 0" in err
    assert err.count("\n") == 1 and not out.exists()
    assert main(["run", str(spec(tmp_path)), "--platform", "orfeo", "-o", str(out)]) == 2
    assert "valid: fat-tree-4096, jupiter, orfeo-epyc, orfeo-thin" in capsys.readouterr().err
    big = spec(tmp_path, "big.toml", nprocs="[16]")
    assert main(["run", str(big), "--platform", str(small_platform(tmp_path)), "-o",
                 str(out)]) == 2
    assert "measure.nprocs[0]: nprocs 16 exceeds the 8 cores of platform small" in \
        capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(("change", "message"), [
    ({"algorithms": '["flattree"]'},
     "measure.algorithms[0]: 'flattree' is not a bcast algorithm of openmpi 5.0; valid: "
     "default, basic_linear (1), chain (2), pipeline (3), split_binary_tree (4), binary_tree "
     "(5), binomial (6), knomial (7), scatter_allgather (8), scatter_allgather_ring (9) "
     "('flattree' is SMPI's own algorithm: write smpi:flattree)"),
    ({"algorithms": '["smpi:flat_tree"]'},
     "measure.algorithms[0]: 'smpi:flat_tree' is not one of SMPI's bcast algorithms; valid: "
     "smpi:arrival_pattern_aware,"),
    ({"extra": "", "map_by": '["numa"]'},
     "measure.map_by[0]: 'numa' is not simulated; valid: core, socket, node"),
    ({"algorithms": '[{name = "smpi:ompi_pipeline", segsize = 8192}]'},
     "measure.algorithms[0].segsize: smpi:ompi_pipeline is SMPI's own algorithm, which "
     "chooses its own segment size and fanout"),
])
def test_what_smpi_cannot_do_is_rejected_before_anything_runs(
        tmp_path: Path, sim_env: Path, capsys: pytest.CaptureFixture[str],
        change: dict[str, str], message: str) -> None:
    path = spec(tmp_path, collectives='["bcast"]', **change)
    out = tmp_path / "res"
    assert main(["run", str(path), "--platform", "orfeo-thin", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()
    assert main(["plan", str(path)]) == 2  # plan says the same
    assert message in capsys.readouterr().err


def test_mpit_and_mca_are_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec(tmp_path)
    text = path.read_text()
    path.write_text(text.replace("[run]", "[mca]\nfixed = {coll_tuned_priority = 30}\n\n[run]"))
    assert main(["plan", str(path)]) == 2
    assert "mca: SimGrid SMPI has no MCA parameters" in capsys.readouterr().err
    path.write_text(text.replace("seed = 5", 'seed = 5\nselection = "mpit"'))
    assert main(["plan", str(path)]) == 2
    assert "run.selection: 'mpit' needs MPI_T" in capsys.readouterr().err


def test_a_deadlock_is_a_failed_point_with_smpis_message(
        tmp_path: Path, sim_env: Path) -> None:
    # An eager threshold below SMPI's own linear_sync gather's second segment deadlocks SMPI
    # 3.32; SMPI exits 0 after saying so: the points must still be failed, and the run go
    # on. collbench's port of Open MPI's linear_sync (forced: one segment) runs.
    eager = small_platform(tmp_path, SMALL + "\n[smpi]\neager_threshold = 8192\n")
    path = spec(tmp_path, collectives='["gather"]',
                algorithms='["smpi:ompi_linear_sync", "linear_sync"]', sizes="[1, 65536]")
    out = tmp_path / "res"
    assert main(["run", str(path), "--platform", str(eager), "-o", str(out)]) == 1
    by = {(r["algorithm"], r["size_bytes"]): r for r in rows(out)}
    assert by[("smpi:ompi_linear_sync", 1)]["status"] == "ok"
    assert by[("smpi:ompi_linear_sync", 65536)]["status"] == "failed"
    assert "Deadlock" in by[("smpi:ompi_linear_sync", 65536)]["error"]
    assert by[("linear_sync", 65536)]["status"] == "ok"


@pytest.mark.usefixtures("sim_env")  # COLLBENCH_CACHE: the kernel built once
def test_a_killed_simulation_leaves_no_program_copy(tmp_path: Path) -> None:
    """SMPI copies the program once per rank into TMPDIR and unlinks each copy once loaded:
    they go to the launch's own TMPDIR, which the watchdog removes, so collbench killed
    at moments of that copying leaves none in the user's."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    path = tmp_path / "kill.toml"
    path.write_text('[campaign]\nname = "kill"\n[measure]\ncollectives = ["bcast"]\n'
                    "sizes = [1]\nnprocs = [48]\niterations = 2\nwarmup = 1\n"
                    '[run]\nbackend = "simgrid"\ntimeout = 120\n'
                    '[run.simgrid]\nplatform = "orfeo-thin"\n')
    rnd = random.Random(7)
    for i in range(2):
        proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "run", str(path),
                                 "-o", str(tmp_path / f"out{i}")],
                                env=dict(os.environ, TMPDIR=str(temp)),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        deadline = time.monotonic() + 60
        while not (copies := list(temp.rglob("*.so"))):  # SMPI copies the program
            assert time.monotonic() < deadline and proc.poll() is None, "no copy seen"
            time.sleep(0.005)
        assert [c.parent.name[:16] for c in copies] == ["collbench-launch"] * len(copies)
        time.sleep(rnd.uniform(0, 0.05))
        os.killpg(proc.pid, signal.SIGKILL)  # collbench: no chance to clean up
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15  # the watchdog stops smpirun, removes its TMPDIR
        while list(temp.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(temp.iterdir()) == []
