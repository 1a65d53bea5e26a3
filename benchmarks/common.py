"""Shared helpers for benchmarks: run collbench campaigns and query their results."""

from __future__ import annotations

import subprocess
import sys
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


def query(out: Path, sql: str, args: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = Store(out).connect()
    try:
        return con.execute(sql, args or []).fetchall()
    finally:
        con.close()
