# dbsim: the two commands the README promises, plus the checks behind them.
#   make run   - create the environment and run the default scenario (SLOB-like on SQLite)
#   make test  - create the environment, install the system tools the tests use, run every test
#                (in two phases: the waiting tests in parallel, then the timing tests alone)

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

# Two phases (docs/testing.md). Phase 1: every test that only waits (child processes, servers,
# browsers, sleeps) in TEST_WORKERS parallel workers, more than the 2 CPUs since they mostly
# wait; each module runs whole on one worker (--dist loadscope: its tests share its fixtures,
# its names and its order), and modules use names of their own (random table prefixes, free
# ports, their own temporary directories, loop devices and cgroups), so two workers never
# touch one thing.
# Phase 2: the tests marked timing (they assert rates, IOPS, latency bounds; the lab's ceilings
# are among them), one at a time with nothing beside them. Both phases always run;
# make fails if either failed. A phase with nothing selected (pytest's exit 5) is not a failure.
# TEST_REPORT_DIR, when set, receives each phase's JUnit XML and duration (.ci/run reads them).
TEST_WORKERS ?= 8
TEST_REPORT_DIR ?=
PARALLEL_MARKS := not timing
SERIAL_MARKS := timing

# The tests start dbsim as a child process hundreds of times. Where PYTHONDONTWRITEBYTECODE is
# set (it is on this machine), no process caches the project's compiled modules and each one
# compiles ~130 of them again (~0.4 s a start): compile them once here instead.
test: venv system-packages lint typecheck
	$(BIN)/python -m compileall -q -j 0 sim workloads storage tests bench >/dev/null
	@report="$(TEST_REPORT_DIR)"; failed=0; \
	for phase in parallel serial; do \
	  if [ $$phase = parallel ]; then marks="$(PARALLEL_MARKS)"; opts="-n $(TEST_WORKERS) --dist loadscope"; \
	  else marks="$(SERIAL_MARKS)"; opts="-n 0"; fi; \
	  junit=""; [ -n "$$report" ] && junit="--junitxml=$$report/$$phase.xml"; \
	  echo "=== test phase $$phase: -m '$$marks' $$opts"; \
	  start=$$(date +%s); \
	  $(BIN)/python -m pytest $$opts -m "$$marks" $$junit $(PYTEST_ARGS); rc=$$?; \
	  took=$$(( $$(date +%s) - start )); \
	  if [ $$rc = 5 ]; then echo "=== test phase $$phase: no test selected"; rc=0; fi; \
	  echo "=== test phase $$phase: exit $$rc after $$took s"; \
	  [ -n "$$report" ] && echo "$$phase $$rc $$took" >> "$$report/phases.txt"; \
	  [ $$rc = 0 ] || failed=1; \
	done; \
	exit $$failed

lint: venv
	$(BIN)/ruff check sim workloads storage tests
	$(BIN)/ruff format --check sim workloads storage tests

typecheck: venv
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
