"""Proof that --mpit (MPI_T write + MPI_Comm_dup) runs the algorithm launch-time --mca runs.

The algtrace LD_PRELOAD library (collbench/tune/algtrace.c) counts every
ompi_coll_tuned_<coll>_intra_do_this call by algorithm id, fan-in/out and segment size, on
MPI_COMM_WORLD or on another communicator, and by epoch (MPI_Comm_dup calls so far). The
kernel dups once per new configuration under --mpit (once per launch without it), so the
other-communicator calls of epoch k are those made while measuring the k-th configuration.

* One --mpit launch measures every algorithm of every coll/tuned collective, without
  `--mca coll_tuned_use_dynamic_rules 1`: the kernel turns dynamic rules on through MPI_T.
* Launch k forces algorithm k of every collective that has one with --mca (as a
  per-algorithm launch would), without --mpit.
Both traces must show exactly the requested algorithm. 2 ranks, because the two_proc
algorithms refuse other sizes, and under --mca they would also serve the kernel's own
bookkeeping collectives.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from collbench.kernel.build import KernelBinary
from collbench.tune.shim import build_shim, read_traces
from tests.conftest import KernelRun, kernel_runner, mpi_tool

pytestmark = pytest.mark.mpi

TUNED = ("bcast", "reduce", "allreduce", "allgather", "allgatherv", "alltoall", "alltoallv",
         "barrier", "gather", "scatter", "reduce_scatter", "reduce_scatter_block")
NPROCS = 2
SIZE = 64
# (collective, algorithm, segsize, fanout) measured after the plain sweep, and the
# (faninout, segsize) that do_this must receive. bcast's faninout is the chain fanout.
SEGMENTED = (
    (("bcast", 2, 4096, 3), (3, 4096)),
    (("bcast", 2, 0, 0), (4, 0)),  # back to Open MPI's defaults
    (("reduce", 3, 8192, 2), (2, 8192)),
    (("gather", 3, 1024, 0), (4, 1024)),
)

Call = tuple[str, int, int, int]  # collective, algorithm, faninout, segsize


@dataclass(frozen=True)
class Traced:
    run: KernelRun
    segments: list[list[Call]]  # D-communicator calls after each DUP, rank 0


def ompi_algorithms() -> dict[str, list[int]]:
    """Algorithm ids per collective, as this Open MPI's ompi_info lists them."""
    ompi_info = mpi_tool("ompi_info")
    if ompi_info is None:
        pytest.skip("no ompi_info")
    out = subprocess.run([str(ompi_info), "--param", "coll", "tuned", "--level", "9",
                          "--parsable"], capture_output=True, text=True, check=True).stdout
    algs: dict[str, list[int]] = defaultdict(list)
    for line in out.splitlines():
        # mca:coll:tuned:param:coll_tuned_bcast_algorithm:enumerator:value:6:binomial
        f = line.split(":")
        if len(f) >= 9 and f[5] == "enumerator" and f[4].endswith("_algorithm"):
            coll = f[4].removeprefix("coll_tuned_").removesuffix("_algorithm")
            if int(f[7]) > 0:
                algs[coll].append(int(f[7]))
    return dict(algs)


def read_trace(prefix: Path) -> list[list[Call]]:
    traces = read_traces(prefix, range(NPROCS))
    assert len(traces) == NPROCS
    # Every rank ran the same algorithms. (faninout and segsize may differ: coll/tuned
    # passes uninitialised values for collectives without such cvars, e.g. barrier.)
    assert len({frozenset((c.epoch, c.world, c.collective, c.algorithm) for c in t.calls)
                for t in traces}) == 1
    rank0 = traces[0]
    segments: list[list[Call]] = [[] for _ in range(rank0.dups)]
    for c in rank0.calls:
        if not c.world and c.epoch >= 1:
            segments[c.epoch - 1].append((c.collective, c.algorithm, c.faninout, c.segsize))
    return segments


def job(coll: str, alg: int, segsize: int = 0, fanout: int = 0) -> str:
    size = 0 if coll == "barrier" else SIZE
    return f"{coll} {alg} {segsize} {fanout} {size} 3 1\n"


@pytest.fixture(scope="module")
def algorithms() -> dict[str, list[int]]:
    algs = ompi_algorithms()
    assert set(TUNED) <= set(algs), algs
    return algs


