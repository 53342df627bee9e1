"""``dbsim run --workers 2`` on data not yet loaded, N times in a row (issue #13).

Each attempt gets a fresh target — a new SQLite file, a new PostgreSQL table prefix (dropped
after with ``dbsim drop``) or a new EDA tree — and must end with exit 0, one load
(``distributed.loading.loads == 1``, the loader ``built``), the merged counts equal to the sum
of the workers' own reports and ``mix.exact``. Figures per attempt and a summary go to
``bench/results/load_once-<target>.json`` and stdout; a failed attempt's stderr is kept beside.

    .venv/bin/python bench/load_once.py --target sqlite --times 10
    .venv/bin/python bench/load_once.py --target postgres --times 10
    .venv/bin/python bench/load_once.py --target eda --times 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
RUN_TIMEOUT_S = 300.0
REPORT_PREFIX = "dbsim-worker-report "
PG = {"kind": "postgres", "host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}


def scenario(target: str, work: Path) -> dict[str, Any]:
    load: dict[str, Any] = {"duration_s": 2, "sessions": 4, "warmup_s": 0}
    if target == "sqlite":
        return {
            "name": "load-once",
            "target": {"kind": "sqlite", "path": str(work / "shared.sqlite")},
            "workload": {"name": "slob"},
            "load": load,
        }
    if target == "postgres":
        prefix = f"lo{uuid.uuid4().hex[:8]}_"
        return {
            "name": "load-once",
            "target": PG,
            "workload": {"name": "slob", "parameters": {"table_prefix": prefix}},
            "load": load,
        }
    return {
        "name": "load-once",
        "target": {"kind": "filetree", "path": str(work / "eda")},
        "workload": {
            "name": "eda",
            "parameters": {
                "component": "EDA_BLENDED",
                "job_sets": 1,
                "backend": {"file_size_bytes": "256K"},
            },
        },
        "load": {**load, "mode": "open", "rate_ops_s": 300},
    }


def dbsim(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBSIM_")}
    return subprocess.run(
        [sys.executable, "-m", "sim.locust", *args],
        cwd=work,
        env={**env, "TMPDIR": str(work)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def worker_sums(stderr: str) -> dict[str, int]:
    sums: dict[str, int] = {}
    for line in stderr.splitlines():
        if line.startswith(REPORT_PREFIX):
            for op, v in json.loads(line[len(REPORT_PREFIX) :])["operations"].items():
                sums[op] = sums.get(op, 0) + v["count"] + v["errors"]
    return {op: n for op, n in sums.items() if n}


def attempt(target: str, work: Path) -> dict[str, Any]:
    path = work / "scenario.json"
    path.write_text(json.dumps(scenario(target, work)), encoding="utf-8")
    started = time.monotonic()
    try:
        proc = dbsim(work, "run", str(path), "--workers", "2", "-o", str(work / "runs"), "--json")
    finally:
        if target == "postgres":
            dbsim(work, "drop", str(path))
    row: dict[str, Any] = {"rc": proc.returncode, "wall_s": round(time.monotonic() - started, 2)}
    try:
        summary = json.loads(proc.stdout)
    except ValueError:
        summary = {}
    loading = (summary.get("distributed") or {}).get("loading") or {}
    counts = {
        op: v["count"] + v["errors"]
        for op, v in (summary.get("operations") or {}).items()
        if v["count"] + v["errors"]
    }
    row.update(
        status=summary.get("status"),
        loads=loading.get("loads"),
        built=[loader.get("built") for loader in loading.get("loaders", [])],
        load_s=[loader.get("load_s") for loader in loading.get("loaders", [])],
        exact=(summary.get("mix") or {}).get("exact"),
        counts_equal=bool(counts) and counts == worker_sums(proc.stderr),
        ops=sum(counts.values()),
    )
    row["ok"] = (
        row["rc"] == 0
        and row["status"] == "completed"
        and row["loads"] == 1
        and row["built"] == [True]
        and row["exact"] is True
        and row["counts_equal"]
    )
    if not row["ok"]:
        failure = RESULTS / f"load_once-{target}-failure-{uuid.uuid4().hex[:6]}.stderr"
        failure.write_text(proc.stderr, encoding="utf-8")
        row["stderr"] = str(failure)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=["sqlite", "postgres", "eda"], default="sqlite")
    parser.add_argument("--times", type=int, default=10)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in range(args.times):
        with tempfile.TemporaryDirectory(prefix="dbsim-load-once-") as tmp:
            row = attempt(args.target, Path(tmp))
        rows.append(row)
        print(f"{args.target} #{n + 1}: {json.dumps(row)}", flush=True)
    ok = sum(r["ok"] for r in rows)
    out = {
        "target": args.target,
        "times": args.times,
        "ok": ok,
        "median_wall_s": round(statistics.median(r["wall_s"] for r in rows), 2),
        "attempts": rows,
    }
    (RESULTS / f"load_once-{args.target}.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"{args.target}: {ok}/{args.times} ok, median {out['median_wall_s']} s per run")
    return 0 if ok == args.times else 1


if __name__ == "__main__":
    sys.exit(main())
