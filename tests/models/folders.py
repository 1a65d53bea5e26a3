"""Small results folders for the model commands' tests: ping-pongs from known Hockney
parameters, collectives from a known model (with a little deterministic noise)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from collbench.campaign import create_folder
from collbench.records import make_row
from collbench.store import Store

# One-way latency (µs) and bandwidth (B/s) per --map-by of a 2-rank ping-pong.
LEVELS = {"core": (0.3, 8e9), "socket": (0.6, 6e9), "node": (1.5, 10e9)}
P2P_TEXT = """format = "collbench-p2p"
version = 1
[levels.core]
latency = "0.3 us"
bandwidth = "8 GB/s"
[levels.socket]
latency = "0.6 us"
bandwidth = "6 GB/s"
[levels.node]
latency = "1.5 us"
bandwidth = "10 GB/s"
"""


def _folder(root: Path, name: str, launches: dict[str, list[dict[str, Any]]],
            provenance: dict[str, Any] | None = None) -> Path:
    store = Store(root)
    create_folder(store, {"name": name, "seed": 0, "backend": "ingest", "kind": "ingest"},
                  "# test\n", {"launches": []}, dict(provenance or {"sockets": 2,
                                                                    "cores": 24}))
    for lid, rows in launches.items():
        store.write_launch(lid, rows, {"status": "ok"})
    return root


def row(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(campaign="t", launch_id="l0", repetition=0, backend="ingest",
                                source="osu", mpi="openmpi", mpi_version="5.0.7",
                                algorithm="default", algorithm_id=0, segsize=0, fanout=0,
                                selection="none", params=json.dumps({"mca": {}}), nprocs=2,
                                nodes=1, ppn=2, mapping="core", binding="core",
                                iterations=100, status="ok")
    base.update(kw)
    return make_row(**base)


PP_SIZES = (0, *(1 << k for k in range(0, 23, 2)))


def pingpong_folder(root: Path, *, transports: tuple[str, ...] = ("",), noise: float = 0.01,
                    sizes: tuple[int, ...] = PP_SIZES,
                    bw_rows: bool = False) -> Path:
    """osu_latency rows at core/socket/node placement, one set per transport setting."""
    rnd = random.Random(1)
    launches: dict[str, list[dict[str, Any]]] = {}
    for t, transport in enumerate(transports):
        params = json.dumps({"mca": {"btl": transport}} if transport else {"mca": {}})
        for mapping, (alpha, beta) in LEVELS.items():
            nodes, ppn = (2, 1) if mapping == "node" else (1, 2)
            lid = f"pp-{t}-{mapping}"
            rows = []
            for size in sizes:
                slow = 1.0 + 0.5 * t
                lat = (alpha + size * 1e6 / beta) * slow * (1 + rnd.uniform(-noise, noise))
                rows.append(row(launch_id=lid, collective="latency", size_bytes=size,
                                avg_us=lat, params=params, nodes=nodes, ppn=ppn,
                                mapping=mapping))
                if bw_rows and size:
                    rows.append(row(launch_id=lid, collective="bw", size_bytes=size,
                                    avg_us=None, bandwidth_mbs=beta / 1e6 * 0.9,
                                    params=params, nodes=nodes, ppn=ppn, mapping=mapping))
            launches[lid] = rows
    return _folder(root, root.name, launches)


def collective_folder(root: Path, model: Any, *, collectives: dict[str, tuple[str, ...]],
                      nprocs: tuple[int, ...] = (2, 4, 8), mappings: tuple[str, ...] = ("core",),
                      sizes: tuple[int, ...] = (1, 64, 1024, 16384, 262144),
                      noise: float = 0.02, scale: float = 1.0) -> Path:
    """Collective rows 'measured' as a model predicts them, times `scale`, with noise."""
    from collbench.models.predict import Shape, predict_point, topology

    rnd = random.Random(2)
    launches: dict[str, list[dict[str, Any]]] = {}
    for coll, algs in collectives.items():
        for n in nprocs:
            for mapping in mappings:
                topo = topology(n, 1, n, mapping, Shape(2, 12))
                lid = f"{coll}-{n}-{mapping}"
                rows = []
                for alg in algs:
                    for size in sizes:
                        avg, _, _ = predict_point(model, topo, coll, alg, size)
                        v = avg * scale * (1 + rnd.uniform(-noise, noise))
                        rows.append(row(launch_id=lid, collective=coll, algorithm=alg,
                                        nprocs=n, nodes=1, ppn=n, mapping=mapping,
                                        size_bytes=size, avg_us=v, min_us=v, max_us=v,
                                        source="kernel", backend="local"))
                launches[lid] = rows
    return _folder(root, root.name, launches)
