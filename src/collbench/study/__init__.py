"""MCA parameter studies: one parameter at a time, a setting kept only if significantly
better (docs/study.md). `collbench study` is the command; run.run_study the entry point."""
