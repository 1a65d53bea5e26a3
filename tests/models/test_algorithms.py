from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from collbench.errors import UserError
from collbench.models.algorithms import detail, predict
from collbench.models.fitted import (
    CollectivePoint,
    cross_validate,
    fit_algorithm,
    leave_one_out,
    model_errors,
)
from collbench.models.p2p import LevelModel, P2PModel, Regime
from collbench.models.schedules import (
    ALGORITHMS,
    Params,
    messages,
    program,
    tree_binomial,
    tree_chain,
    tree_in_order_binary,
    tree_kary,
    tree_knomial,
)
from collbench.models.topology import Topology

A, B = 2.0, 1e9  # µs, bytes/s: t(m) = 2 + m/1000 µs


def hockney(alpha: float = A, beta: float = B, node_alpha: float | None = None,
            node_beta: float | None = None, gamma: float = 0.0) -> P2PModel:
    def lvl(name: str, a: float, b: float) -> LevelModel:
        return LevelModel(name, (Regime(0, a, b),))

    return P2PModel({"core": lvl("core", alpha, beta), "socket": lvl("socket", alpha, beta),
                     "node": lvl("node", node_alpha or alpha, node_beta or beta)}, gamma)


def t(m: float) -> float:
    return A + m * 1e6 / B


M = hockney()


def one_socket(p: int) -> Topology:
    return Topology(p)


@pytest.mark.parametrize(("coll", "alg", "p", "size", "expected", "stat"), [
    ("bcast", "binomial", 8, 4096, 3 * t(4096), "avg"),  # every rank ends at 3 t(m)
    ("bcast", "binomial", 8, 4096, 3 * t(4096), "max"),
    ("bcast", "basic_linear", 6, 1000, 5 * t(1000), "max"),
    ("bcast", "pipeline", 5, 1000, 4 * t(1000), "max"),  # unsegmented: P-1 hops
    ("bcast", "chain", 9, 1000, (2 - 1 + 4) * t(1000), "max"),  # 4 chains of 2
    ("bcast", "binary_tree", 7, 1000, 2 * 2 * t(1000), "max"),  # γ2·H·t, H = 2
    ("bcast", "knomial", 16, 1000, 3 * 2 * t(1000), "max"),  # (k-1)·log_k P
    ("gather", "basic_linear", 6, 1000, 5 * t(1000), "max"),
    ("gather", "basic_linear", 6, 1000, (5 * t(1000) + 5 * t(1000)) / 6, "avg"),
    ("gather", "binomial", 8, 1000, t(1000) + t(2000) + t(4000), "max"),
    # sync + first segment per peer, then the root's waitall completes the P-1 zero-byte
    # second segments one after another (each receive occupies the root's port α)
    # the root irecvs each rank's rest (here 0 B) ahead: only the last one is waited for
    ("gather", "linear_sync", 4, 1000, 3 * (t(0) + t(1000)) + t(0), "max"),
    ("scatter", "basic_linear", 5, 1000, 4 * t(1000), "max"),
    ("scatter", "binomial", 8, 1000, t(4000) + t(2000) + t(1000), "max"),
    ("reduce", "linear", 5, 1000, 4 * t(1000), "max"),
    ("reduce", "binomial", 8, 1000, 3 * t(1000), "max"),
    ("allreduce", "ring", 4, 4000, 2 * 3 * t(1000), "max"),  # 2(P-1) steps of m/P
    ("allreduce", "recursive_doubling", 8, 1000, 3 * t(1000), "max"),
    ("allreduce", "recursive_doubling", 6, 1000, 4 * t(1000), "max"),  # +2 extra steps
    ("allreduce", "rabenseifner", 8, 8000, 2 * (t(4000) + t(2000) + t(1000)), "max"),
    ("allgather", "ring", 5, 1000, 4 * t(1000), "max"),
    ("allgather", "recursive_doubling", 8, 1000, t(1000) + t(2000) + t(4000), "max"),
    ("allgather", "bruck", 5, 1000, t(1000) + t(2000) + t(1000), "max"),
    ("allgather", "neighbor", 6, 1000, t(1000) + 2 * t(2000), "max"),
    ("allgather", "two_proc", 2, 1000, t(1000), "max"),
    ("alltoall", "pairwise", 5, 1000, 4 * t(1000), "max"),
    ("alltoall", "linear", 5, 1000, 4 * t(1000), "max"),
    ("alltoall", "modified_bruck", 8, 1000, 3 * t(4000), "max"),
    ("barrier", "recursive_doubling", 8, 0, 3 * t(0), "max"),
    ("barrier", "bruck", 5, 0, 3 * t(0), "max"),
    ("barrier", "double_ring", 4, 0, 2 * 4 * t(0), "max"),
    ("barrier", "two_proc", 2, 0, t(0), "max"),
])
def test_hand_derived_formulas(coll: str, alg: str, p: int, size: int, expected: float,
                               stat: str) -> None:
    got = predict(M, one_socket(p), coll, alg, size, stat=stat)  # type: ignore[arg-type]
    assert got == pytest.approx(expected)


