# Quick start: `make demo` and `make test`. Both create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP_RUN := $(VENV)/.installed-run
STAMP_TEST := $(VENV)/.installed-test
# What tests/interop/test_interop_clients.py drives: kafkajs from tests/interop's lock file (npm ci
# writes node_modules/.package-lock.json) and librdkafka's C headers from the system.
STAMP_INTEROP := tests/interop/node_modules/.package-lock.json
RDKAFKA_HEADER := /usr/include/librdkafka/rdkafka.h
# Bytecode written at install: where Python does not write it at run time (PYTHONDONTWRITEBYTECODE,
# a read-only tree) every `mlog` would compile its modules again, ~70% more start-up time.
COMPILE := $(PY) -m compileall -q records metadata_log replay api migrations
# The compiled helpers setup.py builds (each optional: the install goes on without one that fails).
EXTENSIONS := records/_fastdecode.pyx records/_slot_offsets.pxd replay/_untrack.pyx \
	replay/sql/_partition_rows.pyx \
	replay/sql/_partition_rows.pxd replay/sql/_row_runs.pyx replay/sql/_row_runs.pxd \
	replay/sql/_sqlite_rows.pyx replay/sql/_pg_copy_rows.pyx replay/sql/_topic_adder.pyx \
	metadata_log/_syncer.pyx \
	api/protocol/_native_reader.pyx api/protocol/_native_writer.pyx
# SQLite's C headers (Debian's libsqlite3-dev), which replay.sql._sqlite_rows is built against.
SQLITE_HEADER := /usr/include/sqlite3.h

.PHONY: demo test test-fast interop prometheus browser sqlite-headers lint bench mutate clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "metadata-log needs Python 3.11 or newer; set PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml setup.py $(EXTENSIONS) | $(PY)
	@$(MAKE) --no-print-directory sqlite-headers
	$(PY) -m pip install --quiet -e '.[audit]'
	$(COMPILE)
	touch $@

$(STAMP_TEST): pyproject.toml setup.py $(EXTENSIONS) | $(PY)
	@$(MAKE) --no-print-directory sqlite-headers
	$(PY) -m pip install --quiet -e '.[audit,test]'
	$(COMPILE)
	touch $@ $(STAMP_RUN)

demo: $(STAMP_RUN)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash docs/demo.sh

# Without npm (or root for apt-get) the interop tests skip with the reason, and fail under CI=true.
$(STAMP_INTEROP): tests/interop/package.json tests/interop/package-lock.json
	@if command -v npm >/dev/null; then \
		cd tests/interop && npm ci --no-audit --no-fund; \
	else \
		echo "npm is missing: the kafkajs interop test will not run"; \
	fi

# libsqlite3-dev, for the compiled snapshot reader; without it (no root) that helper is not built.
sqlite-headers:
	@if [ ! -e $(SQLITE_HEADER) ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update && apt-get install -y --no-install-recommends libsqlite3-dev; \
		else \
			echo "libsqlite3-dev is missing and cannot be installed here (needs root and apt-get)"; \
		fi; \
	fi

# librdkafka-dev comes from the system's packages (Debian 12: 2.0.2); installing it needs root.
interop: $(STAMP_INTEROP)
	@if [ ! -e $(RDKAFKA_HEADER) ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update && apt-get install -y librdkafka-dev; \
		else \
			echo "librdkafka-dev is missing and cannot be installed here (needs root and apt-get)"; \
		fi; \
	fi

# Debian's prometheus package (2.42 in Debian 12): `prometheus` and `promtool`, with which
# tests/system/test_prometheus_dashboard.py and tests/test_prometheus_rules.py check the
# dashboard and the alert rules. Installing it needs root; the service its package starts
# where systemd runs is stopped (the tests start their own Prometheus on a free port).
prometheus:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update && apt-get install -y --no-install-recommends prometheus && \
			{ systemctl disable --now prometheus >/dev/null 2>&1 || true; }; \
		else \
			echo "prometheus is missing and cannot be installed here (needs root and apt-get)"; \
		fi; \
	fi

# Debian's chromium, which the console's browser tests (marker `browser`) drive through
# Playwright (a test dependency) without Playwright's own browser downloads. Installing it
# needs root; without it those tests skip with the reason.
browser:
	@if ! command -v chromium >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update && apt-get install -y --no-install-recommends chromium; \
		else \
			echo "chromium is missing and cannot be installed here (needs root and apt-get)"; \
		fi; \
	fi

# Both run two workers a core (pytest-xdist; worksteal evens out the long tests): the process
# tests mostly wait on their servers, and so do the units' in-process quorums, TLS and SASL
# deadlines; with one worker a core the two cores here idled through those waits (`make test`
# 8 min 20 s against 7 min 40 s, `make test-fast` 113 s against 79 s).
# docs/testing.md: the markers, the tree, how to run a part.
TEST_WORKERS := $(shell python3 -c "import os; print(2 * (os.cpu_count() or 1))" 2>/dev/null || echo 2)
XDIST := -n $(TEST_WORKERS) --dist worksteal
FAST := not process and not spark and not postgres and not interop and not browser
# pytest keeps its assertion-rewritten test modules in __pycache__ only where bytecode may be
# written: under PYTHONDONTWRITEBYTECODE each worker rewrote all ~300 of them at every run
# (collection 12 s against 3.6 s from the cache, here). The tests write it whatever the
# environment says; a clean clone's first run pays it once.
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest

# Everything: units, real processes, Spark, PostgreSQL, foreign clients.
test: $(STAMP_TEST) interop prometheus browser
	$(PYTEST) $(XDIST)

# The units alone: no process started, no JVM, no PostgreSQL server, no foreign client.
# A sample of the sweeps and simulations: the Raft simulations 100 seeds each (`make test`
# runs 2,000), every fifth point of the sweeps and a fifth of each property test's examples
# (tests/support/sweeps.py).
test-fast: $(STAMP_TEST)
	MLOG_SIM_SEEDS=100 MLOG_SWEEP_STRIDE=5 $(PYTEST) $(XDIST) -m "$(FAST)"

lint: $(STAMP_TEST)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: $(STAMP_TEST)
	$(PY) bench/log_bench.py
	$(PY) bench/replay_bench.py
	$(PY) bench/cli_bench.py

# Mutation testing (docs/testing.md; the runner is tools/mutate/): each module's mutants against
# the tests that exercise it, one module at a time, at low priority.
# `make mutate MODULES=replay/delta/topics.py` for one module;
# `make mutate MODULES=... AGAIN=1` runs only the survivors of each module's last report;
# `JOBS=2` runs two mutants at once (one per core). A run cut short resumes where it stopped.
MODULES ?=
AGAIN ?=
JOBS ?= 1
mutate: $(STAMP_TEST)
	nice -n 10 $(PY) -m tools.mutate --jobs $(JOBS) $(if $(AGAIN),--again) $(MODULES)

clean:
	rm -rf .mutation $(VENV) tests/interop/node_modules build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
