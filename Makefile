# Every target prepares the virtualenv it needs first: `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEV_STAMP := $(VENV)/.dev-installed
RUN_STAMP := $(VENV)/.run-installed
# pip relays setuptools' "Editable installation" notice as a warning on every editable install;
# it says nothing about this project. Only that notice is filtered: other warnings and every
# error still show.
PIP_INSTALL := $(BIN)/python -W "ignore:Editable installation:UserWarning" -m pip install -q

.PHONY: install dev test official-venv test-official ray-venv test-ray lint typecheck bench demo dist docs clean

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

# Opt-in: the official SDK 0.38 (in its own venv, installed from the package index when missing)
# drives every public sync call against `python -m tinker_lite.local serve` (docs/local.rst).
OFFICIAL_VENV ?= $(HOME)/.cache/tinker-lite-bench/official-venv
OFFICIAL_SDK ?= tinker==0.38.0

official-venv:
	test -x $(OFFICIAL_VENV)/bin/python || ( $(PYTHON) -m venv $(OFFICIAL_VENV) && \
		$(OFFICIAL_VENV)/bin/python -m pip install -q '$(OFFICIAL_SDK)' zstandard ) || \
		( rm -rf $(OFFICIAL_VENV); exit 1 )

test-official: $(DEV_STAMP) official-venv
	TINKER_LITE_OFFICIAL=1 TINKER_OFFICIAL_VENV=$(OFFICIAL_VENV) \
		$(BIN)/python -m pytest -q -s tests/test_local_server_official.py

# Opt-in: examples/rl_ray.py and SamplingClient hand-over on a local Ray cluster of 2 CPUs
# (tests/test_rl_ray.py; docs/scaling.rst). The `ray` extra is installed from the package index
# when ray is missing. Ray is kept on loopback and sends no usage statistics.
ray-venv: $(DEV_STAMP)
	$(BIN)/python -c "import importlib.util as u; raise SystemExit(u.find_spec('ray') is None)" || \
		$(PIP_INSTALL) -e '.[ray]'

test-ray: ray-venv
	TINKER_LITE_RAY=1 RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 \
		$(BIN)/python -m pytest -q tests/test_rl_ray.py

lint: $(DEV_STAMP)
	$(BIN)/ruff check tinker_lite tests examples bench
	$(BIN)/ruff format --check tinker_lite tests examples bench
	$(BIN)/mypy

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

bench: $(DEV_STAMP)
	$(BIN)/python bench/run_all.py

demo: $(RUN_STAMP)
	$(BIN)/python examples/quickstart.py

docs: $(DEV_STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

dist: $(DEV_STAMP)
	$(BIN)/python -m pip wheel --no-deps -w dist .

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache
