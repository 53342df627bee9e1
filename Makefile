# dbsim: the two commands the README promises, plus the checks behind them.
#   make run   - create the environment and run the default scenario (SLOB-like on SQLite)
#   make test  - create the environment, install the system tools the tests use, run every test

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PYTEST_ARGS ?=
# Debian packages the test suite drives for real: iostat (sysstat); nfsiostat and mountstats
# (nfs-common) to check the NFS collector's arithmetic; the pyodbc path through
# unixODBC and the PostgreSQL ODBC driver; chromium for the report and web-UI browser tests
# (driven by Playwright through its executable path, never a downloaded browser); fio for the
# storage baseline (`dbsim baseline` drives the real fio, never a Python imitation); bpftrace
# for the device latency percentiles (the blocklatency collector reads the block tracepoints);
# prometheus, the real server that scrapes `dbsim run --metrics-port` (tests/e2e/test_prometheus.py);
# fuse3 (libfuse 3 and fusermount3) for the lab array, the FUSE file system under a loop device
# (tests/integration/test_lab_array.py).
TEST_DEB_PACKAGES := sysstat unixodbc odbc-postgresql chromium nfs-common fio bpftrace prometheus fuse3

.PHONY: run test venv system-packages lint typecheck bench clean

$(BIN)/dbsim: pyproject.toml setup.py storage/targets/native/fileloop.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

venv: $(BIN)/dbsim

run: venv
	$(BIN)/dbsim run

system-packages:
	@missing=""; for p in $(TEST_DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "WARNING: missing Debian packages:$$missing (tests that need them will skip loudly)"; \
	  fi; \
	fi

# The tests start dbsim as a child process hundreds of times. Where PYTHONDONTWRITEBYTECODE is
# set (it is on this machine), no process caches the project's compiled modules and each one
# compiles ~130 of them again (~0.4 s a start): compile them once here instead.
test: venv system-packages lint typecheck
	$(BIN)/python -m compileall -q -j 0 sim workloads storage tests bench >/dev/null
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: venv
	$(BIN)/ruff check sim workloads storage tests
	$(BIN)/ruff format --check sim workloads storage tests

typecheck: venv
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
