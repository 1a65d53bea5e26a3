"""The Jacobi model P(L,N) against measurement, simulated and on this machine; the ring's
socket jump under SimGrid.

(a) SimGrid on the built-in `orfeo-thin` (2 nodes × 2 sockets × 12 cores): the jacobi
    mini-app at N = 1, 2, 4, 8, 12, 24, 48 (--map-by core, a 3-D grid per N), L = 32 and 64,
    its CPU bursts simulated (workload.simulate_compute = true); the p2p model is the
    platform's own per-level latency and bandwidth. The ring (communication only,
    deterministic) at P = 2..48 under --map-by core and socket.
(b) This machine (local backend, Open MPI): jacobi at N = 1, 2, 4 (4 ranks on 2 cores is
    oversubscribed and says so), L = 32 and 64; the p2p model is fitted by `collbench model
    p2p` to a ping-pong measured here.

Every figure comes from `collbench model jacobi --format json` and the stored rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import query, run_campaign

SIM_JACOBI = """
zip = [["nprocs", "dims"]]
[campaign]
name = "apps-sim-jacobi"
[measure]
nprocs = [1, 2, 4, 8, 12, 24, 48]
[workload]
app = "jacobi"
[workload.params]
L = [32, 64]
dims = [[1,1,1],[2,1,1],[2,2,1],[2,2,2],[3,2,2],[4,3,2],[4,4,3]]
iterations = 20
warmup = 2
[run]
backend = "simgrid"
repetitions = 3
seed = 1
[run.simgrid]
platform = "orfeo-thin"
"""

SIM_RING = """
[campaign]
name = "apps-sim-ring"
[measure]
nprocs = [2, 4, 8, 12, 13, 16, 24, 25, 36, 48]
map_by = ["core", "socket"]
[workload]
app = "ring"
params = { size = 8, iterations = 20, warmup = 2 }
simulate_compute = false
[run]
backend = "simgrid"
seed = 2
[run.simgrid]
platform = "orfeo-thin"
"""

ORFEO_P2P = """format = "collbench-p2p"
version = 1
[source]
origin = "hand"
description = "orfeo-thin platform file: per-level latency and bandwidth"
[levels.core]
latency = "0.22 us"
bandwidth = "6450 MB/s"
[levels.socket]
latency = "0.54 us"
bandwidth = "5680 MB/s"
[levels.node]
latency = "1.07 us"
bandwidth = "12176 MB/s"
"""

LOCAL_JACOBI = """
zip = [["nprocs", "dims"]]
[campaign]
name = "apps-local-jacobi"
[measure]
nprocs = [1, 2, 4]
[workload]
app = "jacobi"
params = { L = [32, 64], dims = [[1,1,1],[2,1,1],[2,2,1]], iterations = 50, warmup = 5 }
[run]
repetitions = 3
seed = 3
"""

LOCAL_PP = """
[campaign]
name = "apps-local-pp"
[measure]
collectives = ["latency"]
sizes = "0:1M"
nprocs = [2]
iterations = 200
warmup = 20
[run]
repetitions = 3
seed = 4
"""


def model(out: Path, p2p: Path) -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-m", "collbench.cli", "model", "jacobi", str(out),
                          "--p2p", str(p2p), "--format", "json"], check=True,
                         capture_output=True, text=True)
    return dict(json.loads(res.stdout))


def table(result: dict[str, Any], title: str) -> None:
    print(f"\n### {title}\n")
    print("| placement | level | N | L | grid | measured MLUP/s | predicted | error % | "
          "T_s µs | T_c meas. µs | T_c model µs |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for p in result["points"]:
        tcm = "-" if p["tc_measured_us"] is None else f"{p['tc_measured_us']:.1f}"
        print(f"| {p['placement']} | {p['level']} | {p['nprocs']} | {p['L']} | {p['dims']} | "
              f"{p['measured_mlups']:.0f} | {p['predicted_mlups']:.0f} | "
              f"{p['error_pct']:+.1f} | {p['ts_us']:.1f} | {tcm} | {p['tc_model_us']:.1f} |")
    e = result["error"]
    print(f"\n|error| over {int(e['points'])} runs with N > 1: median "
          f"{e['median_abs_pct']:.1f} %, largest {e['max_abs_pct']:.1f} %")


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-apps-"))
    p2p = root / "orfeo.p2p.toml"
    p2p.write_text(ORFEO_P2P)
    t = run_campaign(SIM_RING, root / "sim-ring")
    print(f"## Ring under SimGrid (orfeo-thin), {t:.1f} s\n")
    print("| P | step µs, map-by core | step µs, map-by socket |")
    print("|---:|---:|---:|")
    steps = {(m, n): a / n for m, n, a in query(root / "sim-ring", "SELECT mapping, nprocs, "
                                                "avg_us FROM measurements WHERE status='ok'")}
    for n in sorted({n for _, n in steps}):
        print(f"| {n} | {steps[('core', n)]:.3f} | {steps[('socket', n)]:.3f} |")
    t = run_campaign(SIM_JACOBI, root / "sim-jacobi")
    table(model(root / "sim-jacobi", p2p), f"Jacobi under SimGrid (orfeo-thin), {t:.0f} s")
    start = time.monotonic()
    run_campaign(LOCAL_PP, root / "local-pp")
    local_p2p = root / "local.p2p.toml"
    subprocess.run([sys.executable, "-m", "collbench.cli", "model", "p2p",
                    str(root / "local-pp"), "-o", str(local_p2p)], check=True,
                   capture_output=True)
    run_campaign(LOCAL_JACOBI, root / "local-jacobi")
    table(model(root / "local-jacobi", local_p2p),
          f"Jacobi on this machine (Open MPI, p2p fitted here), "
          f"{time.monotonic() - start:.0f} s")
    print(f"\nfolders: {root}")


if __name__ == "__main__":
    main()
