"""Scaling of Locust's master/worker mode: the same CPU-bound client mix on 1 and 2 workers.

The client mix is a pure-CPU fake transaction: ``spin`` runs a fixed Python loop (about
``--work`` iterations of integer arithmetic, ~0.2 ms) and completes without touching any
target, so a session costs CPU in its own process only and holds the GIL while it works. One
worker process can therefore use at most one core for its sessions, whatever their number;
two workers can use two. Every configuration runs the same total sessions for the same time:

* ``plain``  — ``dbsim run`` without Locust (one process, the engine alone): the reference;
* ``w1``     — ``dbsim run --workers 1``: Locust master + 1 worker with every session;
* ``w2``     — ``dbsim run --workers 2``: Locust master + 2 workers, half the sessions each.

Configurations alternate (plain, w1, w2, plain, w1, w2 …) ``--repeat`` times and the medians
are reported, because the machine is shared and single runs scatter. Each run is a fresh
process: ``python bench/locust_scaling.py one <config>`` (registers the bench workload, then
runs), and its workers are started as ``python bench/locust_scaling.py worker --master …`` so
that they know the bench workload too. Results: ``bench/results/locust_scaling-<time>.json``
and a table on stdout. See bench/README.md.

    .venv/bin/python bench/locust_scaling.py --duration 15 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from sim import registry  # noqa: E402
from sim.protocols import Connection, EngineContext, Target, Workload  # noqa: E402
from sim.sql import Statement  # noqa: E402

RESULTS = Path(__file__).parent / "results"
CONFIGS = ("plain", "w1", "w2")
TARGET_RATIO = 1.8  # w2 ops/s ÷ w1 ops/s, at least
RUN_TIMEOUT_S = 600
CPU_PREFIX = "bench-process-cpu "


# --------------------------------------------------------------------------- the CPU mix


class NullSettings(BaseModel):
    """A target that is nothing: the transactions never leave the client."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["null"] = "null"


class NullConnection(Connection):
    async def close(self) -> None:
        return None


class NullTarget(Target):
    kind: ClassVar[str] = "null"
    dialect: ClassVar[str] = "null"
    paramstyle: ClassVar[str] = "qmark"

    def __init__(self, settings: BaseModel) -> None:
        self.settings = settings

    async def open(self, context: EngineContext) -> None:
        return None

    async def connect(self) -> Connection:
        return NullConnection()

    async def close(self) -> None:
        return None

    def storage_paths(self) -> list[Path]:
        return []

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind}


