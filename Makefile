# Quick start: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test

.PHONY: demo test lint bench mutate clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "metadata-log needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml setup.py records/_fastdecode.pyx | $(PY)
	$(PY) -m pip install --quiet -e '.[audit]'
	touch $@

$(STAMP_TEST): pyproject.toml setup.py records/_fastdecode.pyx | $(PY)
	$(PY) -m pip install --quiet -e '.[audit,test]'
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash docs/demo.sh

test: $(STAMP_TEST)
	$(PY) -m pytest

lint: $(STAMP_TEST)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(STAMP_TEST)
	$(PY) bench/log_bench.py
	$(PY) bench/replay_bench.py

# Mutation testing (docs/testing.md): each module's mutants against the tests that exercise it,
# one module at a time, at low priority. `make mutate MODULES=replay/delta.py` for one module.
MODULES ?=
mutate: $(STAMP_TEST)
	nice -n 10 $(PY) tests/mutate.py $(MODULES)

clean:
	rm -rf .mutation $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