def test_segmented_pipeline_is_p_plus_ns_minus_2_segments() -> None:
    # 4 segments of 250 B over 6 ranks: (P + ns - 2)·t(s)
    got = predict(M, one_socket(6), "bcast", "pipeline", 1000, segsize=250, stat="max")
    assert got == pytest.approx((6 + 4 - 2) * t(250))


def test_reduction_cost_enters_through_gamma() -> None:
    g = 1e-3  # µs per byte
    got = predict(hockney(gamma=g), one_socket(8), "allreduce", "recursive_doubling", 1000,
                  stat="max")
    assert got == pytest.approx(3 * (t(1000) + g * 1000))


def test_levels_are_costed_where_messages_travel() -> None:
    # linear gather on 2 nodes × 3 ranks, map-by core: root receives 2 core + 3 node messages
    model = hockney(node_alpha=10.0, node_beta=0.5e9)
    topo = Topology(6, nodes=2, ppn=3, mapping="core")
    tn = 10.0 + 1000 * 1e6 / 0.5e9
    assert predict(model, topo, "gather", "basic_linear", 1000, stat="max") == \
        pytest.approx(2 * t(1000) + 3 * tn)
    # ring allgather under map-by node: every hop crosses the network
    topo_n = Topology(6, nodes=2, ppn=3, mapping="node")
    assert predict(model, topo_n, "allgather", "ring", 1000, stat="max") == \
        pytest.approx(5 * tn)
    terms = detail(model, topo_n, "allgather", "ring", 1000).stat_terms("max")
    assert terms[2] == 5 and terms[0] == 0 and terms[5] == 5000  # alpha_node, bytes_node


def every_case() -> list[tuple[str, str, int]]:
    out = []
    for coll, algs in ALGORITHMS.items():
        for alg in algs:
            for p in (2, 5, 8, 12):
                if alg == "two_proc" and p != 2:
                    continue
                out.append((coll, alg, p))
    return out


@pytest.mark.parametrize(("coll", "alg", "p"), every_case())
def test_monotonic_in_size(coll: str, alg: str, p: int) -> None:
    sizes = [1024, 4096, 16384, 65536] if coll != "barrier" else [0, 1024]
    times = [predict(M, one_socket(p), coll, alg, s) for s in sizes]
    assert all(a <= b * (1 + 1e-12) for a, b in itertools.pairwise(times))
    assert all(x > 0 for x in times)


def received(coll: str, alg: str, p: int, size: int, segsize: int = 0) -> Counter[int]:
    got: Counter[int] = Counter()
    for _, dst, n in messages(program(coll, alg, p, size, Params(segsize=segsize))):
        got[dst] += n
    return got


