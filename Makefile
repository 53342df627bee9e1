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
# kubernetes-client: kubectl, whose `kubectl kustomize` renders deploy/kubernetes/ in
# tests/unit/test_kubernetes_manifests.py; a kubectl already on PATH from another package
# (Google Cloud SDK's, which owns /usr/bin/kubectl and would collide with Debian's) stands in.
# libpq-dev: libpq's headers, for the native PostgreSQL session loop (setup.py, optional);
# libmariadb-dev: MariaDB Connector/C's, for the native MariaDB session loop (the same).
# unixodbc-dev: unixODBC's, for the native ODBC session loop (the same); odbc-mariadb: MariaDB's ODBC driver,
# so the ODBC tests run against MariaDB as well as PostgreSQL (psqlODBC, odbc-postgresql).
TEST_DEB_PACKAGES := sysstat unixodbc odbc-postgresql chromium nfs-common fio bpftrace prometheus fuse3 sysbench faketime kubernetes-client libpq-dev libmariadb-dev unixodbc-dev odbc-mariadb

.PHONY: run test test-long test-explore test-stressed test-servers venv install-project system-packages lint typecheck bench clean

$(BIN)/dbsim: pyproject.toml setup.py storage/targets/native/fileloop.c storage/targets/native/pgloop.c storage/targets/native/pgloop.h storage/targets/native/pggroup.c storage/targets/native/pack.h storage/targets/native/batch.h storage/targets/native/marialoop.c storage/targets/native/odbcloop.c
	$(PYTHON) -m venv $(VENV)
	@$(MAKE) --no-print-directory install-project
	@touch $@

# uv (from PyPI) installs the same packages as pip in about half the time (13 s against 28 s
# for the whole venv here, every CI's first minute); it reads none of pip's configuration, so
# the constraints, find-links and indexes pip would use are handed to it. --compile-bytecode
# does what pip does by default: with PYTHONDONTWRITEBYTECODE set (it is on this machine),
# every process of the suite would otherwise compile the libraries it imports again.
# --index-strategy unsafe-best-match picks, as pip does, the newest release across all indexes
# (uv's default takes a package from the first index that has it: here an extra index of older
# releases, which installed an older mypy that failed the type check).
# Where uv cannot be had, pip installs.
install-project:
	@if $(BIN)/pip install --quiet uv >/dev/null 2>&1; then \
	  opts=""; \
	  for key in constraint find-links index-url extra-index-url; do \
	    values="$$($(BIN)/pip config get "global.$$key" 2>/dev/null)"; \
	    [ $$key = find-links ] && [ -n "$${PIP_FIND_LINKS:-}" ] && values="$$PIP_FIND_LINKS"; \
	    for value in $$values; do opts="$$opts --$$key $$value"; done; \
	  done; \
	  $(BIN)/uv pip install --python $(BIN)/python --quiet --compile-bytecode --index-strategy unsafe-best-match $$opts -e '.[dev]'; \
	else \
	  $(BIN)/pip install --quiet -e '.[dev]'; \
	fi

venv: $(BIN)/dbsim

run: venv
	$(BIN)/dbsim run

