"""Helpers for proving collbench's ports of Open MPI algorithms message for message.

The ports (src/collbench/kernel/ports/) are driven by `port_driver`, which runs either a
port (`impl="port"`) or the MPI library's own collective (`impl="native"`, the algorithm
forced in coll/tuned) for a list of cases: every combination of algorithm, segment size,
fanout and message size, `iterations` collectives each.

Traffic matrices come from Open MPI's own monitoring (pml/monitoring, launched with
`--mca pml_monitoring_enable 2`): for every ordered pair (sender, receiver) of
MPI_COMM_WORLD ranks, the number of point-to-point messages, their bytes and a histogram
of their sizes (bin 0: empty messages, bin k: [2^(k-1), 2^k) bytes). "Filtered" mode (2)
keeps user tags ("E" lines, what the ports send) apart from negative, library-internal
tags ("I" lines, what coll/tuned sends), so a test can also check that the ports used
only point-to-point calls and that the native run really went through coll/tuned.

How MPI_Init/Finalize, communicator set-up and the driver's own traffic are kept out:
the driver works in phases through the monitoring component's MPI_T variable
`pml_monitoring_flush`. Right before a case's first collective every rank flushes its
counters to a throw-away file (which also zeroes them), and right after the case's last
collective it flushes them to `<prefix>.<case>.<rank>.prof`. Between those two points the
driver only fills and checks buffers locally, so a case's files hold exactly its
collectives' messages. `iterations=0` cases give empty phases, which the tests check
(nothing leaks into a phase), and a case with n iterations must show exactly n times the
traffic of one.

Built with `-DCBP_COUNT_MESSAGES` (for SimGrid SMPI, which has no MPI_T), the ports count
their own sends and the driver writes the same files itself.

One launch can run several groups of cases (`join_groups`: "+" between the groups' argument
lists); each case then names its group. A case an algorithm refuses (Open MPI's two_proc
algorithms on P != 2 return MPI_ERR_UNSUPPORTED_OPERATION before sending anything) is
announced with status "refused" and the run goes on (exit status EXIT_REFUSED if nothing
else went wrong). Wrong results are reported per case (`DriverRun.problems`), and every
announced case's matrix is read even when the run as a whole failed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import run_mpi

PORTS_DIR = Path(__file__).resolve().parents[2] / "src" / "collbench" / "kernel" / "ports"
LIBRARY_SOURCES = ("cbp_util.c", "cbp_topo.c", "cbp_bcast.c", "cbp_gather_scatter.c",
                   "cbp_reduce.c", "cbp_barrier.c", "cbp_decide.c", "cbp_allgather.c",
                   "cbp_alltoall.c", "cbp_reduce_scatter.c", "cbp_han.c")
CFLAGS = ("-O2", "-Wall", "-Wextra")

# Open MPI 5.0.11 coll/tuned algorithm ids the ports cover, per collective. Id 0 (the fixed
# decision rules) is covered too for FIXED_DECISION's collectives.
PORTED: dict[str, tuple[int, ...]] = {
    "bcast": (1, 2, 3, 4, 5, 6, 7, 8, 9),
    "gather": (1, 2, 3),
    "scatter": (1, 2, 3),
    "reduce": (1, 2, 3, 4, 5, 6, 7),
    "allreduce": (1, 2, 3, 4, 5, 6),
    "barrier": (1, 2, 3, 4, 5, 6),
    "allgather": (1, 2, 3, 4, 5, 6, 7),
    "allgatherv": (1, 2, 3, 4, 5, 6),
    "alltoall": (1, 2, 3, 4, 5),
    "alltoallv": (1, 2),
    "reduce_scatter": (1, 2, 3, 4),
    "reduce_scatter_block": (1, 2, 3, 4),
}
FIXED_DECISION = ("bcast", "reduce", "gather", "scatter")

# Exit status of the driver when nothing went wrong but some case was refused
# (MPI_ERR_UNSUPPORTED_OPERATION, e.g. two_proc on P != 2).
EXIT_REFUSED = 4

_LINE = re.compile(r"^([EI])\t(\d+)\t(\d+)\t(\d+) bytes\t(\d+) msgs sent\t?([\d,]*)$")
_CASE = re.compile(r"^CASE (\d+) (.*)$")


@dataclass(frozen=True)
class Traffic:
    """What one rank sent to one peer during a phase."""

    external_msgs: int = 0
    external_bytes: int = 0
    internal_msgs: int = 0
    internal_bytes: int = 0
    histogram: tuple[int, ...] = ()

    @property
    def msgs(self) -> int:
        return self.external_msgs + self.internal_msgs

    @property
    def nbytes(self) -> int:
        return self.external_bytes + self.internal_bytes

    def key(self, with_histogram: bool = True) -> tuple[int, int, tuple[int, ...]]:
        """(messages, bytes, histogram without trailing zeros), tag class ignored."""
        hist = self.histogram
        while hist and hist[-1] == 0:
            hist = hist[:-1]
        return (self.msgs, self.nbytes, hist if with_histogram else ())


@dataclass(frozen=True)
class Matrix:
    """(sender, receiver) -> Traffic, for the pairs that exchanged at least one message."""

    cells: Mapping[tuple[int, int], Traffic] = field(default_factory=dict)

    def keyed(self, with_histogram: bool = True
              ) -> dict[tuple[int, int], tuple[int, int, tuple[int, ...]]]:
        return {pair: t.key(with_histogram) for pair, t in sorted(self.cells.items())
                if t.msgs > 0}

    @property
    def msgs(self) -> int:
        return sum(t.msgs for t in self.cells.values())

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.cells.values())

    @property
    def external_msgs(self) -> int:
        return sum(t.external_msgs for t in self.cells.values())

    @property
    def internal_msgs(self) -> int:
        return sum(t.internal_msgs for t in self.cells.values())

    def scaled_down(self, factor: int) -> Matrix | None:
        """The matrix divided by `factor` (None if some entry is not a multiple)."""
        out: dict[tuple[int, int], Traffic] = {}
        for pair, t in self.cells.items():
            values = (t.external_msgs, t.external_bytes, t.internal_msgs, t.internal_bytes,
                      *t.histogram)
            if any(v % factor for v in values):
                return None
            out[pair] = Traffic(t.external_msgs // factor, t.external_bytes // factor,
                                t.internal_msgs // factor, t.internal_bytes // factor,
                                tuple(h // factor for h in t.histogram))
        return Matrix(out)

    def describe(self) -> str:
        return ", ".join(f"{s}->{d}: {m} msgs/{b} B" for (s, d), (m, b, _)
                         in self.keyed(with_histogram=False).items()) or "(no messages)"


@dataclass(frozen=True)
class Case:
    """One case of a driver run, as the driver announced it."""

    index: int
    coll: str
    impl: str
    alg: int
    segsize: int
    fanout: int
    size: int
    count: int
    iterations: int
    root: int
    group: int = 0
    status: str = "ok"  # ok | refused | failed | unported (rank 0's view)

    def label(self) -> str:
        return (f"{self.coll} alg={self.alg} segsize={self.segsize} fanout={self.fanout} "
                f"size={self.size} root={self.root}")

    def config(self) -> tuple[int, int, int, int, int]:
        """What must match between a native and a port case."""
        return (self.alg, self.segsize, self.fanout, self.size, self.root)


@dataclass(frozen=True)
class DriverRun:
    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    cases: list[Case]
    matrices: dict[int, Matrix]

    def failure(self) -> str:
        return (f"exit {self.returncode}: {' '.join(self.command)}\n"
                f"stdout tail: {self.stdout[-1500:]}\nstderr tail: {self.stderr[-3000:]}")

    def problems(self, case: int) -> list[str]:
        """The driver's WRONG / FAILED lines about one case (any rank)."""
        return [line for line in self.stderr.splitlines()
                if line.startswith(("WRONG ", "FAILED ")) and f" case={case} " in f"{line} "]


