"""How many switches tune's smoothing removes, and what it costs, on the quickstart campaign.

The quickstart (examples/quickstart.toml, 6 repetitions, np 2 and 4 on 2 cores: np 4 is
oversubscribed) is measured once into a scratch folder; `collbench tune` then runs on it
with `--max-regret 0` (no smoothing) and with the default (0.05), and the switches between
neighbouring sizes per table are counted from each rules selection.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from common import ROOT, run_campaign

from collbench.store import Store
from collbench.tune.select import Options, select


def _switches(selection_tables: dict[tuple[str, int], tuple[object, ...]]) -> dict[str, int]:
    return {f"{c} np={n}": len(cs) - 1 for (c, n), cs in sorted(selection_tables.items())}


def main() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "quick"
        wall = run_campaign((ROOT / "examples" / "quickstart.toml").read_text(), out)
        raw = select(Store(out), Options(max_regret=0.0))
        smooth = select(Store(out), Options())
    before, after = _switches(dict(raw.tables)), _switches(dict(smooth.tables))
    rows = ["| table | rule changes, no smoothing | with smoothing (5 %) | worst regret |",
            "|---|---:|---:|---:|"]
    for key in before:
        coll, _, n = key.partition(" np=")
        sm = smooth.smoothing.get((coll, int(n)))
        worst = f"{sm.max_regret:.1%}" if sm and sm.regret else "-"
        rows.append(f"| {key} | {before[key]} | {after[key]} | {worst} |")
    total_b, total_a = sum(before.values()), sum(after.values())
    return (
        "## Decisions that do not chase noise (`tune --max-regret`)\n\n"
        "Command: `python benchmarks/run_all.py smoothing`. The quickstart campaign measured "
        f"once ({wall:.0f} s; np 4 is oversubscribed on 2 cores), then `collbench tune` "
        "with `--max-regret 0` and with the default 0.05. A rule change is a threshold "
        "where the chosen algorithm changes; regret is the chosen algorithm's time over the "
        "choice made without smoothing, at the worst size.\n\n"
        + "\n".join(rows)
        + f"\n\nIn all: {total_b} rule changes without smoothing, {total_a} with it.\n")


if __name__ == "__main__":
    print(main())
