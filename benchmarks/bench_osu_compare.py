"""(a) collbench's kernel beside OSU 7.4: ping-pong latency and bcast at 2 ranks.

Same sizes (1 B–1 MiB) and OSU's default iterations; the OSU figures are the recorded
samples in ../shared/samples/osu-7.4 (same machine type, another day), so agreement within
run-to-run noise is what to look for. collbench figures: median over REPS launches run in
random order.
"""

from __future__ import annotations

import re
import statistics
import tempfile
from pathlib import Path

from common import SHARED, query, run_campaign

REPS = 5
SPEC = f"""
[campaign]
name = "osu-compare"
[measure]
collectives = ["latency", "bcast"]
algorithms = "default"
sizes = "1:1M"
nprocs = [2]
map_by = ["core"]
bind_to = "core"
[run]
repetitions = {REPS}
timeout = 600
seed = 2
"""


def osu_sample(name: str) -> dict[int, float]:
    """Size -> avg latency from an OSU text output (first numeric columns)."""
    out = {}
    for line in (SHARED / "samples" / "osu-7.4" / name).read_text().splitlines():
        m = re.match(r"^\s*(\d+)\s+([\d.]+)", line)
        if m:
            out[int(m.group(1))] = float(m.group(2))
    return out


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "osu"
        wall = run_campaign(SPEC, out)
        rows = query(out, "SELECT collective, size_bytes, list(avg_us) FROM measurements "
                          "WHERE status = 'ok' GROUP BY 1, 2 ORDER BY 1, 2")
    ours = {(c, s): (statistics.median(v), min(v), max(v)) for c, s, v in rows}
    lines = [
        "## Kernel vs OSU 7.4 at 2 ranks (µs)",
        "",
        f"Command: `python benchmarks/bench_osu_compare.py` ({REPS} repetitions as separate "
        f"launches in random order, OSU default iterations, `--map-by core --bind-to core`; "
        f"campaign wall time {wall:.0f} s). OSU: `../shared/samples/osu-7.4/osu_latency_np2.txt`"
        " and `osu_bcast_np2.txt` (one run each, same machine type). Ratio = collbench / OSU.",
        "",
        "| size | latency OSU | latency collbench median [min–max] | ratio "
        "| bcast OSU | bcast collbench median [min–max] | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    osu = {"latency": osu_sample("osu_latency_np2.txt"), "bcast": osu_sample("osu_bcast_np2.txt")}
    for size in sorted(osu["bcast"]):
        cells = [str(size)]
        for coll in ("latency", "bcast"):
            ref = osu[coll].get(size)
            got = ours.get((coll, size))
            if ref is None or got is None:
                cells += ["-", "-", "-"]
                continue
            cells += [f"{ref:.2f}", f"{got[0]:.2f} [{got[1]:.2f}–{got[2]:.2f}]",
                      f"{got[0] / ref:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