@dataclass(frozen=True)
class Build:
    path: Path
    warnings: str


def build_driver(cc: Path | str, out_dir: Path, *, name: str = "port_driver",
                 defines: Sequence[str] = (), timeout: float = 180) -> Build:
    """Compile port_driver.c and the ports library with `cc` (mpicc or smpicc)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / name
    sources = [str(PORTS_DIR / "port_driver.c"), *(str(PORTS_DIR / s) for s in LIBRARY_SOURCES)]
    cmd = [str(cc), *CFLAGS, *(f"-D{d}" for d in defines), "-o", str(exe), *sources]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{res.stdout}\n{res.stderr}")
    return Build(exe, (res.stdout + res.stderr).strip())


def parse_prof(text: str) -> dict[tuple[int, int], Traffic]:
    """The "E"/"I" lines of one pml_monitoring output file, merged per (sender, receiver)."""
    acc: dict[tuple[int, int], list[int]] = {}
    hists: dict[tuple[int, int], tuple[int, ...]] = {}
    for line in text.splitlines():
        m = _LINE.match(line.rstrip("\n"))
        if m is None:
            continue
        kind, src, dst, nbytes, msgs, hist = m.groups()
        pair = (int(src), int(dst))
        cell = acc.setdefault(pair, [0, 0, 0, 0])
        if kind == "E":
            cell[0] += int(msgs)
            cell[1] += int(nbytes)
        else:
            cell[2] += int(msgs)
            cell[3] += int(nbytes)
        if hist:
            hists[pair] = tuple(int(x) for x in hist.split(","))
    return {pair: Traffic(c[0], c[1], c[2], c[3], hists.get(pair, ()))
            for pair, c in acc.items()}


def read_matrix(prefix: Path, case: int, nprocs: int) -> Matrix:
    """The traffic of one phase: every rank's <prefix>.<case>.<rank>.prof."""
    cells: dict[tuple[int, int], Traffic] = {}
    for rank in range(nprocs):
        path = Path(f"{prefix}.{case}.{rank}.prof")
        if not path.exists():
            raise FileNotFoundError(path)
        cells.update(parse_prof(path.read_text()))
    return Matrix(cells)


