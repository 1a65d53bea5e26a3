"""SimGrid fixtures (tests/simgrid_support.py) for the tests here."""

from tests.simgrid_support import sim_env, smpi_cache, smpi_kernel, smpi_tools

__all__ = ["sim_env", "smpi_cache", "smpi_kernel", "smpi_tools"]
