"""Launch backends: how a planned launch becomes a running MPI job."""

from collbench.launch.base import Backend, LaunchOutcome, get_backend, register

__all__ = ["Backend", "LaunchOutcome", "get_backend", "register"]
