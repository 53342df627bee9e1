"""pgbench's select-only statement (``pgbench -S``) through dbsim's ``sql`` workload, against
the bare driver loop and pgbench itself, on pgbench's own table, in one run.

Per repeat, alternating: pgbench (``-S``'s statement as a custom script, ``-M prepared -n``),
dbsim's engine with the ``sql`` workload (the statement of examples/pgbench-select-only.yaml)
and bare asyncpg (8 coroutines, ``PreparedStatement.fetch`` — the call the workload makes,
every row fetched — and ``fetchval`` as bench/pgbench_slob.py's floor). Medians printed; the
figures to bench/results/pgbench_sql-<time>.json. The table is never written: make it with
``pgbench -i -s N DATABASE`` (a database of yours) and pass ``--database`` and ``--scale``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pgbench_slob import RESULTS, _median, asyncpg_floor, dbsim, pgbench

from storage.targets.postgres import PostgresTarget
from storage.targets.settings import PostgresSettings
from workloads.sql.parameters import SqlParameters
from workloads.sql.workload import SqlUserWorkload

SELECT = "SELECT abalance FROM pgbench_accounts WHERE aid = {}"
#: dbsim's sql workload ÷ the bare driver loop making the same call, at least (issue #31).
TARGET_VS_DRIVER = 0.95


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--database", required=True, help="where pgbench -i put its tables")
    parser.add_argument("--scale", type=int, default=1, help="pgbench -i's -s")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="pgbench -j")
    parser.add_argument("--duration", type=int, default=10, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = 100_000 * args.scale
    settings = PostgresSettings(host=args.host, port=args.port, user=args.user,
                                database=args.database)  # fmt: skip
    params = SqlParameters.model_validate({"statements": [{
        "name": "select_only", "weight": 1, "read_only": True, "sql": SELECT.format(":aid"),
        "params": {"aid": {"uniform": [1, rows]}}}]})  # fmt: skip
    script = "\\set aid random(1, :scale)\n" + SELECT.format(":aid") + ";\n"
    sql = SELECT.format("$1")
    runs: list[dict[str, Any]] = []
    for _ in range(args.repeat):
        run = {"pgbench": pgbench(args, script, rows)}
        workload = SqlUserWorkload(params, PostgresTarget(settings))
        run["dbsim_sql"] = dbsim(args, workload, workload.target)
        run["asyncpg_fetch"] = asyncpg_floor(args, sql, lambda r: (r.randint(1, rows),), "fetch")
        run["asyncpg_fetchval"] = asyncpg_floor(args, sql, lambda r: (r.randint(1, rows),))
        runs.append(run)
        print("  " + ", ".join(f"{tool} {r['ops_s']:,.0f}/s" for tool, r in run.items()),
              file=sys.stderr)  # fmt: skip
    median = {tool: _median([r[tool]["ops_s"] for r in runs]) for tool in runs[0]}
    cpu = {tool: _median([r[tool]["cpu_us_per_op"] for r in runs]) for tool in runs[0]}
    ratio = median["dbsim_sql"] / median["asyncpg_fetch"]  # type: ignore[operator]
    # Run by run (the two ran one after the other): steadier than the ratio of the medians
    # when other jobs share the host; and the client CPU per op, steadier still.
    paired = _median([r["dbsim_sql"]["ops_s"] / r["asyncpg_fetch"]["ops_s"] for r in runs])
    cpu_ratio = cpu["dbsim_sql"] / cpu["asyncpg_fetch"]  # type: ignore[operator]
    report = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "settings": vars(args),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "median_ops_s": median, "median_cpu_us_per_op": cpu,
        "sql_vs_driver": ratio, "target_sql_vs_driver": TARGET_VS_DRIVER,
        "sql_vs_driver_paired_median": paired, "cpu_per_op_sql_vs_driver": cpu_ratio,
        "sql_vs_pgbench": median["dbsim_sql"] / median["pgbench"],  # type: ignore[operator]
        "runs": runs,
    }  # fmt: skip
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"pgbench_sql-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"pgbench -S statement, {rows:,} rows, {args.sessions} sessions, {args.duration} s "
          f"per run, medians of {args.repeat} (measured):")  # fmt: skip
    for tool in median:
        print(f"  {tool:17} {median[tool]:>9,.0f} ops/s  {cpu[tool]:6.1f} µs CPU/op")
    print(
        f"  sql workload / bare driver loop (fetch): {ratio:.3f} "
        f"(target ≥ {TARGET_VS_DRIVER}); / pgbench: {report['sql_vs_pgbench']:.3f}"
    )
    print(f"  run by run (median of the {args.repeat} ratios): {paired:.3f}; client CPU per "
          f"op, sql workload / bare driver loop: {cpu_ratio:.3f}")  # fmt: skip
    print(f"written: {path}")
    return 0 if ratio >= TARGET_VS_DRIVER else 1


if __name__ == "__main__":
    raise SystemExit(main())