class CpuParameters(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    work: int = Field(default=4000, ge=1, description="Loop iterations per transaction.")


async def spin(work: int) -> int:
    """One transaction: pure Python CPU work, no await inside (the GIL is held throughout)."""
    acc = 0
    for i in range(work):
        acc = (acc + i * i) % 1_000_003
    return acc


class CpuSession:
    def __init__(self, work: int) -> None:
        self.work = work

    def next_transaction(self) -> tuple[str, Awaitable[Any]]:
        return "spin", spin(self.work)


class CpuWorkload(Workload):
    """``spin``: a fixed amount of client CPU per transaction, nothing else."""

    name: ClassVar[str] = "cpu"
    parameters_model: ClassVar[type[BaseModel]] = CpuParameters
    needs: ClassVar[str] = "null"

    def operations(self) -> Mapping[str, float]:
        return {"spin": 100.0}

    def default_sessions(self) -> int:
        return 4

    async def load(self, progress: Any) -> dict[str, Any]:
        return {"built": False}

    async def verify(self) -> dict[str, Any]:
        return {}

    def statement_inventory(self) -> list[Statement]:
        return []

    def new_session(self, index: int, connection: Connection, seed: int) -> CpuSession:
        assert isinstance(self.parameters, CpuParameters)
        return CpuSession(self.parameters.work)

    async def drop(self) -> list[str]:
        return []


def register() -> None:
    """Make the bench workload and target known to this process (before any scenario)."""
    registry.register_target(
        registry.TargetEntry("null", NullSettings, NullTarget, "nothing (bench only)")
    )
    registry.register_workload(
        registry.WorkloadEntry("cpu", CpuWorkload, "pure-CPU fake transaction (bench only)")
    )


# --------------------------------------------------------------------------- one run


def scenario_data(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    return {
        "name": "locust-scaling",
        "target": {"kind": "null"},
        "workload": {"name": "cpu", "parameters": {"work": args.work}},
        "load": {"sessions": args.sessions, "duration_s": args.duration, "warmup_s": args.warmup},
        "collectors": {"enabled": ["host"]},
        "output": {"directory": str(out)},
    }


def run_one(config: str, args: argparse.Namespace) -> int:
    """One configuration in this (fresh) process; prints the bundle path (stdout) and this
    process's own CPU time (stderr: the master's, for a Locust run)."""
    started = time.monotonic()
    try:
        return _run_one(config, args)
    finally:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        line = {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": time.monotonic() - started}
        sys.stderr.write(f"{CPU_PREFIX}{json.dumps(line)}\n")


def _run_one(config: str, args: argparse.Namespace) -> int:
    register()
    from sim.config.resolve import validate

    scenario = validate(scenario_data(args, Path(args.out)))
    if config == "plain":
        from sim.core.loops import new_event_loop
        from sim.run.finish import finish_summary
        from sim.run.runner import prepare_run

        loop = new_event_loop()
        prepared = prepare_run(scenario)
        try:
            loop.run_until_complete(prepared.engine.run())
        finally:
            loop.close()
            summary = finish_summary(prepared)
        print(prepared.bundle.path)
        return 0 if summary["status"] == "completed" else 3
    from sim.locust.distributed import run_distributed

    workers = int(config[1:])
    command = [sys.executable, str(Path(__file__).resolve())]
    return run_distributed(scenario, workers=workers, quiet=True, worker_command=command)


def run_worker(master: str) -> int:
    register()
    from sim.cli.ui import parse_master
    from sim.locust.app import run_worker as worker

    host, port = parse_master(master)
    return worker(host, port)


# --------------------------------------------------------------------------- the series


def measure(config: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "one", config]
    cmd += ["--sessions", str(args.sessions), "--duration", str(args.duration)]
    cmd += ["--warmup", str(args.warmup), "--work", str(args.work), "--out", str(out)]
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, cwd=ROOT
    )
    if proc.returncode != 0:
        raise SystemExit(f"{config} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    bundle = Path(proc.stdout.strip().splitlines()[-1])
    summary = json.loads((bundle / "summary.json").read_text(encoding="utf-8"))
    spin_op = summary["operations"]["spin"]
    host = summary.get("storage", {}).get("host", {})
    cpu = next(iter(host.values()), {})
    own = [
        json.loads(line[len(CPU_PREFIX) :])
        for line in proc.stderr.splitlines()
        if line.startswith(CPU_PREFIX)
    ]
    master_pct = 100 * own[-1]["cpu_s"] / own[-1]["wall_s"] if own and config != "plain" else None
    sessions_cpu = cpu.get("process_cpu_pct")
    return {
        "config": config,
        "ops_s": spin_op["ops_s"],
        "count": spin_op["count"],
        "p50_us": spin_op.get("p50_us"),
        "p99_us": spin_op.get("p99_us"),
        "host_cpu_busy_pct": cpu.get("cpu_busy_pct"),
        "dbsim_cpu_pct": sessions_cpu,
        # Operations per second of CPU the engine processes got: equal across configurations
        # when the work scales with the CPU available (whatever else runs on the host).
        "ops_per_cpu_s": round(spin_op["ops_s"] / (sessions_cpu / 100), 1)
        if sessions_cpu
        else None,
        "master_cpu_pct": round(master_pct, 1) if master_pct is not None else None,
        "load_avg_before": load_before,
        "wall_s": round(time.monotonic() - started, 1),
        "bundle": str(bundle),
    }


def series(args: argparse.Namespace) -> int:
    RESULTS.mkdir(exist_ok=True)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="locust-scaling-") as tmp:
        for repeat in range(args.repeat):
            for config in CONFIGS:
                result = measure(config, args, Path(tmp))
                result["repeat"] = repeat
                runs.append(result)
                print(
                    f"{config:6} run {repeat + 1}: {result['ops_s']:>9,.0f} ops/s  "
                    f"host {result['host_cpu_busy_pct'] or 0:5.1f} % busy  "
                    f"engine processes {result['dbsim_cpu_pct'] or 0:5.1f} % of a core  "
                    f"{result['ops_per_cpu_s'] or 0:7,.0f} ops per CPU-s  "
                    f"master {result['master_cpu_pct'] or 0:4.1f} %  "
                    f"load {result['load_avg_before']:.1f}",
                    flush=True,
                )
    medians = {c: statistics.median(r["ops_s"] for r in runs if r["config"] == c) for c in CONFIGS}
    ratio = medians["w2"] / medians["w1"] if medians["w1"] else 0.0
    per_cpu = {
        c: statistics.median(r["ops_per_cpu_s"] or 0 for r in runs if r["config"] == c)
        for c in CONFIGS
    }
    pairs = [
        b["ops_s"] / a["ops_s"]
        for a, b in zip(
            (r for r in runs if r["config"] == "w1"),
            (r for r in runs if r["config"] == "w2"),
            strict=True,
        )
    ]
    report = {
        "bench": "locust_scaling",
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpus": os.cpu_count(),
        "settings": vars(args),
        "medians_ops_s": medians,
        "ratio_w2_w1": round(ratio, 3),
        "ratio_w2_w1_per_repeat": [round(p, 3) for p in pairs],
        "median_ops_per_cpu_s": per_cpu,
        "ratio_w1_plain": round(medians["w1"] / medians["plain"], 3) if medians["plain"] else None,
        "target_ratio": TARGET_RATIO,
        "runs": runs,
    }
    path = RESULTS / f"locust_scaling-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print()
    print("| config | median ops/s | vs plain | median ops per CPU-s | per-run ops/s |")
    print("|---|---|---|---|---|")
    for config in CONFIGS:
        each = " ".join(f"{r['ops_s']:,.0f}" for r in runs if r["config"] == config)
        versus = medians[config] / medians["plain"] if medians["plain"] else 0
        print(
            f"| {config} | {medians[config]:,.0f} | {versus:.2f} | {per_cpu[config]:,.0f} | {each} |"
        )
    verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
    each_ratio = " ".join(f"{p:.2f}" for p in pairs)
    print(
        f"\n2 workers ÷ 1 worker: {ratio:.2f} (target ≥ {TARGET_RATIO}: {verdict}; per repeat "
        f"{each_ratio}); {path}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["worker"]:  # started by the master: worker --master HOST:PORT
        return run_worker(argv[argv.index("--master") + 1])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", default="series", choices=("series", "one"))
    parser.add_argument("config", nargs="?", choices=CONFIGS)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--duration", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--work", type=int, default=4000, help="loop iterations per transaction")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(RESULTS / "bundles"))
    args = parser.parse_args(argv)
    if args.mode == "one":
        return run_one(args.config, args)
    return series(args)


if __name__ == "__main__":
    if sys.argv[1:2] in (["one"], ["worker"]) and sys.argv[2:3] != ["plain"]:
        import sim.locust  # noqa: F401  (gevent patches this process before anything else)
    sys.exit(main())
