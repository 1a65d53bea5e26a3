"""(b) Wall time of a full bcast algorithm sweep: one launch (MPI_T) vs one launch per algorithm.

Both modes measure the same points (every bcast algorithm + default, 1 B–1 MiB, 2 ranks);
they alternate ROUNDS times in one run so drift affects both alike.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from common import query, run_campaign

ROUNDS = 3
SPEC = """
[campaign]
name = "sweep-{mode}"
[measure]
collectives = ["bcast"]
algorithms = "all"
sizes = "1:1M"
nprocs = [2]
iterations = {{small = 100, large = 10}}
warmup = {{small = 10, large = 1}}
[run]
selection = "{mode}"
timeout = 600
seed = 3
"""


def main() -> str:
    walls: dict[str, list[float]] = {"mpit": [], "launch": []}
    launches: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ROUNDS):
            for mode in ("mpit", "launch") if r % 2 == 0 else ("launch", "mpit"):
                out = Path(tmp) / f"{mode}{r}"
                walls[mode].append(run_campaign(SPEC.format(mode=mode), out))
                launches[mode] = query(out, "SELECT count(DISTINCT launch_id) FROM "
                                            "measurements")[0][0]
                ok = query(out, "SELECT count(*) FROM measurements WHERE status = 'ok'")[0][0]
                assert ok > 0, f"{mode}: no point measured"
    mpit, per = statistics.median(walls["mpit"]), statistics.median(walls["launch"])
    return "\n".join([
        "## Bcast algorithm sweep: one launch vs one launch per algorithm",
        "",
        f"Command: `python benchmarks/bench_sweep_modes.py` (every bcast algorithm + default, "
        f"1 B–1 MiB, 2 ranks, 100/10 iterations; modes alternated, {ROUNDS} rounds; wall time "
        "of `collbench run` including its start-up).",
        "",
        "| mode | launches | wall time median (s) | all rounds (s) |",
        "|---|---:|---:|---|",
        f"| MPI_T switching (`selection = \"mpit\"`) | {launches['mpit']} | {mpit:.1f} | "
        f"{', '.join(f'{w:.1f}' for w in walls['mpit'])} |",
        f"| one launch per algorithm (`selection = \"launch\"`) | {launches['launch']} | "
        f"{per:.1f} | {', '.join(f'{w:.1f}' for w in walls['launch'])} |",
        "",
        f"One launch is {per / mpit:.2f}× faster for this sweep.",
    ])


if __name__ == "__main__":
    print(main())
