"""Expand a spec into launches (one mpirun each) and points (collective × algorithm × size).

Launch dimensions: nprocs × map_by × bind_to × mca.sweep (cartesian, `zip` groups vary
together) × repetition. Points inside a launch: collective × algorithm variant × size.
How algorithms are forced decides how points are split into launches:

- "mpit": the kernel switches Open MPI algorithms at run time (MPI_T), so one launch holds
  every switchable algorithm, plus default points that need no forcing;
- "launch": one launch per algorithm variant, forced by MCA parameters (Open MPI) or
  MPIR_CVAR_* environment variables (MPICH);
- "none": default algorithms only, nothing forced.
"""

from collbench.plan.expand import make_plan
from collbench.plan.model import (
    ALPHA_S,
    BETA_BYTES_PER_S,
    LAUNCH,
    MAX_LAUNCHES,
    MAX_POINTS,
    MPIT,
    NONE,
    PLAN_FORMAT,
    PLAN_HISTORY,
    READABLE_PLAN_FORMATS,
    Launch,
    Plan,
    Point,
    ProgramRun,
)
from collbench.plan.programs import program_launches

__all__ = [
    "ALPHA_S",
    "BETA_BYTES_PER_S",
    "LAUNCH",
    "MAX_LAUNCHES",
    "MAX_POINTS",
    "MPIT",
    "NONE",
    "PLAN_FORMAT",
    "PLAN_HISTORY",
    "READABLE_PLAN_FORMATS",
    "Launch",
    "Plan",
    "Point",
    "ProgramRun",
    "make_plan",
    "program_launches",
]