def reduced_bytes(coll: str, alg: str, p: int, size: int, segsize: int = 0) -> int:
    """Bytes reduced over all ranks (each received message flagged reduce, plus compute)."""
    progs = program(coll, alg, p, size, Params(segsize=segsize))
    chans: dict[tuple[int, int], list[int]] = defaultdict(list)
    for src, steps in enumerate(progs):
        for st in steps:
            for dst, n in st.sends:
                chans[(src, dst)].append(n)
    used: Counter[tuple[int, int]] = Counter()
    total = 0
    for dst, steps in enumerate(progs):
        for st in steps:
            total += st.compute
            for src, red in st.recvs:
                n = chans[(src, dst)][used[(src, dst)]]
                used[(src, dst)] += 1
                total += n if red else 0
    assert all(used[k] == len(v) for k, v in chans.items())  # every send is received
    return total


@pytest.mark.parametrize("p", [2, 3, 5, 6, 8, 11, 13, 16, 24])
def test_schedules_move_the_right_bytes(p: int) -> None:
    m = 4096
    for alg in ("basic_linear", "chain", "pipeline", "binary_tree", "binomial", "knomial"):
        got = received("bcast", alg, p, m)
        assert all(got[r] == m for r in range(1, p)), alg
        assert got[0] == 0
        assert received("bcast", alg, p, m, segsize=1000) == got
    got = received("bcast", "split_binary_tree", p, m)  # one half down the tree, one swapped
    assert all(got[r] == m for r in range(1, p))
    sc = math.ceil(m / p)
    for alg in ("scatter_allgather", "scatter_allgather_ring"):
        got = received("bcast", alg, p, m)
        for v in range(1, p):  # its binomial-scatter subtree, then every block it lacks
            low = v & -v
            scattered = max(0, min(m, min(v + low, p) * sc) - v * sc)
            own = max(0, min(sc, m - v * sc))
            assert got[v] == scattered + m - own, (alg, v)
    for alg in ("bruck", "recursive_doubling", "ring", "neighbor", "sparbit"):
        got = received("allgather", alg, p, m)
        assert all(got[r] == (p - 1) * m for r in range(p)), alg
    for alg in ("linear", "pairwise", "linear_sync"):
        got = received("alltoall", alg, p, m)
        assert all(got[r] == (p - 1) * m for r in range(p)), alg
    for alg in ("basic_linear", "binomial", "linear_sync"):
        assert received("gather", alg, p, m)[0] == (p - 1) * m, alg
    for alg in ("basic_linear", "binomial", "linear_nb"):
        got = received("scatter", alg, p, m)
        assert all(got[r] >= m for r in range(1, p)), alg
    for alg in ("linear", "chain", "pipeline", "binary", "binomial", "in-order_binary"):
        assert reduced_bytes("reduce", alg, p, m) == (p - 1) * m, alg
        assert reduced_bytes("reduce", alg, p, m, segsize=1000) == (p - 1) * m, alg
    assert reduced_bytes("allreduce", "ring", p, m) == (p - 1) * m
    if p & (p - 1) == 0:
        assert reduced_bytes("reduce", "rabenseifner", p, m) == (p - 1) * m
        assert reduced_bytes("allreduce", "rabenseifner", p, m) == (p - 1) * m


def spans(children: list[list[int]], root: int) -> bool:
    seen, todo = {root}, [root]
    while todo:
        for c in children[todo.pop()]:
            assert c not in seen
            seen.add(c)
            todo.append(c)
    return len(seen) == len(children)


