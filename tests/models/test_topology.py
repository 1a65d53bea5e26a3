from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collbench.errors import UserError
from collbench.models.topology import Place, Topology


def test_core_mapping_fills_a_socket_then_the_next() -> None:
    t = Topology(8, nodes=2, ppn=4, sockets=2, cores=2, mapping="core")
    assert [t.place(r) for r in range(4)] == [Place(0, 0, 0), Place(0, 0, 1), Place(0, 1, 0),
                                              Place(0, 1, 1)]
    assert t.place(4) == Place(1, 0, 0)
    assert t.level(0, 1) == "core"
    assert t.level(0, 2) == "socket"
    assert t.level(0, 4) == "node"


def test_socket_mapping_round_robins_over_sockets() -> None:
    t = Topology(4, nodes=1, sockets=2, cores=2, mapping="socket")
    assert [t.place(r).socket for r in range(4)] == [0, 1, 0, 1]
    assert t.level(0, 1) == "socket"
    assert t.level(0, 2) == "core"


def test_node_mapping_round_robins_over_nodes() -> None:
    t = Topology(6, nodes=3, ppn=2, mapping="node")
    assert [t.place(r).node for r in range(6)] == [0, 1, 2, 0, 1, 2]
    assert t.level(0, 3) == "core"
    assert t.level(0, 1) == "node"
    assert t.levels_used() == {"core", "node"}


def test_invalid_inputs_are_one_line_errors() -> None:
    with pytest.raises(UserError, match="mapping: 'slot'"):
        Topology(4, mapping="slot")
    with pytest.raises(UserError, match="nprocs: 9 exceeds"):
        Topology(9, nodes=2, ppn=4)
    with pytest.raises(UserError, match="ppn: 5 exceeds"):
        Topology(4, ppn=5, sockets=2, cores=2)


@settings(max_examples=150, deadline=None)
@given(nodes=st.integers(1, 5), sockets=st.integers(1, 3), cores=st.integers(1, 5),
       mapping=st.sampled_from(["core", "socket", "node"]), data=st.data())
def test_every_rank_placed_once_within_ppn(nodes: int, sockets: int, cores: int,
                                           mapping: str, data: st.DataObject) -> None:
    ppn = data.draw(st.integers(1, sockets * cores))
    nprocs = data.draw(st.integers(1, nodes * ppn))
    t = Topology(nprocs, nodes=nodes, ppn=ppn, sockets=sockets, cores=cores, mapping=mapping)
    assert len(t.places) == nprocs
    assert len(set(t.places)) == nprocs  # no seat used twice
    per_node = Counter(p.node for p in t.places)
    assert all(n <= ppn for n in per_node.values())
    assert all(0 <= p.socket < sockets and 0 <= p.core < cores for p in t.places)
    for a in range(min(nprocs, 6)):
        for b in range(nprocs):
            assert t.level(a, b) == t.level(b, a)
