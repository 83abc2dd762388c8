# One entry point for people and CI. `make train` and `make test` create and reuse .venv.
# The torch wheel is installed first and pinned through TORCH_SPEC so that pip never pulls a
# multi-GB CUDA build by accident; users with GPUs override it, e.g.
#   make setup TORCH_SPEC="torch==2.5.1" TORCH_INDEX="--index-url https://download.pytorch.org/whl/cu124"
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup train test test-all lint reproduce bench slurm-up slurm-down clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q "$(TORCH_SPEC)" $(TORCH_INDEX)
	$(BIN)/python -m pip install -q -e ".[sweeps,dev]"
	touch $(STAMP)

setup: $(STAMP)  ## create .venv and install the project

train: setup  ## train the default experiment (pass overrides with ARGS="model=multihead heads=3")
	$(BIN)/python scripts/train.py $(ARGS)

test: setup  ## the test suite CI runs (slow tests excluded)
	$(BIN)/python -m pytest -m "not slow" $(ARGS)

test-all: setup  ## every test, the slow ones too
	$(BIN)/python -m pytest $(ARGS)

lint: setup
	$(BIN)/ruff check src scripts tests

reproduce: setup  ## compare the library with every number the notebooks print
	$(BIN)/python scripts/reproduce.py

bench: setup  ## benchmarks (add ARGS=--quick for a smoke run)
	$(BIN)/python scripts/benchmark.py $(ARGS)

slurm-up:  ## start a one-node SLURM cluster here (root; Debian's slurm-wlm slurmdbd munge mariadb-server)
	scripts/slurm/up.sh

slurm-down:  ## stop that cluster (only the daemons slurm-up started)
	scripts/slurm/down.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis src/*.egg-info
