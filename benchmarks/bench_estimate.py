"""Honest time: `collbench plan`'s estimate against the wall time of `collbench run`.

For each example spec (local and SimGrid) and the README's one-liner, the estimate `plan`
prints is read, the campaign is run, and ratio = actual wall time / estimate is printed
(1 = exact; the target is 0.5-2). Usage: `python benchmarks/bench_estimate.py [--busy N]
[NAME ...]` (names: the examples' file stems, `oneliner`); `--busy N` runs them beside N
busy loops, started a minute before the first case so that the load average `plan` reads
has seen them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from common import ROOT

CASES: dict[str, list[str]] = {
    "quickstart": ["examples/quickstart.toml"],
    "local": ["examples/local.toml"],
    "nonblocking": ["examples/nonblocking.toml"],
    "oneliner": ["-c", "bcast", "--algorithms", "all", "-m", "1:1M", "-n", "2,4"],
    "simgrid": ["examples/simgrid.toml"],
    "simgrid-bcast-gather-orfeo": ["examples/simgrid-bcast-gather-orfeo.toml"],
    "simgrid-placement-bcast-scatter": ["examples/simgrid-placement-bcast-scatter.toml"],
    "simgrid-reduce-jupiter": ["examples/simgrid-reduce-jupiter.toml"],
}


def estimate(args: list[str]) -> float:
    """Seconds from `collbench plan`'s `estimated time: H:MM:SS` line."""
    out = subprocess.run([sys.executable, "-m", "collbench.cli", "plan", *args], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"^estimated time: ([0-9:]+)", out, re.M)
    if m is None:
        raise RuntimeError(f"no estimate in: {out[-500:]}")
    secs = 0
    for part in m.group(1).split(":"):
        secs = secs * 60 + int(part)
    return float(secs)


def actual(args: list[str], out: Path) -> float:
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "collbench.cli", "run", *args, "-o", str(out), "-q"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


BUSY_WARMUP_S = 75.0  # the 1-minute load average reaches ~70 % of a new load in 75 s


@contextlib.contextmanager
def busy(loops: int) -> Iterator[None]:
    """`loops` processes spinning on a core each, the cases run beside them."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(loops)]
    try:
        if procs:
            time.sleep(BUSY_WARMUP_S)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main(names: Sequence[str] = (), loops: int = 0) -> str:
    lines = ["| case | busy loops | estimate (s) | actual (s) | actual / estimate | "
             "load (1 min) |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp, busy(loops):
        for name in names or list(CASES):
            est = estimate(CASES[name])
            wall = actual(CASES[name], Path(tmp) / name)
            ratio = wall / est if est > 0 else float("inf")
            # The load the run met: on a shared machine it, not the model, may decide.
            load = os.getloadavg()[0]
            lines.append(f"| {name} | {loops} | {est:.0f} | {wall:.1f} | {ratio:.2f} | "
                         f"{load:.1f} |")
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join([
        "## Honest time: `plan`'s estimate against the wall time",
        "",
        "Command: `python benchmarks/bench_estimate.py` (each example spec and the README's "
        "one-liner: the estimate `collbench plan` prints, then the wall time of `collbench "
        "run` on it, including collbench's own start; the target is a ratio within 0.5-2).",
        "",
        *lines])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", choices=[*CASES, []], metavar="NAME",
                        help=f"cases to run (default: all): {', '.join(CASES)}")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="run beside N busy loops (default 0: as the machine is)")
    args = parser.parse_args()
    print(main(args.names, args.busy))
