"""Ask the backend whether each placement a study will use is accepted, before running.

Open MPI 5 refuses a binding above the mapping object (`--map-by core --bind-to socket`
exits 77), and such rules differ between versions and launchers; the backend's own trial
(for mpirun: starting `true` with the exact placement flags) is the one check that cannot be
out of date. A trial starts no more ranks than the machine holds (campaign.PlacementTrials).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from collbench.campaign import PlacementTrials, Prepared, refused
from collbench.errors import UserError
from collbench.study.spec import Parameter, Study


def _stderr(line: str) -> None:
    print(f"collbench: {line}", file=sys.stderr)


def check_placements(study: Study, params: Sequence[Parameter], stages: Sequence[Prepared],
                     say: Callable[[str], None] = _stderr) -> None:
    """UserError naming the study parameter whose placement the backend refuses; `say`
    gets one line per placement tried at fewer ranks than planned."""
    trials = PlacementTrials()
    for i, (p, stage) in enumerate(zip(params, stages, strict=True)):
        for launch, trial in trials.new(stage.plan.launches, stage.cores):
            problem = stage.backend.placement_problem(trial)
            if problem:
                raise UserError(
                    f"{study.source}: study.parameters[{i}] ({p.name}): mpirun refuses "
                    f"{refused(launch, trial)}; {problem}")
    for note in trials.notes:
        say(f"skipped: {note}")
