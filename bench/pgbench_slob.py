"""dbsim against pgbench on the same PostgreSQL, table, statement and number of sessions.

Two cases, each run by both tools for the same time with the same sessions:

* ``slob_read``: SLOB's read, ``SELECT COUNT(c2) FROM t WHERE custid > r-W AND custid < r``
  with WORK_UNIT W (64 by default): dbsim runs its own SLOB workload (update_pct 0), pgbench a
  custom script sending the identical statement, both as prepared statements.
* ``point``: ``SELECT COUNT(c2) FROM t WHERE custid = r``, a single-row lookup, where the
  client's cost per operation weighs most. SLOB's read cannot express it (WORK_UNIT ≥ 3 means
  a range of at least two rows), so dbsim runs it through a minimal bench-only workload
  (:class:`PointLookupWorkload`) on the same engine, target and connection code.

dbsim runs once per runner in ``--runners`` (``native``: the libpq loop of
storage/targets/native/pgloop.c; ``loop``: asyncpg on the event loop, the Python fallback),
alternating with pgbench in every repeat; the targets are judged on the first runner.

Client CPU per operation: pgbench's from ``getrusage(RUSAGE_CHILDREN)`` around its process,
dbsim's from ``getrusage(RUSAGE_SELF)`` over the measured stage (engine, workload, driver, and
every session thread).
Results: ``bench/results/pgbench_slob-<time>.json`` and a table. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from point_workload import PointParameters, PointWorkload  # type: ignore[import-not-found]

from sim.config.scenario import Load
from sim.core.engine import Engine
from sim.core.loops import new_event_loop
from sim.protocols import EngineContext, Target, Workload
from sim.sql import quote_identifier
from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from workloads.slob.parameters import SlobParameters
from workloads.slob.workload import SlobWorkload

T = TypeVar("T")
RESULTS = Path(__file__).parent / "results"
# Issue #33: dbsim ops/s ÷ pgbench ops/s at least this, client CPU per op ÷ pgbench's at most.
TARGETS = {"slob_read": 0.95, "point": 0.95}
CPU_RATIO_MAX = 1.2
FIGURES = ("ops_s", "cpu_us_per_op", "user_us_per_op", "sys_us_per_op", "latency_ms")


# --------------------------------------------------------------------------- point lookups


def point_sql(table: str) -> str:
    quoted = quote_identifier("postgres", table)
    return f"SELECT COUNT(c2) FROM {quoted} WHERE custid = $1"


# --------------------------------------------------------------------------- the two tools


def cpu_figures(ops: int, user: float, system: float) -> dict[str, float]:
    """CPU seconds in total and microseconds per operation, user and system apart."""
    total = user + system
    return {
        "cpu_s": total,
        "cpu_us_per_op": total / ops * 1e6,
        "user_us_per_op": user / ops * 1e6,
        "sys_us_per_op": system / ops * 1e6,
    }


def on_uvloop(main: Awaitable[T]) -> T:
    """Run ``main`` on a new uvloop loop, as the CLI runs the engine."""
    loop = new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


@dataclass(frozen=True)
class Case:
    """One statement as each tool runs it."""

    script: str  # pgbench custom script
    workload: Callable[[], Workload]  # dbsim
    sql: str  # bare asyncpg, with its parameters drawn by ``draw``
    draw: Callable[[random.Random], tuple[int, ...]]


def pgbench(args: argparse.Namespace, script: str, rows: int) -> dict[str, Any]:
    """Run pgbench with ``script``; its ops/s (excluding connection time) and CPU per op."""
    with tempfile.NamedTemporaryFile("w", suffix=".pgbench", delete=False) as handle:
        handle.write(script)
    command = [
        "pgbench", "-h", args.host, "-p", str(args.port), "-U", args.user, "-n", "-M", "prepared",
        "-c", str(args.sessions), "-j", str(args.threads), "-T", str(args.duration),
        "-D", f"scale={rows}", "-f", handle.name, args.database,
    ]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(handle.name).unlink()
    if done.returncode != 0:
        raise SystemExit(f"pgbench failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    ops = int(re.search(r"actually processed: (\d+)", done.stdout).group(1))  # type: ignore[union-attr]
    tps = float(re.search(r"tps = ([\d.]+) \(without", done.stdout).group(1))  # type: ignore[union-attr]
    latency = re.search(r"latency average = ([\d.]+) ms", done.stdout)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {
        "ops": ops,
        "ops_s": tps,
        **cpu_figures(ops, user, system),
        "latency_ms": float(latency.group(1)) if latency else None,
        "command": " ".join(command),
    }


def dbsim(
    args: argparse.Namespace, workload: Workload, target: Target, runner: str = "auto"
) -> dict[str, Any]:
    """Run dbsim's engine in this process; ops/s over the measured stage and CPU per op.
    ``native:N``: the native loop with N sessions per thread (DBSIM_PGLOOP_GROUP)."""
    runner, _, per_thread = runner.partition(":")
    if per_thread:
        os.environ["DBSIM_PGLOOP_GROUP"] = per_thread
    else:
        os.environ.pop("DBSIM_PGLOOP_GROUP", None)
    load = Load(sessions=args.sessions, duration_s=args.duration, seed=11,
                session_runner=cast(Any, runner))  # fmt: skip
    engine = Engine(workload, target, load, skip_load=True)
    marks: dict[str, resource.struct_rusage] = {}

    def on_state(state: str, detail: str = "") -> None:
        if state in ("measure", "stopping"):  # the measured stage's edges, on the loop
            marks[state] = resource.getrusage(resource.RUSAGE_SELF)

    engine.events.state.add_listener(on_state)
    result = on_uvloop(engine.run())
    if result.outcome != "completed":
        raise SystemExit(f"dbsim run {result.outcome}: {result.error}")
    if runner == "native" and result.session_runner != "native":
        raise SystemExit(f"dbsim: not on the native loop: {result.session_runner_why}")
    totals = engine.recorder.totals
    ops = sum(s.count for s in totals.values())
    errors = sum(s.error_count for s in totals.values())
    first, last = marks["measure"], marks["stopping"]
    user, system = last.ru_utime - first.ru_utime, last.ru_stime - first.ru_stime
    mean_us = sum(s.count * s.row().get("mean_us", 0) for s in totals.values()) / max(ops, 1)
    return {
        "ops": ops,
        "errors": errors,
        "ops_s": ops / result.measured_s,
        **cpu_figures(ops, user, system),
        "latency_ms": mean_us / 1000 if mean_us else None,
        "measured_s": result.measured_s,
        "session_runner": result.session_runner,
    }


def asyncpg_floor(
    args: argparse.Namespace,
    sql: str,
    draw: Callable[[random.Random], tuple[int, ...]],
    call: str = "fetchval",
) -> dict[str, Any]:
    """The same statement from bare asyncpg coroutines (``PreparedStatement.fetchval`` on
    uvloop, no engine): what any asyncpg client pays. dbsim minus this is the share of the
    engine and the workload (less what PostgresConnection's fast path saves)."""
    import asyncpg

    async def main() -> dict[str, Any]:
        kwargs = {"host": args.host, "port": args.port, "user": args.user}
        conns = [
            await asyncpg.connect(database=args.database, **kwargs) for _ in range(args.sessions)
        ]
        counts = [0] * len(conns)
        running = True

        async def session(index: int, conn: Any) -> None:
            prepared = await conn.prepare(sql)
            fetch = getattr(prepared, call)  # bench/pgbench_sql.py: "fetch", all rows
            rng = random.Random(index)
            while running:
                await fetch(*draw(rng))
                counts[index] += 1

        tasks = [asyncio.ensure_future(session(i, c)) for i, c in enumerate(conns)]
        await asyncio.sleep(0.5)  # every session prepared and running
        first = sum(counts)
        before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        await asyncio.sleep(args.duration)
        after, elapsed = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - started
        ops = sum(counts) - first
        running = False
        await asyncio.gather(*tasks)
        for conn in conns:
            await conn.close()
        user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
        return {
            "ops": ops,
            "ops_s": ops / elapsed,
            **cpu_figures(ops, user, system),
            "latency_ms": None,
        }

    return on_uvloop(main())


# --------------------------------------------------------------------------- set-up and report


def with_open(target: Target, work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        with concurrent.futures.ThreadPoolExecutor(1) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                return await work()
            finally:
                await target.close()

    return on_uvloop(main())


OPTIONS: tuple[tuple[str, type, Any, str], ...] = (
    ("--host", str, "127.0.0.1", ""),
    ("--port", int, 5432, ""),
    ("--user", str, "postgres", ""),
    ("--database", str, "test", ""),
    ("--sessions", int, 8, "sessions (pgbench -c)"),
    ("--threads", int, 2, "pgbench -j"),
    ("--duration", int, 20, "seconds per run"),
    ("--scale", str, "80M", "SLOB scale: rows or a size (1536M: the SLOB method here)"),
    ("--work-unit", int, 64, "SLOB WORK_UNIT"),
    ("--repeat", int, 1, "runs per tool and case (the medians are reported)"),
    ("--cases", str, "slob_read,point", ""),
    ("--prefix", str, "pgbench", "SLOB table_prefix"),
    ("--runners", str, "native,loop", "dbsim's session runners (the first is judged)"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for flag, kind, default, help_text in OPTIONS:
        parser.add_argument(flag, type=kind, default=default, help=help_text or None)
    parser.add_argument("--keep", action="store_true", help="keep the table for the next run")
    parser.add_argument("--floor", action="store_true", help="also run bare asyncpg")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = PostgresSettings(host=args.host, port=args.port, user=args.user,
                                database=args.database)  # fmt: skip
    params = SlobParameters(scale=args.scale, work_unit=args.work_unit, update_pct=0,
                            table_prefix=args.prefix, load_batch_rows=20_000)  # fmt: skip
    slob = SlobWorkload(params, PostgresTarget(settings))
    rows, table = params.scale_rows, slob.table_name(1)
    started = time.perf_counter()
    loaded = with_open(slob.target, lambda: slob.load(lambda *_: None))
    print(f"table {table}: {rows:,} rows, {'loaded' if loaded['tables'][0]['built'] else 'kept'}"
          f" in {time.perf_counter() - started:.1f} s", file=sys.stderr)  # fmt: skip
    w = args.work_unit
    cases: dict[str, Case] = {
        "slob_read": Case(
            f"\\set r random({w + 1}, :scale - {w})\n"
            f"SELECT COUNT(c2) FROM {table} WHERE custid > :r - {w} AND custid < :r;\n",
            lambda: SlobWorkload(params, PostgresTarget(settings)),
            slob.render("read", table=table).sql,
            lambda rng: (lambda r: (r - w, r))(rng.randint(w + 1, rows - w)),
        ),
        "point": Case(
            f"\\set r random(1, :scale)\nSELECT COUNT(c2) FROM {table} WHERE custid = :r;\n",
            lambda: PointWorkload(
                PointParameters(sql=point_sql(table), rows=rows, param="r"),
                PostgresTarget(settings),
            ),
            point_sql(table),
            lambda rng: (rng.randint(1, rows),),
        ),
    }
    report: dict[str, Any] = {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "settings": vars(args),
                              "rows": rows, "table": table, "cases": {},
                              "loadavg_before": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    try:
        for name in args.cases.split(","):
            case = cases[name]
            runs = []
            for _ in range(args.repeat):
                run = {"pgbench": pgbench(args, case.script, rows)}
                for number, runner in enumerate(args.runners.split(",")):
                    workload = case.workload()
                    key = "dbsim" if number == 0 else f"dbsim_{runner}"
                    run[key] = dbsim(args, workload, workload.target, runner)
                if args.floor:
                    run["asyncpg"] = asyncpg_floor(args, case.sql, case.draw)
                runs.append(run)
                print("  " + name + ": " + ", ".join(f"{tool} {r['ops_s']:,.0f}/s"
                      for tool, r in run.items()), file=sys.stderr)  # fmt: skip
            report["cases"][name] = summarise(name, runs)
    finally:
        if not args.keep:
            with_open(slob.target, slob.drop)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"pgbench_slob-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print_table(report)
    print(f"\nwritten: {path}")
    return 0 if all(c["meets_targets"] for c in report["cases"].values()) else 1


def _median(values: list[Any]) -> float | None:
    if any(v is None for v in values):
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def summarise(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the repeats, the ratios and whether the targets are met."""
    figures: dict[str, dict[str, Any]] = {
        tool: {key: _median([r[tool][key] for r in runs]) for key in FIGURES} for tool in runs[0]
    }
    for tool in figures:
        if tool.startswith("dbsim"):
            figures[tool]["session_runner"] = runs[0][tool]["session_runner"]
    ops_ratio = figures["dbsim"]["ops_s"] / figures["pgbench"]["ops_s"]
    cpu_ratio = figures["dbsim"]["cpu_us_per_op"] / figures["pgbench"]["cpu_us_per_op"]
    return {
        **figures,
        "ops_ratio": ops_ratio,
        "cpu_per_op_ratio": cpu_ratio,
        "target_ops_ratio": TARGETS[name],
        "target_cpu_ratio": CPU_RATIO_MAX,
        "meets_targets": ops_ratio >= TARGETS[name] and cpu_ratio <= CPU_RATIO_MAX,
        "runs": runs,
    }


def print_table(report: dict[str, Any]) -> None:
    s = report["settings"]
    print(f"\n{report['table']}: {report['rows']:,} rows; {s['sessions']} sessions, "
          f"{s['duration']} s per run, median of {s['repeat']}; load average before: "
          f"{report['loadavg_before']}")  # fmt: skip
    header = ("case", "pgbench ops/s", "dbsim ops/s", "ratio", "pgbench CPU µs/op (user+sys)",
              "dbsim CPU µs/op (user+sys)", "CPU ratio", "targets")  # fmt: skip
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")

    def cpu(f: dict[str, Any]) -> str:
        return f"{f['cpu_us_per_op']:.1f} ({f['user_us_per_op']:.1f}+{f['sys_us_per_op']:.1f})"

    for name, c in report["cases"].items():
        cells = (name, f"{c['pgbench']['ops_s']:,.0f}", f"{c['dbsim']['ops_s']:,.0f}",
                 f"{c['ops_ratio']:.3f} (≥ {c['target_ops_ratio']})", cpu(c["pgbench"]),
                 cpu(c["dbsim"]), f"{c['cpu_per_op_ratio']:.2f} (≤ {c['target_cpu_ratio']})",
                 "met" if c["meets_targets"] else "MISSED")  # fmt: skip
        print("| " + " | ".join(cells) + " |")
    for name, c in report["cases"].items():
        for tool in c:
            if tool.startswith("dbsim_"):
                ratio = c[tool]["ops_s"] / c["pgbench"]["ops_s"]
                cpu_ratio = c[tool]["cpu_us_per_op"] / c["pgbench"]["cpu_us_per_op"]
                print(f"{tool}, {name}: {c[tool]['ops_s']:,.0f} ops/s ({ratio:.3f} x pgbench),"
                      f" CPU µs/op {cpu(c[tool])} ({cpu_ratio:.2f} x)")  # fmt: skip
        if "asyncpg" in c:
            print(f"bare asyncpg, {name}: {c['asyncpg']['ops_s']:,.0f} ops/s, CPU µs/op "
                  f"{cpu(c['asyncpg'])}")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