system-packages:
	@missing=""; for p in $(TEST_DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || { [ $$p = kubernetes-client ] && command -v kubectl >/dev/null; } || missing="$$missing $$p"; done; \
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
# are among them), with nothing of phase 1 beside them, on four workers: the device modules
# are six units handed out first, longest first, each run one module after another on one
# worker (tests/support/xdist_scopes.py: the two ground truths together, the lab's short
# ceiling modules together, the replays and the lab's IOPS control one each), beside the other
# timing tests (two units held the phase to 413-463 s, six on four workers 360-370 s). Five
# workers took 301 s but failed a test beside stress-ng (tests/README.md); not yet. Both phases always run;
# make fails if either failed. A phase with nothing selected (pytest's exit 5) is not a failure.
# TEST_REPORT_DIR, when set, receives each phase's JUnit XML and duration (.ci/run reads them).
# Each phase also says how busy the host's CPUs were meanwhile (/proc/stat: user, nice, system,
# irq, softirq and steal, every process's, the database servers' and the kernel's included):
# a phase whose CPUs were busy nearly all its time is bound by CPU work, not by waiting, and only
# less work makes it shorter (tests/README.md, "Where the time goes").
# Steal (the hypervisor running another guest while ours wanted a CPU) is counted busy and also
# printed on its own: a phase with much of it was slowed by the host, not by its own work.
CPU_BUSY_TICKS := awk '/^cpu /{print $$2+$$3+$$4+$$7+$$8+$$9, $$9; exit}' /proc/stat
TEST_WORKERS ?= 8
TIMING_WORKERS ?= 4
TEST_REPORT_DIR ?=
PARALLEL_MARKS := not timing and not long
SERIAL_MARKS := timing and not long

# The tests start dbsim as a child process hundreds of times. Where PYTHONDONTWRITEBYTECODE is
# set (it is on this machine), no process caches the project's compiled modules and each one
# compiles ~130 of them again (~0.4 s a start): compile them once here instead.
# The same holds for pytest's rewriting of the test modules' asserts: every worker of both
# phases collects the whole suite, and rewriting its ~240 modules is two thirds of that
# (9.5 CPU-s of a worker's collection, 3.0 with the rewritten modules cached; phase 1 starts
# 8 workers on 2 CPUs). One collection with bytecode writing on leaves them in
# tests/**/__pycache__, where the workers read them (pytest checks each against its source);
# it runs beside mypy, one CPU each. Its own exit is not judged: a collection error fails
# the phases.
# system-packages comes before venv: the venv's install builds the native session loops
# (setup.py) only against the client libraries' headers present then (libpq-dev, libmariadb-dev);
# on a fresh machine the other order built no MariaDB loop and its tests failed.
test: system-packages venv lint
	$(BIN)/python -m compileall -q -j 0 sim workloads storage tests bench >/dev/null
	@env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest --collect-only -q -p no:cacheprovider >/dev/null 2>&1 & warm=$$!; \
	$(MAKE) --no-print-directory typecheck; rc=$$?; wait $$warm; exit $$rc
	@report="$(TEST_REPORT_DIR)"; failed=0; \
	for phase in parallel serial; do \
	  if [ $$phase = parallel ]; then marks="$(PARALLEL_MARKS)"; opts="-n $(TEST_WORKERS) --dist loadscope"; \
	  else marks="$(SERIAL_MARKS)"; opts="-n $(TIMING_WORKERS) --dist loadscope"; fi; \
	  junit=""; [ -n "$$report" ] && junit="--junitxml=$$report/$$phase.xml"; \
	  echo "=== test phase $$phase: -m '$$marks' $$opts"; \
	  start=$$(date +%s); set -- $$($(CPU_BUSY_TICKS)); busy0=$$1; steal0=$$2; \
	  $(BIN)/python -m pytest $$opts -m "$$marks" $$junit $(PYTEST_ARGS); rc=$$?; \
	  took=$$(( $$(date +%s) - start )); set -- $$($(CPU_BUSY_TICKS)); \
	  busy=$$(( ($$1 - busy0) / $$(getconf CLK_TCK) )); steal=$$(( ($$2 - steal0) / $$(getconf CLK_TCK) )); \
	  if [ $$rc = 5 ]; then echo "=== test phase $$phase: no test selected"; rc=0; fi; \
	  echo "=== test phase $$phase: exit $$rc after $$took s; the host's CPUs busy $$busy s of $$(( took * $$(nproc) )) (stolen by the hypervisor: $$steal s)"; \
	  [ -n "$$report" ] && echo "$$phase $$rc $$took $$busy $$(nproc) $$steal" >> "$$report/phases.txt"; \
	  [ $$rc = 0 ] || failed=1; \
	done; \
	exit $$failed

# Oracle Database Free and SQL Server 2022 for the engine-parametrised tests (issue #28;
# docs/databases.md, "Oracle and SQL Server in the test suite"). The two database services of
# docker/compose.yaml, published on 127.0.0.1 by docker/compose.test-servers.yaml, are started
# and waited for (their healthchecks), prepared (SQL Server's database dbsim, a quota for
# Oracle's user dbsim), tested and taken down (their volumes stay: Oracle's first start takes
# minutes). The passwords are docker/.env's, as compose reads them: TEST_SERVERS_ENV names the
# variables that hold them (..._PASSWORD_ENV), never a value, and nothing here prints one.
# The SQL Server tests also need Microsoft's ODBC Driver 18 on this host (docs/databases.md).
# tests/unit/test_test_servers.py checks these names against tests/support/engines.py.
TEST_SERVERS := oracle sqlserver
TEST_SERVERS_COMPOSE := docker compose -f docker/compose.yaml -f docker/compose.test-servers.yaml
TEST_SERVERS_TESTS := tests/integration/test_engines.py tests/contract
TEST_SERVERS_ENV := \
  DBSIM_TEST_ORACLE_DSN=127.0.0.1:1521/FREEPDB1 \
  DBSIM_TEST_ORACLE_USER=dbsim \
  DBSIM_TEST_ORACLE_PASSWORD_ENV=DBSIM_ORACLE_PASSWORD \
  DBSIM_TEST_SQLSERVER_HOST=127.0.0.1 \
  DBSIM_TEST_SQLSERVER_PORT=1433 \
  DBSIM_TEST_SQLSERVER_DATABASE=dbsim \
  DBSIM_TEST_SQLSERVER_USER=sa \
  DBSIM_TEST_SQLSERVER_PASSWORD_ENV=DBSIM_MSSQL_PASSWORD \
  DBSIM_TEST_SQLSERVER_DRIVER='ODBC Driver 18 for SQL Server'

test-servers:
	@command -v docker >/dev/null 2>&1 || { echo "make test-servers: no docker command (it needs Docker Engine with Compose v2; docs/databases.md)" >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make test-servers: no Docker engine answers (docker info failed: start dockerd, or set DOCKER_HOST)" >&2; exit 1; }
	@[ -f docker/.env ] || { echo "make test-servers: docker/.env is missing (cp docker/.env.example docker/.env; chmod 600; set every value; docs/docker.md)" >&2; exit 1; }
	@$(MAKE) --no-print-directory venv
	@set -a; . ./docker/.env; set +a; \
	down() { $(TEST_SERVERS_COMPOSE) down >/dev/null 2>&1; }; \
	echo "=== test-servers: starting $(TEST_SERVERS), waiting for their healthchecks"; \
	$(TEST_SERVERS_COMPOSE) up -d --wait --wait-timeout 900 $(TEST_SERVERS) \
	  || { echo "make test-servers: $(TEST_SERVERS) did not become healthy (see: $(TEST_SERVERS_COMPOSE) logs)" >&2; down; exit 1; }; \
	printf 'WHENEVER SQLERROR EXIT FAILURE\nALTER SESSION SET CONTAINER = FREEPDB1;\nALTER USER dbsim QUOTA UNLIMITED ON USERS;\nEXIT\n' \
	  | $(TEST_SERVERS_COMPOSE) exec -T oracle sqlplus -s -L / as sysdba >/dev/null \
	  && printf "IF DB_ID('dbsim') IS NULL CREATE DATABASE dbsim;\nGO\n" \
	  | $(TEST_SERVERS_COMPOSE) exec -T sqlserver bash -c \
	    'SQLCMDPASSWORD="$$MSSQL_SA_PASSWORD" /opt/mssql-tools18/bin/sqlcmd -C -S localhost -U sa -b -i /dev/stdin -o /dev/null' \
	  || { echo "make test-servers: preparing the servers failed (Oracle's quota for dbsim, SQL Server's database dbsim)" >&2; down; exit 1; }; \
	env $(TEST_SERVERS_ENV) $(BIN)/python -m pytest -rs $(TEST_SERVERS_TESTS) $(PYTEST_ARGS); rc=$$?; \
	echo "=== test-servers: pytest exit $$rc; taking $(TEST_SERVERS) down"; \
	down; exit $$rc

# The tests marked long (pyproject.toml): a database production with writes captured and
# replayed (tests/integration/test_replay_db_writes.py, ~4 minutes of waiting for the host's
# write-back, more than make test's twelve minutes carry beside its timing phase). Root, alone.
test-long: system-packages venv
	$(BIN)/python -m pytest -m long -p no:cacheprovider $(PYTEST_ARGS)

# The property tests (Hypothesis) with random seeds and HYPOTHESIS_EXPLORE_SCALE (10) times their
# examples: a hunt for latent bugs, run on purpose; make test runs them derandomized
# (tests/README.md, "Property tests: derandomized in CI, explored on purpose").
test-explore: system-packages venv
	HYPOTHESIS_PROFILE=explore $(BIN)/python -m pytest -n 2 -m "not timing and not long" -p no:cacheprovider \
	  $$(grep -rlE "^(from|import) hypothesis" tests/unit tests/integration | sort) $(PYTEST_ARGS)

# Issue #25's load check: the timing phase STRESS_RUNS times in a row with `stress-ng --cpu 2`
# beside it (the whole time, at nice 0, in a session of its own as when started from another
# terminal: under autogroup scheduling a stressor in the tests' own session competes only with
# them, never with the lab's servers), each run's result and time on one line at the end.
# Installs stress-ng (Debian) when root and it is missing: without it there is no check, so it
# fails rather than run unloaded (this session's first "stressed" runs had no stress-ng).
STRESS_RUNS ?= 3
test-stressed: venv
	@command -v stress-ng >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq stress-ng >/dev/null; }
	@command -v stress-ng >/dev/null || { echo "make test-stressed: no stress-ng (apt-get install stress-ng)" >&2; exit 2; }
	@setsid stress-ng --cpu 2 --timeout 4h >/dev/null 2>&1 & sp=$$!; results=""; failed=0; \
	for i in $$(seq $(STRESS_RUNS)); do \
	  kill -0 $$sp 2>/dev/null || { echo "make test-stressed: stress-ng is not running" >&2; exit 2; }; \
	  start=$$(date +%s); \
	  $(BIN)/python -m pytest -n $(TIMING_WORKERS) --dist loadscope -m "$(SERIAL_MARKS)" -p no:cacheprovider -q $(PYTEST_ARGS); rc=$$?; \
	  results="$$results\n=== stressed timing phase $$i: exit $$rc after $$(( $$(date +%s) - start )) s, load $$(cut -d' ' -f1-3 /proc/loadavg)"; \
	  [ $$rc = 0 ] || failed=1; \
	done; kill $$sp; printf '%b\n' "$$results"; exit $$failed

lint: venv
	$(BIN)/ruff check sim workloads storage tests
	$(BIN)/ruff format --check sim workloads storage tests

typecheck: venv
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
