"""Ask the backend whether each placement a study will use is accepted, before running.

Open MPI 5 refuses a binding above the mapping object (`--map-by core --bind-to socket`
exits 77), and such rules differ between versions and launchers; the backend's own trial
(for mpirun: starting `true` with the exact placement flags) is the one check that cannot be
out of date.
"""

from __future__ import annotations

from collections.abc import Sequence

from collbench.campaign import Prepared
from collbench.errors import UserError
from collbench.study.spec import Parameter, Study


def check_placements(study: Study, params: Sequence[Parameter],
                     stages: Sequence[Prepared]) -> None:
    """UserError naming the study parameter whose placement the backend refuses."""
    seen: set[tuple[object, ...]] = set()
    for i, (p, stage) in enumerate(zip(params, stages, strict=True)):
        for launch in stage.plan.launches:
            key = (launch.nprocs, launch.mapping, launch.binding, launch.oversubscribe)
            if key in seen:
                continue
            seen.add(key)
            problem = stage.backend.placement_problem(launch)
            if problem:
                raise UserError(
                    f"{study.source}: study.parameters[{i}] ({p.name}): mpirun refuses -np "
                    f"{launch.nprocs} --map-by {launch.mapping} --bind-to {launch.binding}; "
                    f"{problem}")
