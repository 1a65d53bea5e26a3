"""Reading what an SMPI launch wrote: the kernel's output lines (bounding simulated times)
and SMPI's stderr (the lines worth reporting). Split from launch.simgrid."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Final

from collbench.models.predict import MAX_US


def nonblank_lines(path: Path) -> int:
    """How many non-blank lines the file has (0 if it cannot be read)."""
    try:
        return sum(1 for line in path.read_text(errors="replace").splitlines() if line.strip())
    except OSError:
        return 0


_ROW_TIMES: Final = ("avg_us", "min_us", "max_us", "median_us")


def bound_times(outfile: Path, limit: float = MAX_US) -> int:
    """Mark failed, in the kernel's output, each ok point whose simulated time is not one a
    run takes (negative, not finite, beyond `limit`), with the reason and without its
    times; how many. A description's numbers are bounded, but 1 GiB over its slowest link
    still takes 12 days: the point is failed (its launch's other points stand), as a
    measurement that went wrong is."""
    try:
        lines = outfile.read_text(errors="replace").splitlines()
    except OSError:
        return 0
    changed = 0
    for i, line in enumerate(lines):
        try:
            got = json.loads(line)
        except ValueError:
            continue  # a cut line: the runner drops it
        if not isinstance(got, dict) or got.get("status") != "ok":
            continue
        times = {k: v for k, v in got.items() if k.endswith("_us") and isinstance(v, int | float)
                 and not isinstance(v, bool)}
        # the row's times are >= 0; other figures (a non-blocking slowdown) may be < 0
        bad = next((v for k, v in times.items() if not (math.isfinite(v) and abs(v) <= limit)
                    or (k in _ROW_TIMES and v < 0)), None)
        if bad is None:
            continue
        got.update(dict.fromkeys([*times, "samples_us"]), status="failed",
                   error=f"simulated {bad:.6g} us is beyond the bound of 0 to {limit:g} us "
                         "(no run takes that long: the platform's links are too slow for "
                         "this size)")
        lines[i] = json.dumps(got)
        changed += 1
    if changed:
        outfile.write_text("\n".join(lines) + "\n")
    return changed


# What matters in SMPI's stderr: errors, deadlocks, algorithm fallbacks, the kernel's own
# messages. A deadlock also lists every blocked rank, which would bury the cause.
_WORTH_KEEPING: Final = re.compile(r"CRITICAL|ERROR|Deadlock|xception|smpi_colls|"
                                   r"collbench_kernel|Invalid|invalid|abort|Abort")


def smpi_messages(stderr: Path, limit: int = 1500) -> str:
    """The informative lines of a launch's stderr (deduplicated, at most `limit` chars)."""
    try:
        lines = stderr.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    kept = list(dict.fromkeys(re.sub(r"^\[[^\]]*\]\s*", "", line) for line in lines
                              if _WORTH_KEEPING.search(line)))
    return "\n".join(kept)[-limit:]
