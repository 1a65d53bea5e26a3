"""Progress with an ETA: a redrawn bar on a terminal, one plain line per launch otherwise."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, estimate_s: float, stream: TextIO | None = None) -> None:
        self.total, self.done = total, 0
        self.estimate_s = estimate_s  # planned seconds for all launches still to run
        self.estimated_done = 0.0
        self.start = time.monotonic()
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()

    def eta(self) -> float:
        elapsed = time.monotonic() - self.start
        left = self.estimate_s - self.estimated_done
        if self.estimated_done > 0:  # scale the plan's model by how fast reality is going
            return left * elapsed / self.estimated_done
        return left

    def update(self, estimated_s: float, message: str) -> None:
        self.done += 1
        self.estimated_done += estimated_s
        eta = fmt_duration(self.eta())
        if self.tty:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            bar = "#" * filled + "-" * (width - filled)
            self.stream.write(f"\r\x1b[K[{bar}] {self.done}/{self.total} ETA {eta}  {message}")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{self.done}/{self.total}] {message} (ETA {eta})\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(message + "\n")
        self.stream.flush()
