# Every target prepares the virtualenv it needs first: `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEV_STAMP := $(VENV)/.dev-installed
RUN_STAMP := $(VENV)/.run-installed
# pip relays setuptools' "Editable installation" notice as a warning on every editable install;
# it says nothing about this project. Only that notice is filtered: other warnings and every
# error still show.
PIP_PYTHON = $(BIN)/python
PIP_INSTALL = $(PIP_PYTHON) -W "ignore:Editable installation:UserWarning" -m pip install -q

.PHONY: install dev test lowest-python test-lowest test-transformers official-venv test-official \
	ray-venv test-ray lint typecheck bench soak demo dist docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUN_STAMP): $(BIN)/python setup.cfg setup.py
	$(PIP_INSTALL) -e '.[fast]'
	touch $@

$(DEV_STAMP): $(BIN)/python setup.cfg setup.py
	$(PIP_INSTALL) -e '.[dev]'
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)

dev: $(DEV_STAMP)

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q

# The declared floors: a virtualenv on the oldest Python that setup.cfg allows, with every
# runtime dependency and the fast/chat extras at the minimum setup.cfg declares (pins derived
# from it by .ci/lowest_pins.py; pip fails when a floor cannot be installed), plus the test
# tools, runs the whole suite. PYTHON_LOWEST is that interpreter: found on PATH or under pyenv.
LOWEST_VENV ?= .venv-lowest
LOWEST_STAMP := $(LOWEST_VENV)/.installed
LOWEST_VERSION = $(shell sed -n 's/^python_requires *= *>= *//p' setup.cfg)
find_lowest = $(shell for p in python$(LOWEST_VERSION) \
	$${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(LOWEST_VERSION).*/bin/python$(LOWEST_VERSION); do \
	$$p -c '' >/dev/null 2>&1 && { command -v $$p; break; }; done)
# Looked for once, by the targets that use it (a pyenv shim that cannot run it is passed over).
PYTHON_LOWEST ?= $(eval PYTHON_LOWEST := $(find_lowest))$(PYTHON_LOWEST)

lowest-python:
	@test -n "$(PYTHON_LOWEST)" || { echo "no python$(LOWEST_VERSION) on PATH or under pyenv:" \
		"set PYTHON_LOWEST to run make test-lowest" >&2; exit 1; }
	@echo $(PYTHON_LOWEST)

$(LOWEST_STAMP): PIP_PYTHON = $(LOWEST_VENV)/bin/python
$(LOWEST_STAMP): setup.cfg setup.py .ci/lowest_pins.py
	@$(MAKE) -s lowest-python >/dev/null
	rm -rf $(LOWEST_VENV)
	$(PYTHON_LOWEST) -m venv $(LOWEST_VENV)
	$(PIP_PYTHON) -m pip install -q --upgrade pip
	$(PIP_PYTHON) .ci/lowest_pins.py constraints > $(LOWEST_VENV)/floors.txt
	$(PIP_PYTHON) .ci/lowest_pins.py test-tools > $(LOWEST_VENV)/test-tools.txt
	$(PIP_INSTALL) -c $(LOWEST_VENV)/floors.txt -e '.[fast,chat]' -r $(LOWEST_VENV)/test-tools.txt
	touch $@

test-lowest: $(LOWEST_STAMP)
	$(LOWEST_VENV)/bin/python .ci/lowest_pins.py check
	$(LOWEST_VENV)/bin/python -m pytest -q

# Opt-in: get_tokenizer() and the light tokenizer compared with transformers, in a virtualenv of
# their own (transformers is never a dependency: `make test` runs without it, as users do).
TRANSFORMERS_VENV ?= .venv-transformers
TRANSFORMERS_STAMP := $(TRANSFORMERS_VENV)/.installed

$(TRANSFORMERS_STAMP): PIP_PYTHON = $(TRANSFORMERS_VENV)/bin/python
$(TRANSFORMERS_STAMP): setup.cfg setup.py
	test -x $(TRANSFORMERS_VENV)/bin/python || $(PYTHON) -m venv $(TRANSFORMERS_VENV)
	$(PIP_INSTALL) -e '.[chat]' 'transformers>=5' pytest pytest-timeout hypothesis requests
	touch $@

test-transformers: $(TRANSFORMERS_STAMP)
	$(TRANSFORMERS_VENV)/bin/python -m pytest -q tests/compat/test_tokenizer_compat.py \
		tests/unit/clients/test_tokenizer.py tests/compat/test_official_script.py

# Opt-in: the official SDK 0.38 (in its own venv, installed from the package index when missing)
# drives every public sync call against `python -m tinker_lite.local serve` (docs/local.rst);
# its `tinker` command is compared with `tinker-lite` (stored login, JSON keys, exit codes);
# its client-creation futures' warnings are compared with tinker_lite's.
OFFICIAL_VENV ?= $(HOME)/.cache/tinker-lite-bench/official-venv
OFFICIAL_SDK ?= tinker==0.38.0

official-venv:
	test -x $(OFFICIAL_VENV)/bin/python || ( $(PYTHON) -m venv $(OFFICIAL_VENV) && \
		$(OFFICIAL_VENV)/bin/python -m pip install -q '$(OFFICIAL_SDK)' zstandard ) || \
		( rm -rf $(OFFICIAL_VENV); exit 1 )

test-official: $(DEV_STAMP) official-venv
	TINKER_LITE_OFFICIAL=1 TINKER_OFFICIAL_VENV=$(OFFICIAL_VENV) \
		$(BIN)/python -m pytest -q -s tests/compat/test_local_server_official.py \
		tests/compat/test_cli_official.py tests/compat/test_clients_compat.py \
		tests/compat/test_errors_as_038.py

# Opt-in: examples/rl_ray.py and SamplingClient hand-over on a local Ray cluster of 2 CPUs
# (tests/loopback/test_rl_ray.py; docs/scaling.rst). The `ray` extra is installed from the package
# index when ray is missing. Ray is kept on loopback and sends no usage statistics.
ray-venv: $(DEV_STAMP)
	$(BIN)/python -c "import importlib.util as u; raise SystemExit(u.find_spec('ray') is None)" || \
		$(PIP_INSTALL) -e '.[ray]'

test-ray: ray-venv
	TINKER_LITE_RAY=1 RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
		$(BIN)/python -m pytest -q tests/loopback/test_rl_ray.py

lint: $(DEV_STAMP)
	$(BIN)/ruff check tinker_lite tests examples bench
	$(BIN)/ruff format --check tinker_lite tests examples bench
	$(BIN)/mypy

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

bench: $(DEV_STAMP)
	$(BIN)/python bench/run_all.py

# Not part of `make test`: minutes of random faults and a server restart against
# `tinker-lite local serve`, checking invariants (bench/README.rst, "Soak").
SOAK_MINUTES ?= 5
SOAK_SEED ?= 1
soak: $(DEV_STAMP)
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES) --seed $(SOAK_SEED)

demo: $(RUN_STAMP)
	$(BIN)/python examples/quickstart.py

docs: $(DEV_STAMP)
	$(BIN)/sphinx-build -n -W --keep-going -q -b html docs docs/_build/html

dist: $(DEV_STAMP)
	$(BIN)/python -m pip wheel --no-deps -w dist .

clean:
	rm -rf $(VENV) $(LOWEST_VENV) $(TRANSFORMERS_VENV) build dist *.egg-info .mypy_cache .ruff_cache
