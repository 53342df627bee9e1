"""dbsim's ODBC sessions, native loop against pyodbc, and the bare driver (issue #33).

A point lookup, ``SELECT c FROM <table> WHERE id = ?`` with a random id, on a cached table of
its own (``--rows`` rows, built at the start and dropped at the end), through each ODBC
driver that runs here: psqlODBC ("PostgreSQL Unicode") on PostgreSQL and MariaDB
Connector/ODBC ("MariaDB Unicode") on MariaDB. Per server and repeat, alternating:

* dbsim, once per ``--runners`` entry (``native``: storage/targets/native/odbcloop.c over
  unixODBC; ``threads``: pyodbc on a thread per session), the engine with ``kind: odbc`` and a
  bench-only point-lookup workload; client CPU from ``getrusage(RUSAGE_SELF)`` over the
  measured stage;
* the bare driver: pyodbc, a thread per session on its own connection, no engine (what any
  pyodbc client pays); client CPU over the run.

Medians of ``--repeat``; ``bench/results/odbc_bench-<time>.json`` and a table. No SQL Server
here: the same loop serves ``kind: sqlserver``, never measured. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pgbench_slob import _median, cpu_figures, dbsim  # type: ignore[import-not-found]
from point_workload import PointParameters, PointWorkload  # type: ignore[import-not-found]

from storage.targets.settings import OdbcSettings

RESULTS = Path(__file__).parent / "results"
#: server -> (ODBC driver, dialect, port, user).
SERVERS = {
    "postgres": ("PostgreSQL Unicode", "postgres", 5432, "postgres"),
    "mariadb": ("MariaDB Unicode", "mysql", 3306, "root"),
}
TABLE = "odbc_bench_point"
POINT_SQL = f"SELECT c FROM {TABLE} WHERE id = ?"


def connection_string(server: str) -> str:
    driver, _, port, user = SERVERS[server]
    return f"DRIVER={{{driver}}};SERVER=127.0.0.1;PORT={port};DATABASE=test;UID={user};"


def build_table(server: str, rows: int) -> None:
    """The table, its rows and a read of every row (cached before the first run)."""
    import pyodbc

    with contextlib.closing(pyodbc.connect(connection_string(server), autocommit=True)) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")
        c.execute(f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, c VARCHAR(120) NOT NULL)")
        # The rows made by the server (its own series), 120 characters each.
        if server == "postgres":
            source = (f"SELECT g, lpad(g::text, 20, '0') || repeat('x', 100) "
                      f"FROM generate_series(1, {rows}) g")  # fmt: skip
        else:  # MariaDB's sequence engine
            source = (
                f"SELECT seq, CONCAT(LPAD(seq, 20, '0'), REPEAT('x', 100)) FROM seq_1_to_{rows}"
            )
        c.execute(f"INSERT INTO {TABLE} (id, c) {source}")
        c.execute(f"SELECT count(c) FROM {TABLE}").fetchall()


def drop_table(server: str) -> None:
    import pyodbc

    with contextlib.closing(pyodbc.connect(connection_string(server), autocommit=True)) as c:
        c.execute(f"DROP TABLE IF EXISTS {TABLE}")


def bare_pyodbc(server: str, args: argparse.Namespace) -> dict[str, Any]:
    """``--sessions`` threads, each on its own pyodbc connection, looping the lookup."""
    import pyodbc

    conns = [pyodbc.connect(connection_string(server), autocommit=True)
             for _ in range(args.sessions)]  # fmt: skip
    counts = [0] * args.sessions
    stop = time.perf_counter() + args.duration

    def session(index: int) -> None:
        draw = random.Random(index).randint
        cursor = conns[index].cursor()
        while time.perf_counter() < stop:
            cursor.execute(POINT_SQL, (draw(1, args.rows),))
            cursor.fetchone()
            counts[index] += 1

    threads = [threading.Thread(target=session, args=(i,)) for i in range(args.sessions)]
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
    for conn in conns:
        conn.close()
    ops = sum(counts)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"ops": ops, "ops_s": ops / elapsed, **cpu_figures(ops, user, system)}


def dbsim_odbc(server: str, args: argparse.Namespace, runner: str) -> dict[str, Any]:
    """The engine on ``kind: odbc``; ``threads`` is pyodbc's runner (DBSIM_ODBCLOOP=0 is not
    needed: the runner asked is the runner used, or the run stops)."""
    from storage.targets.odbc import OdbcTarget

    driver, dialect, port, user = SERVERS[server]
    settings = OdbcSettings(driver=driver, dialect=dialect, port=port, database="test", user=user)
    target = OdbcTarget(settings)
    workload = PointWorkload(PointParameters(sql=POINT_SQL, rows=args.rows), target)
    figures = dbsim(args, workload, target, runner)
    if figures["session_runner"] != ("native" if runner == "native" else "threads"):
        raise SystemExit(f"dbsim ran {figures['session_runner']}, not {runner}")
    if figures["errors"]:
        raise SystemExit(f"dbsim {runner} on {server}: {figures['errors']} errors")
    return dict(figures)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("ops_s", "cpu_us_per_op", "user_us_per_op", "sys_us_per_op")
    return {k: _median([r[k] for r in runs]) for k in keys} | {"runs": len(runs)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="postgres,mariadb")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--duration", type=int, default=8, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runners", default="native,threads", help="dbsim's session runners")
    args = parser.parse_args(argv)
    for name, known in (("servers", SERVERS), ("runners", ("native", "threads"))):
        bad = [v for v in getattr(args, name).split(",") if v not in known]
        if bad:
            parser.exit(2, f"odbc_bench: --{name}: unknown {', '.join(bad)}\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    servers, runners = args.servers.split(","), args.runners.split(",")
    report: dict[str, Any] = {"args": vars(args), "loadavg_start": os.getloadavg(), "runs": {}}
    for server in servers:
        build_table(server, args.rows)
        try:
            for _ in range(args.repeat):  # alternating: every client once per repeat
                for runner in runners:
                    key = f"{server}/dbsim_{runner}"
                    report["runs"].setdefault(key, []).append(dbsim_odbc(server, args, runner))
                key = f"{server}/bare_pyodbc"
                report["runs"].setdefault(key, []).append(bare_pyodbc(server, args))
        finally:
            drop_table(server)
    report["loadavg_end"] = os.getloadavg()
    medians = {name: summarise(runs) for name, runs in report["runs"].items()}
    report["medians"] = medians
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"odbc_bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"{'client':<28} {'ops/s':>10} {'CPU µs/op':>10} {'user':>7} {'sys':>7}")
    for name, m in medians.items():
        print(f"{name:<28} {m['ops_s']:>10,.0f} {m['cpu_us_per_op']:>10.1f} "
              f"{m['user_us_per_op']:>7.1f} {m['sys_us_per_op']:>7.1f}")  # fmt: skip
    for server in servers:
        bare = medians[f"{server}/bare_pyodbc"]
        for runner in runners:
            m = medians[f"{server}/dbsim_{runner}"]
            print(f"{server}: dbsim {runner} / bare pyodbc: ops/s "
                  f"{m['ops_s'] / bare['ops_s']:.2f}, CPU per op "
                  f"{m['cpu_us_per_op'] / bare['cpu_us_per_op']:.2f}")  # fmt: skip
    print(f"load average {report['loadavg_start']} -> {report['loadavg_end']}; medians of "
          f"{args.repeat} alternating runs: {path}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
