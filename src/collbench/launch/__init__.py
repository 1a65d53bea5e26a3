"""Launch backends: how a planned launch becomes a running MPI job (see base.py)."""
