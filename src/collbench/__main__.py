"""`python -m collbench`: the same command line as the `collbench` script."""

from collbench.cli import main

raise SystemExit(main())
