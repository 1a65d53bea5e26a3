"""Any column as the baseline: Open MPI's shared-memory transport against TCP in one command.

A campaign sweeps `[mca.sweep] btl = ["self,sm", "self,tcp"]` (bcast, the MPI's default
algorithm, 2 ranks, 6 repetitions); `collbench compare RESULTS --baseline btl=self,sm` then
compares the two transports per size with the usual statistics, and `--summary` states the
effect per size range in hyperfine's words (docs/statistics.md).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from common import run_campaign

from collbench.analyse.compare import compare
from collbench.analyse.summary import summarise
from collbench.sizes import format_size
from collbench.store import Store

SPEC = """\
[campaign]
name = "btl-baseline"
[measure]
collectives = ["bcast"]
algorithms = ["default"]
sizes = ["1", "64", "4K", "64K", "1M"]
nprocs = [2]
iterations = 200
warmup = 20
[run]
repetitions = 6
seed = 11
[mca.sweep]
btl = ["self,sm", "self,tcp"]
"""


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "btl"
        wall = run_campaign(SPEC, out)
        c = compare(Store(out), baseline="btl=self,sm")
        summary = summarise(c)
    values = {(p.label, p.size_bytes): p.value for p in c.points}
    rows = ["| size | self,sm median_avg_us | self,tcp median_avg_us | self,tcp | significant |",
            "|---|---:|---:|---|---|"]
    from collbench.analyse.columns import effect_text

    for r in sorted(c.ratios, key=lambda r: r.point.size_bytes):
        size = r.point.size_bytes
        rows.append(f"| {format_size(size)} | {values[('self,sm', size)]:.2f} | "
                    f"{values[('self,tcp', size)]:.2f} | "
                    f"{effect_text(r.ratio, r.ci_low, r.ci_high, 'self,sm')} | "
                    f"{'yes' if r.significant else 'no'} |")
    ranges = "; ".join(f"{format_size(x.size_from)}–{format_size(x.size_to)} {x.algorithm}"
                       for b in summary.blocks for x in b.ranges)
    return (
        "## Any column as the baseline: shared memory vs TCP (`compare --baseline btl=...`)\n\n"
        "Command: `python benchmarks/run_all.py btl_baseline`: a campaign sweeping "
        "`[mca.sweep] btl = [\"self,sm\", \"self,tcp\"]` (bcast, default algorithm, 2 ranks, "
        f"6 repetitions, 200 iterations; {wall:.0f} s), then `collbench compare RESULTS "
        "--baseline btl=self,sm`. Each row is one size; the effect is self,tcp against "
        "self,sm with its 95 % interval; significant: exact Mann-Whitney, Holm per size.\n\n"
        + "\n".join(rows)
        + f"\n\n`--summary` recommends: {ranges}. TCP over loopback on this shared 2-core "
        "machine varies widely from one repetition to the next (hence the wide intervals, "
        "given by their ends), yet with 6 repetitions per transport every size is "
        "significantly slower than shared memory.\n")


if __name__ == "__main__":
    print(main())
