"""Shared helpers for benchmarks: run collbench campaigns and query their results."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from collbench.store import Store

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"


def run_campaign(spec_text: str, out: Path, *extra: str) -> float:
    """Run `collbench run` on a spec; return its wall time in seconds."""
    spec = out.with_suffix(".toml")
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text(spec_text)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "collbench.cli", "run", str(spec), "-o", str(out),
                    *extra], check=True)
    return time.monotonic() - start


def sim_pingpong_spec(name: str, platform: str) -> str:
    """A simulated ping-pong at 2 ranks on every placement level, 0 B-4 MiB: what a p2p
    model of a simulated platform is fitted to."""
    return f"""
[campaign]
name = "{name}"
[measure]
collectives = ["latency"]
sizes = "0:4M"
nprocs = [2]
map_by = ["core", "socket", "node"]
iterations = 5
warmup = 1
[run]
backend = "simgrid"
seed = 1
[run.simgrid]
platform = "{platform}"
"""


def cli(*args: str | Path) -> str:
    """stdout of one `collbench` command; its stderr tail in the error when it fails."""
    done = subprocess.run([sys.executable, "-m", "collbench.cli", *map(str, args)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"collbench {' '.join(map(str, args))}: {done.stderr[-2000:]}")
    return done.stdout


def query(out: Path, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = Store(out).connect()
    try:
        return con.execute(sql, args or []).fetchall()
    finally:
        con.close()


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return out
    for child in children:
        out += _tree(int(child))
    return out


def _memory_mb(root: int) -> tuple[float, float]:
    """(RSS, PSS) of the process tree in MB."""
    rss = pss = 0
    for pid in _tree(root):
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        for key, acc in (("Rss", "rss"), ("Pss", "pss")):
            m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
            if m and acc == "rss":
                rss += int(m.group(1))
            elif m:
                pss += int(m.group(1))
    return rss / 1024, pss / 1024


def run_measured(spec_text: str, out: Path) -> tuple[float, float, float]:
    """(wall s, peak RSS MB, peak PSS MB of its process tree) of one `collbench run`."""
    spec = out.with_suffix(".toml")
    spec.write_text(spec_text)
    peak = [0.0, 0.0]
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "collbench.cli", "run", str(spec), "-o",
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def watch() -> None:
        while proc.poll() is None:
            rss, pss = _memory_mb(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch)
    watcher.start()
    _, err = proc.communicate()
    watcher.join()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{spec}: exit {proc.returncode}: {err[-800:]!r}")
    return wall, peak[0], peak[1]
