"""dbsim's point lookups on MariaDB against ``sysbench oltp_point_select``, and the drivers.

Both tools send the identical statement, ``SELECT c FROM sbtest1 WHERE id = ?`` with a random
id, to the same table (sysbench's own ``sbtest1``, built by ``sysbench oltp_point_select
prepare`` and removed by its ``cleanup`` at the end), with the same number of sessions, for
the same time, alternating sysbench → dbsim ``--repeat`` times; medians are reported.

* sysbench: ``--point-selects=1`` so an event is one statement; ``--threads`` = sessions;
  server-side prepared statements (its default). Client CPU from ``getrusage(RUSAGE_CHILDREN)``.
* dbsim: the engine with the MySQL target and a bench-only point-lookup workload (SLOB's read
  is a range), once per ``--runners`` entry (``native``: Connector/C's prepared statements in
  storage/targets/native/marialoop.c; ``loop``: asyncmy on the event loop); client CPU from
  ``getrusage(RUSAGE_SELF)`` over the measured stage.

``--drivers`` also measures the candidate drivers bare (each session on its own connection,
no engine), at 4 and 8 sessions: asyncmy and aiomysql (a coroutine per session) and pyodbc
with Debian's odbc-mariadb (a thread per session).
Results: ``bench/results/mariadb_bench-<time>.json`` and a table. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pgbench_slob import _median, cpu_figures, dbsim, on_uvloop  # type: ignore[import-not-found]
from point_workload import PointParameters, PointWorkload  # type: ignore[import-not-found]

from storage.targets.mysql import MysqlSettings, MysqlTarget

RESULTS = Path(__file__).parent / "results"
POINT_SQL = "SELECT c FROM sbtest1 WHERE id = %s"


def sysbench_command(args: argparse.Namespace, action: str) -> list[str]:
    return [
        "sysbench", "oltp_point_select", f"--mysql-host={args.host}", f"--mysql-port={args.port}",
        f"--mysql-user={args.user}", f"--mysql-db={args.database}", "--tables=1",
        f"--table-size={args.rows}", f"--threads={args.sessions}", f"--time={args.duration}",
        "--point-selects=1", "--report-interval=0", action,
    ]  # fmt: skip


def sysbench(args: argparse.Namespace) -> dict[str, Any]:
    command = sysbench_command(args, "run")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"sysbench failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    reads = int(re.search(r"read:\s+(\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    seconds = float(re.search(r"total time:\s+([\d.]+)s", done.stdout).group(1))  # type: ignore[union-attr]
    latency = re.search(r"avg:\s+([\d.]+)", done.stdout)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {
        "ops": reads,
        "ops_s": reads / seconds,
        **cpu_figures(reads, user, system),
        "latency_ms": float(latency.group(1)) if latency else None,
        "command": " ".join(command),
    }


def bare_driver(args: argparse.Namespace, driver: str, sessions: int) -> dict[str, Any]:
    """``sessions`` coroutines, each on its own connection, looping the point select."""

    async def main() -> dict[str, Any]:
        if driver == "asyncmy":
            import asyncmy as module
        else:
            import aiomysql as module  # type: ignore[no-redef]
        settings = {"host": args.host, "port": args.port, "user": args.user, "db": args.database}
        conns = [await module.connect(**settings, autocommit=True) for _ in range(sessions)]
        stop = time.perf_counter() + args.duration
        counts = [0] * sessions

        async def session(index: int, conn: Any) -> None:
            draw = random.Random(index).randint
            async with conn.cursor() as cursor:
                while time.perf_counter() < stop:
                    await cursor.execute(POINT_SQL, (draw(1, args.rows),))
                    await cursor.fetchone()
                    counts[index] += 1

        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await asyncio.gather(*(session(i, c) for i, c in enumerate(conns)))
        after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
        for conn in conns:
            conn.close()
        ops = sum(counts)
        user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
        return {"ops": ops, "ops_s": ops / elapsed, **cpu_figures(ops, user, system)}

    return on_uvloop(main())


def bare_pyodbc(args: argparse.Namespace, sessions: int) -> dict[str, Any]:
    """``sessions`` threads, each on its own pyodbc connection (Debian's odbc-mariadb)."""
    import threading

    import pyodbc

    text = (
        f"DRIVER={{{args.odbc_driver}}};SERVER={args.host};PORT={args.port};"
        f"DATABASE={args.database};UID={args.user};"
    )
    conns = [pyodbc.connect(text, autocommit=True) for _ in range(sessions)]
    counts = [0] * sessions
    stop = time.perf_counter() + args.duration

    def session(index: int) -> None:
        draw = random.Random(index).randint
        cursor = conns[index].cursor()
        while time.perf_counter() < stop:
            cursor.execute(POINT_SQL.replace("%s", "?"), (draw(1, args.rows),))
            cursor.fetchone()
            counts[index] += 1

    threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
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


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("ops_s", "cpu_us_per_op", "user_us_per_op", "sys_us_per_op")
    return {k: _median([r[k] for r in runs]) for k in keys} | {"runs": len(runs)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--user", default="root")
    parser.add_argument("--database", default="test")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--rows", type=int, default=100_000, help="sbtest1 rows")
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runners", default="native,loop", help="dbsim's session runners")
    parser.add_argument("--drivers", action="store_true", help="also the bare drivers, 4 and 8")
    parser.add_argument("--odbc-driver", default="MariaDB Unicode", help="for --drivers")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prepare = subprocess.run(sysbench_command(args, "prepare"), capture_output=True, text=True)
    if prepare.returncode != 0:
        raise SystemExit(f"sysbench prepare failed: {prepare.stderr}{prepare.stdout}")
    runners = args.runners.split(",")
    report: dict[str, Any] = {"args": vars(args), "sysbench": [], "drivers": {}}
    report |= {f"dbsim_{runner}": [] for runner in runners}
    try:
        for _ in range(args.repeat):
            report["sysbench"].append(sysbench(args))
            for runner in runners:  # alternating with sysbench in every repeat
                settings = MysqlSettings(host=args.host, port=args.port, user=args.user)
                target = MysqlTarget(settings)
                workload = PointWorkload(PointParameters(sql=POINT_SQL, rows=args.rows), target)
                report[f"dbsim_{runner}"].append(dbsim(args, workload, target, runner))
            if args.drivers:
                for sessions in (4, 8):
                    for driver in ("asyncmy", "aiomysql", "pyodbc"):
                        runs = report["drivers"].setdefault(f"{driver}@{sessions}", [])
                        if driver == "pyodbc":
                            runs.append(bare_pyodbc(args, sessions))
                        else:
                            runs.append(bare_driver(args, driver, sessions))
    finally:
        subprocess.run(sysbench_command(args, "cleanup"), capture_output=True, check=False)
    medians = {
        "sysbench": summarise(report["sysbench"]),
        **{f"dbsim_{r}": summarise(report[f"dbsim_{r}"]) for r in runners},
        **{name: summarise(runs) for name, runs in report["drivers"].items()},
    }
    report["medians"] = medians
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"mariadb_bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"{'client':<16} {'ops/s':>10} {'CPU µs/op':>10} {'user':>7} {'sys':>7}")
    for name, m in medians.items():
        print(
            f"{name:<16} {m['ops_s']:>10,.0f} {m['cpu_us_per_op']:>10.1f} "
            f"{m['user_us_per_op']:>7.1f} {m['sys_us_per_op']:>7.1f}"
        )
    for runner in runners:
        m = medians[f"dbsim_{runner}"]
        ratio = m["ops_s"] / medians["sysbench"]["ops_s"]
        cpu = m["cpu_us_per_op"] / medians["sysbench"]["cpu_us_per_op"]
        print(f"dbsim ({runner}) / sysbench: ops/s {ratio:.3f}, CPU per op {cpu:.2f}")
    print(f"measured, medians of {args.repeat} alternating runs: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
