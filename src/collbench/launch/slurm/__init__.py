"""Slurm backend: batch scripts, submission, tracking and collection of marker files.

Kept import-light: collbench.spec imports .config, so this package must not import the
backend (which imports plan, which imports spec). The registry imports .backend.
"""