@pytest.fixture(scope="module")
def shim(mpicc: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_shim(mpicc, cache_dir=tmp_path_factory.mktemp("shim"))


def traced_run(kernel: KernelBinary, shim: Path, workdir: Path, jobs: str, *flags: str,
               mca: list[tuple[str, str]] | None = None) -> Traced:
    prefix = workdir / "trace"
    run = kernel_runner(kernel, workdir)(
        NPROCS, jobs, "--validate", *flags, mca=mca or [],
        export=[f"LD_PRELOAD={shim}", f"COLLBENCH_ALGTRACE={prefix}"])
    assert run.returncode == 0, run.stderr
    return Traced(run, read_trace(prefix))


@pytest.fixture(scope="module")
def mpit(kernel: KernelBinary, shim: Path, algorithms: dict[str, list[int]],
         tmp_path_factory: pytest.TempPathFactory) -> Traced:
    jobs = "".join(job(c, a) for c in TUNED for a in algorithms[c])
    jobs += "".join(job(*point) for point, _ in SEGMENTED)
    return traced_run(kernel, shim, tmp_path_factory.mktemp("mpit"), jobs, "--mpit")


@pytest.fixture(scope="module")
def forced(kernel: KernelBinary, shim: Path, algorithms: dict[str, list[int]],
           tmp_path_factory: pytest.TempPathFactory) -> dict[int, Traced]:
    """Launch k: --mca coll_tuned_<c>_algorithm k for every c that has algorithm k."""
    runs = {}
    for k in range(1, max(max(algorithms[c]) for c in TUNED) + 1):
        colls = [c for c in TUNED if k in algorithms[c]]
        mca = [("coll_tuned_use_dynamic_rules", "1")]
        mca += [(f"coll_tuned_{c}_algorithm", str(k)) for c in colls]
        runs[k] = traced_run(kernel, shim, tmp_path_factory.mktemp(f"forced{k}"),
                             "".join(job(c, k) for c in colls), mca=mca)
    return runs


def measured(segment: list[Call], coll: str) -> set[Call]:
    calls = {c for c in segment if c[0] == coll}
    assert calls, f"no {coll} call traced"
    return calls


def mpit_segments(t: Traced) -> dict[tuple[str, int, int, int], list[Call]]:
    """Map each successfully configured point to its trace segment (one DUP each; a
    configuration measured twice maps to its last segment)."""
    ok = [(r["collective"], r["algorithm_id"], r["segsize"], r["fanout"])
          for r in t.run.records if r["status"] != "failed"]
    assert len(ok) == len(t.segments)
    return dict(zip(ok, t.segments, strict=True))


@pytest.mark.parametrize("coll", TUNED)
def test_mpit_selects_what_mca_forces(coll: str, algorithms: dict[str, list[int]],
                                      mpit: Traced, forced: dict[int, Traced]) -> None:
    sweep = mpit.run.records[:-len(SEGMENTED)]
    records = [r for r in sweep if r["collective"] == coll]
    assert [r["algorithm_id"] for r in records] == algorithms[coll]
    segments = mpit_segments(mpit)
    for alg in algorithms[coll]:
        (launch_segment,) = forced[alg].segments
        by_mca = {c[:2] for c in measured(launch_segment, coll)}
        assert by_mca == {(coll, alg)}
        rec = next(r for r in records if r["algorithm_id"] == alg)
        if coll == "allgatherv":  # read-only cvar in this build: refuse, never measure
            assert rec["status"] == "failed"
            assert rec["error"] == "mpit: cvar coll_tuned_allgatherv_algorithm not writable"
            assert rec["avg_us"] is None
            continue
        assert rec["status"] == "ok" and rec["validated"] is True, rec
        by_mpit = {c[:2] for c in measured(segments[(coll, alg, 0, 0)], coll)}
        assert by_mpit == by_mca


def test_mpit_sets_segment_size_and_fanout(mpit: Traced, kernel: KernelBinary, shim: Path,
                                           tmp_path: Path) -> None:
    segments = mpit_segments(mpit)
    for (coll, alg, segsize, fanout), (fan_seen, seg_seen) in SEGMENTED:
        calls = measured(segments[(coll, alg, segsize, fanout)], coll)
        assert calls == {(coll, alg, fan_seen, seg_seen)}
    # The same settings at launch time give the same do_this arguments.
    mca = [("coll_tuned_use_dynamic_rules", "1"),
           ("coll_tuned_bcast_algorithm", "2"), ("coll_tuned_bcast_algorithm_segmentsize", "4096"),
           ("coll_tuned_bcast_algorithm_chain_fanout", "3"),
           ("coll_tuned_reduce_algorithm", "3"),
           ("coll_tuned_reduce_algorithm_segmentsize", "8192"),
           ("coll_tuned_reduce_algorithm_chain_fanout", "2"),
           ("coll_tuned_gather_algorithm", "3"),
           ("coll_tuned_gather_algorithm_segmentsize", "1024")]
    launch = traced_run(kernel, shim, tmp_path, job("bcast", 2) + job("reduce", 3)
                        + job("gather", 3), mca=mca)
    (segment,) = launch.segments
    assert measured(segment, "bcast") == {("bcast", 2, 3, 4096)}
    assert measured(segment, "reduce") == {("reduce", 3, 2, 8192)}
    assert measured(segment, "gather") == {("gather", 3, 4, 1024)}


def test_mpit_without_tuned_cvars(kernel: KernelBinary, tmp_path: Path) -> None:
    run = kernel_runner(kernel, tmp_path)(
        NPROCS, job("gatherv", 0) + job("gatherv", 1) + job("barrier", 2, 4096)
        + job("latency", 0) + job("bcast", 42), "--mpit")
    assert run.returncode == 0, run.stderr
    status = [(r["status"], r["error"]) for r in run.records]
    assert status[:4] == [
        ("ok", None),  # nothing to force
        ("failed", "mpit: cvar coll_tuned_gatherv_algorithm not found"),
        ("failed", "mpit: cvar coll_tuned_barrier_algorithm_segmentsize not found"),
        ("ok", None),
    ]
    assert status[4][0] == "failed"  # Open MPI refuses an unknown id rather than ignoring it
    assert status[4][1].startswith("mpit: cvar coll_tuned_bcast_algorithm rejected value 42")
