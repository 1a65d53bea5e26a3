"""Run every benchmark and write docs/performance.md (`make bench`)."""

from __future__ import annotations

import datetime
import os
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import bench_osu_compare  # noqa: E402
import bench_sweep_modes  # noqa: E402

from collbench.catalog.mpi import find_mpi  # noqa: E402

DOC = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


def main() -> None:
    mpi = find_mpi()
    head = [
        "# Performance figures",
        "",
        f"Written by `make bench` (`python benchmarks/run_all.py`) on "
        f"{datetime.date.today()}: {platform.node()}, {os.cpu_count()} cores, "
        f"{mpi.implementation} {mpi.version}, Python {platform.python_version()}.",
        "Timings at 2 ranks on a 2-core machine; no oversubscription in these figures.",
        "",
    ]
    sections = [bench_osu_compare.main(), bench_sweep_modes.main()]
    DOC.write_text("\n".join(head) + "\n\n".join(sections) + "\n")
    print(DOC.read_text())


if __name__ == "__main__":
    main()
