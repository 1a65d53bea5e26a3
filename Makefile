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

test: $(STAMP) system-deps
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build results
