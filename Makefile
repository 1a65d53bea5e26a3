# Two entry points that work on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system-deps run test lint bench clean

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

# MPICH (PyPI wheel) in its own prefix: its mpicc would clash with Open MPI's in .venv.
.venv-mpich/.installed:
	$(PYTHON) -m venv .venv-mpich
	.venv-mpich/bin/pip install -q mpich
	touch $@

test: $(STAMP) system-deps .venv-mpich/.installed
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .venv-mpich build results
