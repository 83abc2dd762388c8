# One entry point for people and CI. `make train` and `make test` create and reuse .venv (with uv when it can).
# The torch wheel is pinned through TORCH_SPEC so that no installer pulls a multi-GB CUDA build by accident;
# users with GPUs override it, e.g.
#   make setup TORCH_SPEC="torch==2.5.1" TORCH_INDEX="--index-url https://download.pytorch.org/whl/cu124"
# What make runs writes bytecode, as Python does by default, also where PYTHONDONTWRITEBYTECODE is set: without it
# every start compiles torch and Lightning anew. The first run's imports write it into .venv (and __pycache__/ beside
# the lab's sources, ignored by git), once, for the modules a run imports only: uv's --compile-bytecode at install
# compiles every installed module and makes a fresh clone's first result slower (docs/benchmarks.md, "Set-up and the
# first run").
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
INSTALLER ?= uv
ARGS ?=
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make test-min`: the lowest versions pyproject.toml allows for every direct dependency but torch, in a venv of
# its own. torch stays the wheel of TORCH_SPEC: its floor (torch>=2.4) is not tested here.
VENV_MIN ?= .venv-min
MIN_BIN := $(VENV_MIN)/bin
MIN_STAMP := $(VENV_MIN)/.installed
MIN_TESTS ?= tests/run/test_configs.py tests/test_train.py tests/records/test_hparams.py tests/e2e/test_tensorboard_server.py \
	tests/e2e/test_parallel_launcher.py tests/run/test_sweep_jobs.py tests/run/test_sweep_resume.py tests/review/test_compare.py \
	tests/review/test_compare_records.py

.PHONY: setup train tensorboard test test-gpu test-all test-min lint reproduce bench slurm-up slurm-down clean

# The installer is uv (the one on PATH, else `pip install uv` into the venv): it resolves, downloads and links in
# parallel, many times faster than pip. Without uv, when it fails, or with INSTALLER=pip, pip installs the same (after
# a one-line note). torch is the wheel pip itself picks for TORCH_SPEC/TORCH_INDEX under this machine's pip
# configuration (its find-links, indexes, constraints), handed to uv by that wheel's URL: uv reads no pip
# configuration, and to uv a bare `torch==X` means PyPI's build with GBs of CUDA packages. Picking torch's wheel and
# installing uv run side by side.
#
# uv first resolves and installs from its cache alone (--offline): with a warm cache nothing waits on the index,
# which uv otherwise asks again for metadata older than the index's cache lifetime. What the cache lacks makes it
# fail at once, and uv installs again with the network.
#
# The venv gets no pip of its own where the interpreter's pip can install into it (pip's --python, pip >= 22.3,
# which wants the interpreter's path): seeding pip costs seconds.
$(STAMP): pyproject.toml Makefile
	@echo "setting up $(VENV) ..."
	@set -e; \
	if ! test -x $(BIN)/python; then \
		if $(PYTHON) -m pip --python "$$(command -v $(PYTHON))" --version >/dev/null 2>&1; then \
			$(PYTHON) -m venv --without-pip $(VENV); \
		else $(PYTHON) -m venv $(VENV); fi; \
	fi; \
	if $(BIN)/python -m pip --version >/dev/null 2>&1; then pip="$(BIN)/python -m pip"; \
	else pip="$(PYTHON) -m pip --python $(BIN)/python"; fi; \
	$$pip install -q --dry-run --ignore-installed --no-deps --report $(VENV)/torch.json "$(TORCH_SPEC)" $(TORCH_INDEX) & \
	torch_pick=$$!; \
	if [ "$(INSTALLER)" != uv ]; then uv=; note="INSTALLER=$(INSTALLER)"; \
	elif command -v uv >/dev/null; then uv=uv; \
	elif $$pip install -q uv >/dev/null 2>&1; then uv="$(BIN)/python -m uv"; \
	else uv=; note="uv could not be installed"; fi; \
	wait $$torch_pick; \
	$(BIN)/python -c "import json, sys; [wheel] = json.load(sys.stdin)['install']; \
		print(wheel['metadata']['name'], '@', wheel['download_info']['url'])" < $(VENV)/torch.json > $(VENV)/torch.txt; \
	if [ -n "$$uv" ]; then \
		$$uv pip install -q --offline --python $(BIN)/python -r $(VENV)/torch.txt -e ".[sweeps,dev]" 2>/dev/null || \
		$$uv pip install -q --python $(BIN)/python -r $(VENV)/torch.txt -e ".[sweeps,dev]" || { uv=; note="uv failed"; }; \
	fi; \
	if [ -z "$$uv" ]; then \
		echo "note: $$note: installing with pip (minutes, not seconds)"; \
		$$pip install -q -r $(VENV)/torch.txt && $$pip install -q -e ".[sweeps,dev]"; \
	fi
	touch $(STAMP)

# Made anew each time, so that nothing newer is left from before. uv resolves the lowest direct versions; the
# constraint names the installed torch with its local label (2.13.0+cpu), which no index serves, so the resolver
# keeps that wheel and never downloads another torch.
$(MIN_STAMP): pyproject.toml Makefile
	rm -rf $(VENV_MIN)
	$(PYTHON) -m venv $(VENV_MIN)
	$(MIN_BIN)/python -m pip install -q "$(TORCH_SPEC)" $(TORCH_INDEX)
	$(MIN_BIN)/python -m pip install -q uv
	$(MIN_BIN)/python -c "import importlib.metadata as m; print('torch==' + m.version('torch'))" > $(VENV_MIN)/torch.txt
	$(MIN_BIN)/python -m uv pip install -q --python $(MIN_BIN)/python --resolution lowest-direct \
		--constraint $(VENV_MIN)/torch.txt -e ".[sweeps,dev]"
	$(MIN_BIN)/python -m uv pip list --python $(MIN_BIN)/python > $(VENV_MIN)/versions.txt
	touch $(MIN_STAMP)

setup: $(STAMP)  ## create .venv and install the project

train: setup  ## train the default experiment (pass overrides with ARGS="model=multihead heads=3")
	$(BIN)/python scripts/train.py $(ARGS)

tensorboard: setup  ## TensorBoard on the newest sweep (or LOGDIR=outputs, a run or sweep dir), every logged step kept
	$(BIN)/python scripts/start_tensorboard.py $(LOGDIR) $(ARGS)

# `make test` runs the suite on TEST_WORKERS pytest-xdist workers (--dist loadscope: a module's tests share a worker,
# so a module-scoped fixture is built once; --no-loadscope-reorder: modules are handed out in the order collected,
# the SLURM tests first, tests/conftest.py). More workers than cores: most tests wait on a training subprocess or on
# the cluster. `make test-all` runs in two parts and fails if either fails (pytest's exit 5, "no tests ran",
# included): the same run with the slow tests, then the tests marked `serial`, which run the suite themselves, one
# at a time. ARGS go to every pytest run; where ARGS are given, a serial part with no test in them is no failure
# (`make test-all ARGS=tests/test_x.py` of a file without a serial test).
TEST_WORKERS ?= 3
pytest_parallel = $(BIN)/python -m pytest -m "$(1)" -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder $(ARGS)

test: setup  ## the test suite CI runs (slow tests excluded), on every core
	@$(call pytest_parallel,not slow)

test-gpu: setup  ## the CUDA subset (tests marked gpu); each skips where CUDA is missing
	$(BIN)/python -m pytest -m gpu $(ARGS)

test-all: setup  ## every test, the slow ones too: the parallel part, then the serial tests one at a time
	@status=0; \
	$(call pytest_parallel,not serial) || { status=$$?; echo "make: the parallel part of the tests exited $$status"; }; \
	$(BIN)/python -m pytest -m serial $(ARGS) || { serial=$$?; [ "$$serial" = 5 ] && [ -n "$(ARGS)" ] || \
		{ status=$$serial; echo "make: the serial part of the tests exited $$serial"; }; }; \
	exit $$status

test-min: $(MIN_STAMP)  ## MIN_TESTS on the lowest allowed versions (ARGS, e.g. ARGS=tests/ for every test)
	$(MIN_BIN)/python -m pytest -m "not slow" $(if $(ARGS),$(ARGS),$(MIN_TESTS))

docs: setup  ## rewrite the docs' generated tables (knobs, groups, variants) from the code
	$(BIN)/python -m attention_lab.docs_tables

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
	rm -rf $(VENV) $(VENV_MIN) .pytest_cache .ruff_cache .hypothesis src/*.egg-info
