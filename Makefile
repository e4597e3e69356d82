# Quick start: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
# Bytecode written at install: where Python does not write it at run time (PYTHONDONTWRITEBYTECODE,
# a read-only tree) every `mlog` would compile its modules again, ~70% more start-up time.
COMPILE := $(PY) -m compileall -q records metadata_log replay api migrations

.PHONY: demo test lint bench clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "metadata-log needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml setup.py records/_fastdecode.pyx | $(PY)
	$(PY) -m pip install --quiet -e '.[audit]'
	$(COMPILE)
	touch $@

$(STAMP_TEST): pyproject.toml setup.py records/_fastdecode.pyx | $(PY)
	$(PY) -m pip install --quiet -e '.[audit,test]'
	$(COMPILE)
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
	$(PY) bench/cli_bench.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
