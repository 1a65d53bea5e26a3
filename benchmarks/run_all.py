"""Run benchmarks and write their sections of docs/performance.md (`make bench`).

`python benchmarks/run_all.py` runs every benchmarks/bench_*.py; `... run_all.py NAME ...`
runs only those (e.g. `osu_compare`). Each module's main() returns a Markdown section that
replaces only its own marked part of the document, so one benchmark can be rerun alone.
"""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
DOC = HERE.parent / "docs" / "performance.md"
HEADER = """# Performance figures

Every figure below comes from a script in `benchmarks/`; the command that produced it is
given with it. Rerun them all with `make bench`, or one with
`python benchmarks/run_all.py NAME` (e.g. `osu_compare`). The machine: 2 cores, so figures
at more ranks than cores are oversubscribed and say so.
"""


def _section(name: str, body: str) -> str:
    from collbench.catalog.mpi import find_mpi

    mpi = find_mpi()
    stamp = (f"_Measured {datetime.date.today()} on {platform.node()} ({os.cpu_count()} cores, "
             f"{mpi.implementation} {mpi.version}, Python {platform.python_version()})._")
    return f"<!-- bench:{name} -->\n{body.rstrip()}\n\n{stamp}\n<!-- /bench:{name} -->"


def main(argv: list[str]) -> None:
    names = argv or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    for name in names:
        module = importlib.import_module(f"bench_{name}")
        print(f"== {name}", flush=True)
        section = _section(name, module.main())
        print(section, flush=True)
        # Read the document only now: a benchmark runs for minutes, and the other sections
        # may have been rewritten meanwhile (another benchmark, an edit by hand).
        doc = DOC.read_text() if DOC.exists() else HEADER
        pattern = re.compile(rf"<!-- bench:{name} -->.*?<!-- /bench:{name} -->", re.S)
        found = pattern.search(doc)
        if found:
            doc = doc[:found.start()] + section + doc[found.end():]
        else:
            doc = doc.rstrip() + "\n\n" + section + "\n"
        DOC.write_text(doc)  # after each benchmark: a later failure keeps what finished


if __name__ == "__main__":
    main(sys.argv[1:])
