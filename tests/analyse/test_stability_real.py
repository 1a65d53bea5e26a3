"""Stability warnings on campaigns that really ran: the fake backend and SimGrid.

The same settings (3 timed iterations, tiny sizes, 8 ranks) are a problem on a real clock
and none on a simulated one, whose time is exact and whose cores are the platform's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from collbench.analyse import compare
from collbench.analyse.stability import line
from collbench.cli import main
from collbench.store import Store
from tests.simgrid_support import (
    needs_smpi,
    sim_env,
    small_platform,
    smpi_cache,
    smpi_kernel,
    smpi_tools,
)

__all__ = ["sim_env", "smpi_cache", "smpi_kernel", "smpi_tools"]  # fixtures, used by name

SPEC = """\
[campaign]
name = "warn"

[measure]
collectives = ["bcast"]
algorithms = ["default", "binomial"]
sizes = [1, 4]
nprocs = [8]
iterations = 3
warmup = 1

[run]
backend = "{backend}"
repetitions = 3
seed = 5
timeout = 120
"""


def _run(tmp: Path, backend: str, *extra: str) -> list[str]:
    spec = tmp / f"{backend}.toml"
    spec.write_text(SPEC.format(backend=backend))
    out = tmp / backend
    assert main(["run", str(spec), "-o", str(out), *extra]) == 0
    return [line(w) for w in compare(Store(out)).warnings]


@pytest.mark.slow
def test_a_real_clock_is_told_to_raise_iterations(tmp_path: Path) -> None:
    found = _run(tmp_path, "fake")
    iterations = [w for w in found if "timed iterations" in w]
    assert len(iterations) == 2  # one line per algorithm, both sizes in one range
    assert "bcast np=8 map-by=core bind-to=core: default at 1–4: only 3 timed iterations " \
        "per repetition (< 10); raise measure.iterations (now 3)" in iterations
    assert all("\n" not in w for w in found)


@needs_smpi
@pytest.mark.slow
def test_a_simulator_gets_no_clock_or_oversubscription_advice(tmp_path: Path,
                                                              sim_env: Path) -> None:
    found = _run(tmp_path, "simgrid", "--platform", str(small_platform(tmp_path)))
    text = "\n".join(found)
    for wrong in ("iterations", "timed work", "oversubscribed", "pin ranks", "other jobs"):
        assert wrong not in text, text
