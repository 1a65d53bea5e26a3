"""Slurm backend: batch scripts, submission, tracking and collection of marker files."""
