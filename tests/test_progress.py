"""Progress: plain lines off a terminal, a live display on one (tested in a real tmux)."""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from collbench import progress
from collbench.progress import Progress, bar, fmt_duration
from collbench.runner import Summary


@pytest.fixture(autouse=True)
def normal_verbosity() -> Iterator[None]:
    yield
    progress.set_verbosity(progress.NORMAL)


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    p = Progress(2, estimate_s=10.0, stream=out)
    p.update(5.0, "launch a ok")
    p.update(5.0, "launch b ok")
    p.close("2 launches ok, 0 failed")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[1/2] launch a ok (ETA ")
    assert lines[1] == "[2/2] launch b ok (ETA 0:00)"
    assert lines[2] == "2 launches ok, 0 failed in 0:00"
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_quiet_keeps_failures_and_the_summary_verbose_adds_starts() -> None:
    progress.set_verbosity(progress.QUIET)
    out = io.StringIO()
    p = Progress(2, estimate_s=10.0, stream=out)
    p.begin("a", 5.0)
    p.update(5.0, "a ok")
    p.update(5.0, "b failed", ok=False)
    p.close("1 launch ok, 1 failed")
    assert [ln.split(" (ETA")[0] for ln in out.getvalue().splitlines()] == [
        "[2/2] b failed", "1 launch ok, 1 failed in 0:00"]
    progress.set_verbosity(progress.VERBOSE)
    out = io.StringIO()
    p = Progress(1, estimate_s=1.0, stream=out)
    p.begin("a np=2 core", 1.0)
    assert out.getvalue() == "[1/1] started a np=2 core\n"


def test_eta_scales_the_model_by_observed_speed() -> None:
    p = Progress(3, estimate_s=30.0, stream=io.StringIO())
    p.start -= 20.0  # 20 s spent on what the model said takes 10 s: twice as slow
    p.update(10.0, "x")
    assert abs(p.eta() - 40.0) < 1.0


def test_eta_counts_down_during_a_launch_but_not_below_what_follows() -> None:
    p = Progress(3, estimate_s=30.0, stream=io.StringIO())
    p.begin("first", 10.0)
    p.running_since -= 4.0  # 4 s into a launch planned for 10 s
    assert abs(p._eta_now() - 26.0) < 0.5
    p.running_since -= 100.0  # far over its plan: the two launches after it still count
    assert abs(p._eta_now() - 20.0) < 0.5


def test_eta_moves_by_points_inside_a_launch(tmp_path: Path) -> None:
    """One launch of 4 points (2 s each) after 2 s of start-up: as the kernel writes its
    lines, the ETA follows the points, scaled by how fast they went."""
    out = tmp_path / "kernel.jsonl"
    p = Progress(2, estimate_s=20.0, stream=io.StringIO())
    p.begin("only", 10.0, out, [2.0, 2.0, 2.0, 2.0])
    p.start -= 8.0
    p.running_since -= 8.0
    before = p._eta_now()  # no line yet: counting down from 20 s, 8 s in
    assert abs(before - 12.0) < 0.5
    out.write_text('{"a": 1}\n' * 3)  # start-up and 3 points: 8 estimated seconds in 8 s
    assert abs(p._eta_now() - 12.0) < 0.5
    with out.open("a") as f:
        f.write('{"a": 2}\n{"extra": 1}\n')  # the 4th point (lines past the plan: ignored)
    assert abs(p._eta_now() - 8.0) < 0.5  # 10 of 20 estimated seconds done in 8 s
    p.update(10.0, "only: ok")
    assert p._points.outfile is None  # the next launch starts from nothing


def test_an_overall_bar_counts_the_rounds_of_a_multi_round_command() -> None:
    out = io.StringIO()
    with progress.overall("study stages", 3) as stages:
        p = Progress(2, 4.0, out)
        p.begin("r0-np2 np=2 core", 2.0)
        lines = [t.plain for t in p._render().renderables]  # type: ignore[attr-defined]
        assert lines[0].startswith("study stages ") and " 0/3  elapsed 0:00" in lines[0]
        assert lines[1].startswith("launches ") and "0/2  elapsed 0:00  ETA 0:04" in lines[1]
        assert lines[2] == "running r0-np2 np=2 core (0:00)"
        p.update(2.0, "r0-np2 ok")
        p.close("2 launches ok, 0 failed")
        assert stages.done == 1
        assert "launches ok" not in out.getvalue()  # rounds do not pile up summaries
    with progress.overall("adaptive rounds", None) as rounds:
        rounds.done = 2
        assert rounds.line().startswith("adaptive rounds: 2 done, round 3 running")
    assert progress._overall is None


def test_quiet_and_verbose_reach_every_command() -> None:
    from collbench.cli import parser
    from collbench.commands import options

    p = parser()
    options.add_verbosity_everywhere(p)
    for argv, level in ((["run", "s.toml", "-q"], progress.QUIET),
                        (["tune", "validate", "r.rules", "-n", "2", "-v"], progress.VERBOSE),
                        (["study", "s.toml"], progress.NORMAL),
                        (["compare", "res", "--verbose"], progress.VERBOSE)):
        args = p.parse_args(argv)
        options.apply_verbosity(args)
        assert progress.verbosity() == level, argv


def test_summary_in_words() -> None:
    s = Summary(launches=14, skipped=2, by_status={"ok": 11, "failed": 1},
                points={"ok": 470, "timeout": 10})
    assert s.words() == ("11 launches ok, 1 failed (2 already stored); points: 470 ok, "
                         "10 timeout")
    assert Summary(launches=3, skipped=3).words() == "nothing to do: all 3 launches already stored"
    one = Summary(launches=1, by_status={"ok": 1}, points={"ok": 9})
    assert one.words() == "1 launch ok, 0 failed; points: 9 ok"


def test_bar_and_duration() -> None:
    assert bar(0, 4, 8) == "╺" + "─" * 7 and bar(4, 4, 8) == "━" * 8
    assert len(bar(3, 7)) == progress.BAR_WIDTH
    assert fmt_duration(0) == "0:00"
    assert fmt_duration(61.4) == "1:01"
    assert fmt_duration(3725) == "1:02:05"


SPEC = """\
[campaign]
name = "ticking"

[measure]
collectives = ["bcast"]
sizes = "1:4"
nprocs = [2]
iterations = 5
warmup = 1

[measure.algorithms]
bcast = ["default", "binomial", "pipeline"]

[run]
backend = "fake"
repetitions = {reps}
seed = 3
"""

TMUX = shutil.which("tmux")


class Pane:
    """A detached tmux session at 80 columns, on a server of its own (-L)."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        assert TMUX is not None
        self.socket = f"collbench-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        script = f"env {exports} {command}; echo EXIT=$?; sleep 120"
        subprocess.run([TMUX, "-L", self.socket, "-f", "/dev/null", "new-session", "-d",
                        "-x", "80", "-y", "30", "sh", "-c", script], check=True)

    def capture(self) -> str:
        # -J joins lines the terminal wrapped: a wrapped line comes back longer than 80.
        return subprocess.run([TMUX, "-L", self.socket, "capture-pane", "-p", "-J"],
                              capture_output=True, text=True, check=True).stdout

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], check=False,
                       capture_output=True)


def _run_in_tmux(tmp: Path, out: Path, reps: int, cache: Path,
                 point_s: str) -> tuple[list[str], str]:
    spec = tmp / "spec.toml"
    spec.write_text(SPEC.format(reps=reps))
    collbench = [sys.executable, "-m", "collbench.cli", "run", str(spec), "-o", str(out)]
    pane = Pane(shlex.join(collbench), {
        "COLLBENCH_FAKE_POINT_S": point_s, "COLLBENCH_CACHE": str(cache),
        "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "TERM": "xterm"})
    shots = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            shots.append(pane.capture())
            if "EXIT=" in shots[-1]:
                break
            time.sleep(0.4)
        return shots, shots[-1]
    finally:
        pane.close()


@pytest.mark.slow
@pytest.mark.skipif(TMUX is None, reason="no tmux")
def test_live_display_in_a_real_80_column_terminal(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # 9 points x 0.3 s: each launch takes ~3 s, so the display must tick inside it.
    shots, final = _run_in_tmux(tmp_path, tmp_path / "res", 2, cache, "0.3")
    assert "EXIT=0" in final, final
    for shot in shots:
        # `run`'s own closing line starts with the results path (a long temporary one here):
        # it is printed after the display is gone, and may wrap like any printed line.
        ours = [ln for ln in shot.splitlines() if not ln.startswith(str(tmp_path))]
        assert max(len(line) for line in ours) <= 80, shot
    # One launch seen running at several moments: its own clock and the elapsed time move.
    running: dict[str, set[str]] = {}
    elapsed: set[str] = set()
    for shot in shots:
        m = re.search(r"running (\S+) .*\((\d+:\d\d)\)", shot)
        if m:
            running.setdefault(m.group(1), set()).add(m.group(2))
        elapsed.update(re.findall(r"elapsed (\d+:\d\d)", shot))
    assert any(len(times) >= 2 for times in running.values()), shots
    assert len(elapsed) >= 3 and any("ETA " in s for s in shots)
    assert re.search(r"launches ━", "".join(shots))  # the bar
    # The end: the live lines are gone, the summary is in words.
    assert "running " not in final
    assert re.search(r"^2 launches ok, 0 failed; points: 18 ok in \d+:\d\d$", final, re.M), final
    # The kernel was compiled into the fresh cache, and said so; a second run finds it built.
    assert "built the kernel" in final
    _, again = _run_in_tmux(tmp_path, tmp_path / "res2", 1, cache, "0")
    assert "EXIT=0" in again and "built the kernel" not in again, again
