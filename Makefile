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

.PHONY: install dev test official-venv test-official lint typecheck bench soak demo dist docs clean

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
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

dist: $(DEV_STAMP)
	$(BIN)/python -m pip wheel --no-deps -w dist .

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache
