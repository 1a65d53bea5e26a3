"""Progress of a run: a live display on a terminal, plain lines otherwise.

On a terminal, rich redraws a few lines four times a second, so the elapsed time and the
ETA move *during* a launch, not only between launches. Every line is cut to the
terminal's width (never wrapped: a wrapped line breaks the redraw). Multi-round commands
(`tune --adaptive`, `study`) open an `overall` bar around their rounds; each round's
`Progress` shows under it. Elsewhere (a pipe, a log file) one plain line per launch.

Verbosity is process-wide, set once by the command line (`-q`, `-v`): -1 quiet (errors
and the final line only), 0 normal (failures as lines above the display), 1 verbose
(every launch as a line).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.text import Text

REFRESH_PER_S: Final = 4
BAR_WIDTH: Final = 24
QUIET, NORMAL, VERBOSE = -1, 0, 1
_verbosity = NORMAL


def set_verbosity(level: int) -> None:
    """-1 quiet, 0 normal, 1 verbose (the command line's -q / -v)."""
    global _verbosity
    _verbosity = max(QUIET, min(VERBOSE, level))


def verbosity() -> int:
    return _verbosity


def fmt_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def bar(done: int, total: int, width: int = BAR_WIDTH) -> str:
    filled = min(width, int(width * done / total)) if total > 0 else 0
    return "━" * filled + "╺" + "─" * (width - filled - 1) if filled < width else "━" * width


@dataclass
class _Overall:
    """A multi-round command's bar: rounds finished of `total` (None: not known ahead)."""

    label: str
    total: int | None
    done: int = 0
    start: float = 0.0

    def line(self) -> str:
        elapsed = fmt_duration(time.monotonic() - self.start)
        if self.total:
            return (f"{self.label} {bar(self.done, self.total)} {self.done}/{self.total}  "
                    f"elapsed {elapsed}")
        return f"{self.label}: {self.done} done, round {self.done + 1} running  elapsed {elapsed}"


_overall: _Overall | None = None
_lock = threading.Lock()  # rich's refresh thread reads what the runner writes


@contextmanager
def overall(label: str, total: int | None) -> Iterator[_Overall]:
    """Around a multi-round command: every Progress opened inside adds one round on close."""
    global _overall
    _overall = _Overall(label, total, start=time.monotonic())
    try:
        yield _overall
    finally:
        _overall = None


class _PointsDone:
    """The points a running launch has written to its output file (one line each), read
    as the file grows (never from the start again: a file with samples may be large)."""

    def __init__(self, outfile: Path | None, point_s: tuple[float, ...]) -> None:
        self.outfile, self.point_s = outfile, point_s
        self.offset = self.lines = 0

    def count(self) -> int:
        if self.outfile is None or not self.point_s:
            return 0
        try:
            with self.outfile.open("rb") as f:
                f.seek(self.offset)
                data = f.read(1 << 20)
        except OSError:
            return self.lines
        self.offset += len(data)
        self.lines = min(len(self.point_s), self.lines + data.count(b"\n"))
        return self.lines

    def estimated_done(self, launch_s: float) -> float:
        """Estimated seconds of the launch already done: its start-up (the launch less its
        points) and its finished points; 0 before the first point."""
        n = self.count()
        if n == 0:
            return 0.0
        return max(0.0, launch_s - sum(self.point_s)) + sum(self.point_s[:n])


class Progress:
    """One runner pass: `total` launches whose planned durations sum to `estimate_s`."""

    def __init__(self, total: int, estimate_s: float, stream: TextIO | None = None) -> None:
        self.total, self.done = total, 0
        self.estimate_s = estimate_s  # planned seconds for all launches still to run
        self.estimated_done = 0.0
        self.start = time.monotonic()
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.running = ""  # the launch under way
        self.running_estimate = 0.0
        self._points = _PointsDone(None, ())  # the running launch's points, as they finish
        self.running_since = self.start
        self.last = ""  # the last launch finished
        self.failed = 0
        self._eta_at_begin = 0.0
        self.live: Live | None = None
        if self.tty and total > 0:
            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self.live = Live(get_renderable=self._render, console=console,
                             refresh_per_second=REFRESH_PER_S, transient=True,
                             redirect_stdout=False, redirect_stderr=False)
            self.live.start()

    def eta(self) -> float:
        """Seconds left: the plan's estimate, scaled by how fast reality has gone so far."""
        elapsed = time.monotonic() - self.start
        left = self.estimate_s - self.estimated_done
        if self.estimated_done > 0:
            return left * elapsed / self.estimated_done
        return left

    def _eta_now(self) -> float:
        """The ETA during a launch. Once its first point is written, by points: the plan's
        estimate of what is left, scaled by how fast the estimated work done so far (the
        launches finished and the running one's points) went. Before, counting down from
        the ETA at its start, but never below what the launches after it still need."""
        if not self.running:
            return self.eta()
        now = time.monotonic()
        inside = self._points.estimated_done(self.running_estimate)
        if inside > 0:
            done = self.estimated_done + inside
            return (self.estimate_s - done) * (now - self.start) / done
        scale = ((self.running_since - self.start) / self.estimated_done
                 if self.estimated_done > 0 else 1.0)
        after = (self.estimate_s - self.estimated_done - self.running_estimate) * scale
        return max(after, self._eta_at_begin - (now - self.running_since))

    def begin(self, message: str, estimated_s: float, outfile: Path | None = None,
              point_s: Sequence[float] = ()) -> None:
        """A launch starts (the live display names it and counts its time down). `outfile`:
        where it writes a line per point, `point_s` the estimated seconds of each point:
        the ETA then moves as points finish, not only launches."""
        with _lock:
            self.running, self.running_estimate = message, estimated_s
            self.running_since = time.monotonic()
            self._eta_at_begin = self.eta()
            self._points = _PointsDone(outfile, tuple(point_s))
        if not self.tty and _verbosity >= VERBOSE:
            self._line(f"[{self.done + 1}/{self.total}] started {message}")

    def update(self, estimated_s: float, message: str, ok: bool = True) -> None:
        """A launch finished: `message` says how it went."""
        with _lock:
            self.done += 1
            self.estimated_done += estimated_s
            self.running, self.last = "", message
            self._points = _PointsDone(None, ())
            self.failed += 0 if ok else 1
        eta = fmt_duration(self.eta())
        line = f"[{self.done}/{self.total}] {message}"
        if self.live is not None:
            # A failure keeps its whole message (rich folds it); others are cut to a line.
            if not ok:
                self.live.console.print(Text(line), overflow="fold")
            elif _verbosity >= VERBOSE:
                self.live.console.print(Text(line), no_wrap=True, overflow="ellipsis")
        elif _verbosity >= NORMAL or not ok:
            self._line(f"{line} (ETA {eta})")

    def note(self, message: str) -> None:
        """A line that must be read (damaged rows, an interruption): shown at any verbosity."""
        if self.live is not None:
            self.live.console.print(Text(message), overflow="fold")
        else:
            self._line(message)

    def close(self, summary: str = "") -> None:
        """Stop the display; print `summary` (in words) as the last line."""
        if self.live is not None:
            self.live.stop()
            self.live = None
        if _overall is not None:
            _overall.done += 1
        # Inside a multi-round command the rounds' lines would pile up: verbose only.
        if summary and (_overall is None or _verbosity >= VERBOSE):
            took = fmt_duration(time.monotonic() - self.start)
            self._line(f"{summary} in {took}")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:  # an exception: stop drawing, say nothing more
            self.live.stop()
            self.live = None

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def _render(self) -> Group:
        with _lock:
            elapsed = fmt_duration(time.monotonic() - self.start)
            lines = [_overall.line()] if _overall is not None else []
            failed = f", {self.failed} failed" if self.failed else ""
            lines.append(f"launches {bar(self.done, self.total)} {self.done}/{self.total}"
                         f"{failed}  elapsed {elapsed}  ETA {fmt_duration(self._eta_now())}")
            if self.running:
                took = fmt_duration(time.monotonic() - self.running_since)
                lines.append(f"running {self.running} ({took})")
            elif self.last:
                lines.append(f"last: {self.last}")
        # Cut to the width: a line that wraps would leave its tail behind on redraw.
        return Group(*(Text(s, no_wrap=True, overflow="ellipsis") for s in lines))
