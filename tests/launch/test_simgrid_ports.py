"""SimGrid runs collbench's ports of Open MPI's algorithms, for real (smpirun).

What runs under `--backend simgrid` with Open MPI's names: every coll/tuned algorithm is
collbench's port (kernel/ports/, linked into the SMPI kernel), forced with Open MPI's
semantics (unsegmented unless `segsize`); "default" runs the fixed decision rules of
`run.simgrid.ompi_version` and the row records what it resolved to; `smpi:<name>` runs
SMPI's own algorithm, labelled as such.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collbench.catalog import ompi_decisions
from collbench.catalog.simgrid import HAN_PORTS, han_lines
from collbench.cli import main
from tests.launch.test_simgrid import rows, spec
from tests.simgrid_support import needs_smpi, small_platform

pytestmark = needs_smpi

ALL_PORTED = ('["barrier", "bcast", "gather", "gatherv", "scatter", "scatterv", "reduce", '
              '"allreduce", "allgather", "allgatherv", "alltoall", "alltoallv", '
              '"reduce_scatter", "reduce_scatter_block"]')


def metrics(row: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(row["metrics"])) if row["metrics"] else {}


def run(tmp_path: Path, path: Path, out: Path, code: int = 0) -> list[dict[str, Any]]:
    assert main(["run", str(path), "--platform", str(small_platform(tmp_path)), "-o",
                 str(out)]) == code
    return rows(out)


@pytest.mark.slow
def test_every_port_runs_and_computes_right(tmp_path: Path, sim_env: Path) -> None:
    """Every ported algorithm of every collective (and default), at 3 and 4 ranks, on both
    sides of the small-count fallbacks, with every received byte checked."""
    path = spec(tmp_path, collectives=ALL_PORTED, algorithms='"all"', sizes="[3, 7, 4096]",
                nprocs="[3, 4]", extra="validate = true")
    got = run(tmp_path, path, tmp_path / "res")
    bad = [(r["nprocs"], r["collective"], r["algorithm"], r["size_bytes"], r["error"])
           for r in got if r["status"] != "ok" or not r["validated"]]
    assert not bad
    assert all(metrics(r)["implementation"] == "port" for r in got)
    ported = {(r["collective"], r["algorithm"]) for r in got}
    for coll in ("bcast", "gather", "reduce", "allreduce"):  # every algorithm ran
        assert {a for c, a in ported if c == coll} == {
            "default", *ompi_decisions.ALGORITHMS[coll]}, coll
    assert ("allgather", "sparbit") in ported and ("bcast", "chain") in ported


def test_default_resolves_to_the_fixed_decision_rules(tmp_path: Path, sim_env: Path) -> None:
    """The row says what "default" ran; it is Open MPI 5.0's fixed decision at each
    (collective, nprocs, size) — sizes on both sides of several switch points. At 7 ranks
    (4 + 3 on the platform's 2 nodes) coll/han takes bcast, reduce, allreduce, gather,
    scatter, allgather and barrier: allreduce and barrier run han's hierarchy, the others
    han's fallback to the fixed decision (test_han_on_two_nodes)."""
    path = spec(tmp_path, collectives='["bcast", "reduce", "gather", "scatter", "allreduce", '
                '"allgather", "alltoall", "reduce_scatter_block", "barrier", "gatherv"]',
                algorithms='["default"]', sizes="[1, 64, 2048, 8192, 65536, 262144]",
                nprocs="[2, 4, 7]")
    out = tmp_path / "res"
    got = run(tmp_path, path, out)
    assert got and all(r["status"] == "ok" for r in got)
    seen: dict[str, set[str]] = {}
    for r in got:
        m = metrics(r)
        assert m["implementation"] == "port", r
        spans = r["nprocs"] == 7 and r["collective"] in HAN_PORTS
        assert r["component"] == ("han" if spans else "tuned"), r
        if spans and r["collective"] in ("allreduce", "barrier"):
            assert (m["resolved_algorithm"], m["resolved_algorithm_id"]) == (
                HAN_PORTS[r["collective"]], None)
            continue
        if r["collective"] == "gatherv":  # coll/tuned has none: coll/basic's linear
            assert (m["resolved_algorithm"], m["resolved_algorithm_id"]) == ("basic_linear",
                                                                             None)
            continue
        want = ompi_decisions.decide_osu("5.0", r["collective"], r["nprocs"], r["size_bytes"])
        assert m["resolved_algorithm_id"] == want.algorithm_id, r
        assert m["resolved_algorithm"] == ompi_decisions.algorithm_name(
            "5.0", r["collective"], want.algorithm_id)
        assert r["algorithm"] == "default" and r["algorithm_id"] == 0
        seen.setdefault(r["collective"], set()).add(m["resolved_algorithm"])
    assert all(len(seen[c]) >= 2 for c in ("bcast", "reduce", "allreduce", "alltoall")), seen
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["simgrid"]["ompi_version"] == "5.0"
    assert "Open MPI 5.0's fixed decision rules" in prov["mpi"]["default"]


def test_smpi_algorithms_still_run_and_are_labelled(tmp_path: Path, sim_env: Path) -> None:
    path = spec(tmp_path, collectives='["bcast"]',
                algorithms='["smpi:ompi_pipeline", "smpi:ompi", "SMPI:binomial_tree", '
                           '"pipeline"]',
                sizes="[1, 1048576]", nprocs="[4]", extra="validate = true")
    out = tmp_path / "res"
    got = run(tmp_path, path, out)
    assert all(r["status"] == "ok" and r["validated"] for r in got)
    impl = {r["algorithm"]: metrics(r)["implementation"] for r in got}
    assert impl == {"smpi:ompi_pipeline": "smpi", "smpi:ompi": "smpi",
                    "smpi:binomial_tree": "smpi", "pipeline": "port"}
    assert {r["algorithm_id"] for r in got if r["algorithm"].startswith("smpi:")} == {None}
    commands = [json.loads(p.read_text())["command"]
                for p in (out / "launches").glob("*.meta.json")]
    forced = sorted(c for cmd in commands for c in cmd if c.startswith("--cfg=smpi/bcast:"))
    assert forced == ["--cfg=smpi/bcast:binomial_tree", "--cfg=smpi/bcast:ompi",
                      "--cfg=smpi/bcast:ompi_pipeline"]
    # only the port's launch gets the ports table
    assert sum(any(c.startswith("COLLBENCH_PORTS_TABLE=") for c in cmd)
               for cmd in commands) == 1
    # SMPI's pipeline segments its message; Open MPI's forced pipeline does not (issue 12)
    at = {r["algorithm"]: r["avg_us"] for r in got if r["size_bytes"] == 1048576}
    assert at["pipeline"] > 2 * at["smpi:ompi_pipeline"], at


def test_segment_size_and_fanout_are_honoured(tmp_path: Path, sim_env: Path) -> None:
    """Forced pipeline bcast at 1 MiB on 4 ranks: unsegmented, it is three full hops;
    with 32 KiB segments the hops overlap (faster); with 1 KiB ones the per-message
    latency of 1024 messages per hop costs (slower than 32 KiB). A chain's fanout
    changes the tree."""
    path = spec(tmp_path, collectives='["bcast"]',
                algorithms='[{name = "pipeline", segsize = [0, 1024, 32768]}, '
                           '{name = "chain", fanout = [1, 3]}]',
                sizes="[1048576]", nprocs="[4]", extra="validate = true")
    got = run(tmp_path, path, tmp_path / "res")
    assert all(r["status"] == "ok" and r["validated"] for r in got)
    t = {(r["algorithm"], r["segsize"], r["fanout"]): r["avg_us"] for r in got}
    unseg, small, big = (t[("pipeline", s, 0)] for s in (0, 1024, 32768))
    assert big < 0.6 * unseg and small > big, t
    # a chain of fanout 1 is the pipeline; fanout 3 is one hop from the root to all
    assert t[("chain", 0, 1)] == pytest.approx(unseg)
    assert t[("chain", 0, 3)] != pytest.approx(unseg)


@pytest.mark.parametrize(("extra", "algorithms", "message"), [
    ('\n[run.simgrid]\nompi_version = "4.0"', '["default"]',
     "run.simgrid.ompi_version: Open MPI 4.0: no decision rules known; valid: 4.1, 5.0"),
    ('\n[run.simgrid]\nompi_version = "4.1"', '["sparbit"]',
     "measure.algorithms[0]: 'sparbit' is not an allgather algorithm of openmpi 4.1; valid: "
     "default, linear (1), bruck (2), recursive_doubling (3), ring (4), neighbor (5), "
     "two_proc (6); SMPI's own: smpi:<name> (collbench algorithms --backend simgrid "
     "allgather)"),
    ("", '["smpi:sparbit"]',
     "measure.algorithms[0]: 'smpi:sparbit' is not one of SMPI's allgather algorithms; "
     "valid: smpi:2dmesh, smpi:3dmesh, smpi:bruck,"),
])
def test_bad_version_or_algorithm_is_one_line(
        tmp_path: Path, sim_env: Path, capsys: pytest.CaptureFixture[str], extra: str,
        algorithms: str, message: str) -> None:
    path = spec(tmp_path, collectives='["allgather"]', algorithms=algorithms, nprocs="[4]")
    path.write_text(path.read_text() + extra)
    out = tmp_path / "res"
    assert main(["run", str(path), "--platform", str(small_platform(tmp_path)), "-o",
                 str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_version_4_1_runs_the_same_rules(tmp_path: Path, sim_env: Path) -> None:
    """4.1's fixed rules are 5.0's (ompi_decisions): the same launch gives the same rows,
    and provenance names the version simulated."""
    got = {}
    for version in ("4.1", "5.0.11"):
        path = spec(tmp_path, f"{version}.toml", collectives='["allreduce"]',
                    algorithms='["default"]', sizes="[4, 65536]", nprocs="[4]")
        path.write_text(path.read_text() + f'\n[run.simgrid]\nompi_version = "{version}"\n')
        out = tmp_path / version
        got[version] = [(r["size_bytes"], r["avg_us"], r["metrics"])
                        for r in run(tmp_path, path, out)]
        prov = json.loads((out / "provenance.json").read_text())
        assert prov["simgrid"]["ompi_version"] == version[:3]
    assert got["4.1"] == got["5.0.11"]


def test_han_on_two_nodes(tmp_path: Path, sim_env: Path) -> None:
    """A simulated Open MPI 5.0 whose ranks span both nodes runs coll/han's port for default
    bcast, reduce, allreduce, gather, scatter and allgather (component "han"; 4 + 4 in
    blocks, 2 + 2 round robin), with every byte checked; a collective han lacks (alltoall),
    one node (4 ranks in blocks), one rank per node (1 + 1: han steps aside) and a forced
    tuned algorithm keep coll/tuned on the whole communicator; 4.1 (han at priority 0) never
    runs han. The hierarchy is not the fixed decision on the whole communicator: most of its
    times differ."""
    got = {}
    for version in ("4.1", "5.0"):
        path = spec(tmp_path, f"{version}.toml",
                    collectives='["bcast", "reduce", "allreduce", "gather", "scatter", '
                                '"allgather", "alltoall"]',
                    algorithms='["default"]', sizes="[64, 65536, 200000]", nprocs="[2, 4, 8]",
                    map_by='["core", "node"]', extra="validate = true")
        path.write_text(path.read_text() + f'\n[run.simgrid]\nompi_version = "{version}"\n')
        rows_ = run(tmp_path, path, tmp_path / version)
        assert rows_ and all(r["status"] == "ok" and r["validated"] for r in rows_)
        got[version] = {(r["collective"], r["mapping"], r["nprocs"], r["size_bytes"]): r
                        for r in rows_}
    differ = 0
    for key, r in got["5.0"].items():
        coll, mapping, nprocs, _ = key
        han = coll in HAN_PORTS and (nprocs == 8 or (nprocs == 4 and mapping == "node"))
        assert r["component"] == ("han" if han else "tuned"), key
        assert got["4.1"][key]["component"] == "tuned", key
        if han:
            assert metrics(r)["resolved_algorithm"] == HAN_PORTS[coll]
            differ += r["avg_us"] != got["4.1"][key]["avg_us"]
        elif nprocs <= 4 and (mapping == "core" or nprocs == 2):  # one node or one rank per
            assert r["avg_us"] == got["4.1"][key]["avg_us"], key  # node: tuned in both
    assert differ >= 16, differ  # of 24 han points (some paths take as long either way)
    path = spec(tmp_path, "forced.toml", collectives='["bcast"]', algorithms='["binomial"]',
                sizes="[64]", nprocs="[4]", map_by='["node"]')
    forced = run(tmp_path, path, tmp_path / "forced")
    assert [(r["status"], r["component"]) for r in forced] == [("ok", "tuned")]


@pytest.mark.slow
def test_han_barrier_separates_non_blocking_iterations_on_two_nodes(
        tmp_path: Path, sim_env: Path) -> None:
    """A non-blocking point runs SMPI's own ibcast, but MPI_Barrier between its iterations
    is coll/han's on a simulated 5.0 across nodes, as natively: the skew it leaves moves
    the per-rank average away from 4.1's (tuned's barrier); on one node both are tuned."""
    got = {}
    for version in ("4.1", "5.0"):
        path = spec(tmp_path, f"nb{version}.toml", collectives='["ibcast"]',
                    algorithms='["default"]', sizes="[64]", nprocs="[4, 8]",
                    map_by='["core", "node"]')
        path.write_text(path.read_text() + f'\n[run.simgrid]\nompi_version = "{version}"\n')
        got[version] = {(r["nprocs"], r["mapping"]): r["avg_us"]
                        for r in run(tmp_path, path, tmp_path / f"nb{version}")}
    assert got["5.0"][(4, "core")] == got["4.1"][(4, "core")]  # one node: tuned's
    assert got["5.0"][(8, "node")] != got["4.1"][(8, "node")]  # two nodes: han's


def test_han_lines_follow_the_series_and_the_nodes() -> None:
    assert han_lines("5.0.11", ["alltoall", "gather", "bcast", "allreduce", "bcast"], 2, 4,
                     2) == ["han gather 4 2 simple", "han bcast 4 2 intra",
                            "han allreduce 4 2 intra"]
    assert han_lines("5.0", ["barrier", "alltoall"], 2, 1, 2) == ["han barrier 1 2 simple"]
    assert han_lines("4.1.8", ["bcast"], 2, 1, 2) == []
    assert han_lines("5.0", ["bcast"], 1, 1, 2) == []