def parse_cases(stdout: str) -> list[Case]:
    cases = []
    for line in stdout.splitlines():
        m = _CASE.match(line.strip())
        if m is None:
            continue
        fields = dict(item.split("=", 1) for item in m.group(2).split())
        cases.append(Case(int(m.group(1)), fields["coll"], fields["impl"], int(fields["alg"]),
                          int(fields["segsize"]), int(fields["fanout"]), int(fields["size"]),
                          int(fields["count"]), int(fields["iterations"]),
                          int(fields["root"]), int(fields.get("group", "0")),
                          fields.get("status", "ok")))
    return cases


def _csv(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def driver_args(coll: str, impl: str, algs: Sequence[int], segsizes: Sequence[int],
                fanouts: Sequence[int], sizes: Sequence[int], iterations: int,
                root: int = 0) -> list[str]:
    return [coll, impl, _csv(algs), _csv(segsizes), _csv(fanouts), _csv(sizes),
            str(iterations), str(root)]


def join_groups(groups: Sequence[Sequence[str]]) -> list[str]:
    """One driver command line running several groups of cases ("+" between them)."""
    out: list[str] = []
    for g in groups:
        if out:
            out.append("+")
        out.extend(g)
    return out


def _matrices(prefix: Path, cases: Sequence[Case], np: int) -> dict[int, Matrix]:
    """The traffic of every case the driver announced (it announces a case once its phase
    files are written, so a run that failed later still has them)."""
    out: dict[int, Matrix] = {}
    for c in cases:
        with contextlib.suppress(FileNotFoundError):
            out[c.index] = read_matrix(prefix, c.index, np)
    return out


def mpirun_base(mpirun: Path | str, np: int) -> list[str]:
    """mpirun as root, oversubscribed (2 cores here), filtered pml monitoring on."""
    return [str(mpirun), "--allow-run-as-root", "-np", str(np),
            "--map-by", "core:OVERSUBSCRIBE", "--bind-to", "core:overload-allowed",
            "--mca", "coll_tuned_use_dynamic_rules", "1",
            "--mca", "pml_monitoring_enable", "2"]


def run_driver(mpirun: Path | str, driver: Path, np: int, args: Sequence[str], workdir: Path,
               *, tag: str, force_mpit: bool = False, mca: Sequence[tuple[str, str]] = (),
               timeout: float = 120) -> DriverRun:
    """Run the driver under Open MPI; read every case's traffic matrix."""
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = workdir / tag
    cmd = mpirun_base(mpirun, np)
    for name, value in mca:
        cmd += ["--mca", name, value]
    cmd += ["-x", "CBP_MONITOR", "-x", "CBP_FORCE_MPIT", str(driver), *args]
    env = {**os.environ, "CBP_MONITOR": str(prefix), "CBP_FORCE_MPIT": "1" if force_mpit else "0",
           # functional runs only: oversubscribed busy-polling ranks would crawl
           "OMPI_MCA_mpi_yield_when_idle": "1"}
    res = run_mpi(cmd, timeout=timeout, env=env)
    cases = parse_cases(res.stdout)
    return DriverRun(cmd, res.returncode, res.stdout, res.stderr, cases,
                     _matrices(prefix, cases, np))


def run_hosts_driver(mpirun: Path | str, driver: Path, hosts: str, map_by: str,
                     ssh_config: Path, args: Sequence[str], workdir: Path, *, tag: str,
                     timeout: float = 120) -> DriverRun:
    """Run the driver over emulated hosts (`hosts` as mpirun's --host, e.g. "n1:2,n2:2"),
    no algorithm forced (Open MPI's default, coll/han on several hosts), each native case
    run once before its phase (CBP_WARMUP: han builds its sub-communicators at its first
    call)."""
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = workdir / tag
    np = sum(int(h.split(":")[1]) for h in hosts.split(","))
    cmd = [str(mpirun), "--allow-run-as-root", "-np", str(np), "--host", hosts,
           "--map-by", map_by, "--prtemca", "plm_ssh_agent", f"ssh -F {ssh_config}",
           "--mca", "pml_monitoring_enable", "2", "-x", "CBP_MONITOR", "-x", "CBP_WARMUP",
           "-x", "OMPI_MCA_mpi_yield_when_idle", str(driver), *args]
    env = {**os.environ, "CBP_MONITOR": str(prefix), "CBP_WARMUP": "1",
           "OMPI_MCA_mpi_yield_when_idle": "1"}
    res = run_mpi(cmd, timeout=timeout, env=env)
    cases = parse_cases(res.stdout)
    return DriverRun(cmd, res.returncode, res.stdout, res.stderr, cases,
                     _matrices(prefix, cases, np))


def run_smpi_driver(smpirun: Path | str, driver: Path, np: int, args: Sequence[str],
                    workdir: Path, platform: Path, hostfile: Path, *, tag: str,
                    timeout: float = 180) -> DriverRun:
    """Run an smpicc-built driver (-DCBP_COUNT_MESSAGES) under SimGrid."""
    workdir.mkdir(parents=True, exist_ok=True)
    prefix = workdir / tag
    cmd = [str(smpirun), "-np", str(np), "-platform", str(platform), "-hostfile",
           str(hostfile), "--cfg=smpi/simulate-computation:no", "--log=root.thres:warning",
           "--log=smpi_config.thres:warning", str(driver), *args]
    env = {**os.environ, "CBP_MONITOR": str(prefix)}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                         check=False, cwd=workdir)
    cases = parse_cases(res.stdout)
    return DriverRun(cmd, res.returncode, res.stdout, res.stderr, cases,
                     _matrices(prefix, cases, np))


