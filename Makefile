# Every target prepares the virtualenv it needs first: `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEV_STAMP := $(VENV)/.dev-installed
RUN_STAMP := $(VENV)/.run-installed

.PHONY: install dev test lint typecheck bench demo dist docs clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(RUN_STAMP): $(BIN)/python setup.cfg setup.py
	$(BIN)/python -m pip install -q -e '.[fast]'
	touch $@

$(DEV_STAMP): $(BIN)/python setup.cfg setup.py
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(RUN_STAMP)

install: $(RUN_STAMP)

dev: $(DEV_STAMP)

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q

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
