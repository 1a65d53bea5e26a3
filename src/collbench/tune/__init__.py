"""Tuning: turn measurements into an Open MPI rules file or an MPICH JSON tuning file,
check and verify the file, and validate it A/B against the MPI's defaults.

Modules: select (measured data -> algorithm per size range), rules (the rules-file format:
model, parser, writer), check (what Open MPI would reject or misread), writer (selection ->
rules file), mpich (selection -> MPICH csel JSON), shim (the algtrace LD_PRELOAD library),
verify (prove the file is used), validate (default vs tuned), cli (the subcommands).
"""