@pytest.mark.parametrize("p", range(1, 40))
def test_trees_span_every_rank_once(p: int) -> None:
    for root in {0, p // 2, p - 1}:
        assert spans(tree_binomial(p, root), root)
        assert spans(tree_kary(p, 2, root), root)
        assert spans(tree_chain(p, 4, root), root)
        assert spans(tree_knomial(p, root, 4), root)
    assert spans(tree_in_order_binary(p), p - 1)


def test_open_mpi_tree_shapes() -> None:
    assert tree_binomial(8, 0)[0] == [1, 2, 4]
    assert tree_binomial(8, 0)[1] == [3, 5]
    assert tree_kary(7, 2, 0)[1] == [3, 5]  # level-1 node: children s + 2·(i+1)
    assert tree_chain(9, 4, 0)[0] == [1, 3, 5, 7]
    assert tree_knomial(16, 0, 4)[0] == [4, 8, 12, 1, 2, 3]
    assert tree_in_order_binary(7)[6] == [5, 2]


def test_fallbacks_and_errors() -> None:
    # scatter_allgather with fewer elements than ranks is basic_linear
    assert predict(M, one_socket(8), "bcast", "scatter_allgather", 4) == \
        predict(M, one_socket(8), "bcast", "basic_linear", 4)
    with pytest.raises(UserError, match="nprocs 3"):
        predict(M, one_socket(3), "allgather", "two_proc", 10)
    with pytest.raises(UserError, match=r"algorithm 'binomail'.*did you mean binomial"):
        predict(M, one_socket(3), "bcast", "binomail", 10)
    with pytest.raises(UserError, match="collective: 'bcst'"):
        predict(M, one_socket(3), "bcst", "binomial", 10)
    with pytest.raises(UserError, match="level 'node' is missing"):
        predict(P2PModel({"core": M.levels["core"]}), Topology(4, nodes=2), "bcast",
                "binomial", 10)


def synthetic_points(coll: str, alg: str, truth: P2PModel, procs: list[int],
                     sizes: list[int], noise: float, seed: int) -> list[CollectivePoint]:
    rng = np.random.default_rng(seed)
    return [CollectivePoint(coll, alg, one_socket(p), s,
                            predict(truth, one_socket(p), coll, alg, s)
                            * (1 + noise * rng.standard_normal()))
            for p in procs for s in sizes]


def test_fitted_mode_recovers_per_algorithm_constants() -> None:
    # The ping-pong model says α = 2 µs, β = 1 GB/s; the collective really behaves as
    # α = 5 µs, β = 0.4 GB/s. The fit keeps the binomial structure and finds the latter.
    truth = hockney(alpha=5.0, beta=0.4e9)
    pts = synthetic_points("bcast", "binomial", truth, [4, 8, 16], [64, 1024, 16384, 262144],
                           0.02, seed=0)
    fitted = fit_algorithm(pts, M, basis="pooled")
    coef = dict(zip(fitted.names, fitted.coefs, strict=True))
    ci = dict(zip(fitted.names, fitted.ci, strict=True))
    assert set(coef) == {"latency_terms", "bytes"}
    assert ci["latency_terms"][0] <= 5.0 <= ci["latency_terms"][1]
    assert ci["bytes"][0] <= 1e6 / 0.4e9 <= ci["bytes"][1]
    scaled = fit_algorithm(pts, M, basis="scaled")
    assert dict(zip(scaled.names, scaled.coefs, strict=True))["latency_us"] == \
        pytest.approx(2.5, rel=0.05)
    # cross-validation: fit on P = 4, 8; predict P = 16
    cv = cross_validate(pts, M, lambda p: p.topology.nprocs == 16)
    assert len(cv.predictions) == 4
    assert cv.median_abs_pct < 5
    loo = leave_one_out(pts, M, by="size")
    assert len(loo.predictions) == len(pts) and loo.p95_abs_pct < 10
    # the unfitted ping-pong model is far off
    assert model_errors(pts, M).median_abs_pct > 40


def test_fit_rejects_mixed_algorithms_and_too_few_points() -> None:
    pts = synthetic_points("bcast", "binomial", M, [4], [64, 1024], 0.0, 0)
    with pytest.raises(UserError, match="2 points for 2 coefficients"):
        fit_algorithm(pts, M)
    mixed = pts + synthetic_points("bcast", "pipeline", M, [4], [64], 0.0, 0)
    with pytest.raises(UserError, match="mix 2 algorithms"):
        fit_algorithm(mixed, M)