def decide(driver: Path, coll: str, nprocs: Sequence[int], sizes: Sequence[int],
           commutative: bool = True, timeout: float = 60
           ) -> dict[tuple[int, int], tuple[int, int]]:
    """The ports' fixed decision (cbp_decide, no MPI involved):
    (nprocs, bytes) -> (algorithm id, fanout)."""
    res = subprocess.run([str(driver), "decide", coll, _csv(nprocs), _csv(sizes),
                          "1" if commutative else "0"], capture_output=True, text=True,
                         timeout=timeout, check=True)
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for line in res.stdout.splitlines():
        fields = dict(item.split("=", 1) for item in line.split()[1:])
        out[(int(fields["nprocs"]), int(fields["bytes"]))] = (int(fields["alg"]),
                                                               int(fields["fanout"]))
    return out


def tool(name: str, venv_bin: Path) -> Path | None:
    """`name` from the venv (the Open MPI wheel) if there, else from PATH."""
    local = venv_bin / name
    if local.exists():
        return local
    found = shutil.which(name)
    return Path(found) if found else None


def tiny_platform(path: Path, hosts: int) -> tuple[Path, Path]:
    """A flat SimGrid cluster of `hosts` one-core hosts and its hostfile."""
    xml = path / "tiny.xml"
    xml.write_text(
        "<?xml version='1.0'?>\n"
        "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
        "<platform version=\"4.1\">\n"
        "  <cluster id=\"tiny\" prefix=\"h\" suffix=\"\" radical=\"0-"
        f"{hosts - 1}\" speed=\"1Gf\" bw=\"10GBps\" lat=\"1us\"/>\n"
        "</platform>\n")
    hostfile = path / "tiny.hosts"
    hostfile.write_text("".join(f"h{i}\n" for i in range(hosts)))
    return xml, hostfile
