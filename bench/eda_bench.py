"""dbsim's EDA workload against native tools on the same local file tree.

Two cases:

* ``stat``: one session dealing a stat-only front-end mix over a front-end tree (100 data and
  100 empty files), against a minimal C loop of the same ``stat()`` calls over the same paths,
  picked at random the same way, one process each. Compiled here with the system compiler
  (``cc -O2``) into a temporary directory, never kept. Two Python floors separate the costs:
  a bare ``os.stat`` loop (what any Python client pays for the call) and a bare
  ``loop.run_in_executor(os.stat)`` loop (what the hop to a worker thread adds).
* ``stream``: the back-end's sequential reads or writes (one transfer per operation) by N
  sessions, each on its own 10 MiB file, against ``fio --rw=read|write --bs=B --size=10m
  --numjobs=N --ioengine=psync``. Both use O_DIRECT when the file system allows it; otherwise
  page caches are dropped before each read run.

Results: ``bench/results/eda_bench-<time>.json`` and a table. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import queue
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sim.engine import Engine, new_event_loop
from sim.protocols import EngineContext
from sim.scenario import Load
from storage.targets.filetree import FileTreeTarget
from storage.targets.settings import FileTreeSettings
from workloads.eda import tree as layout
from workloads.eda.parameters import EdaParameters
from workloads.eda.workload import EdaWorkload

T = TypeVar("T")
RESULTS = Path(__file__).parent / "results"
TARGETS = {"stat": 0.50, "stream": 0.90}  # dbsim ÷ the native tool, at least
MIB = 2**20

C_STAT = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    /* argv[1]: a file of paths, one a line; argv[2]: seconds */
    FILE *f = fopen(argv[1], "r");
    static char paths[100000][512];
    int n = 0;
    while (n < 100000 && fgets(paths[n], sizeof paths[n], f)) {
        paths[n][strcspn(paths[n], "\n")] = 0;
        n++;
    }
    fclose(f);
    double seconds = atof(argv[2]), start = now(), elapsed = 0;
    unsigned long long x = 88172645463325252ULL, ops = 0, failed = 0;
    struct stat st;
    for (;;) {
        for (int i = 0; i < 1024; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;  /* xorshift64: a random file each call */
            if (stat(paths[x % n], &st) != 0) failed++;
            ops++;
        }
        elapsed = now() - start;
        if (elapsed >= seconds) break;
    }
    printf("{\"ops\": %llu, \"failed\": %llu, \"seconds\": %f}\n", ops, failed, elapsed);
    return failed != 0;
}
"""


# --------------------------------------------------------------------------- helpers


def on_uvloop(main: Awaitable[T]) -> T:
    loop = new_event_loop()
    try:
        return loop.run_until_complete(main)
    finally:
        loop.close()


def with_open(target: FileTreeTarget, work: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        with concurrent.futures.ThreadPoolExecutor(4) as executor:
            await target.open(EngineContext(asyncio.get_running_loop(), executor))
            try:
                return await work()
            finally:
                await target.close()

    return on_uvloop(main())


def build(root: Path, params: EdaParameters) -> EdaWorkload:
    workload = EdaWorkload(params, FileTreeTarget(FileTreeSettings(path=root)))
    with_open(workload.tree_target, lambda: workload.load(lambda *_: None))
    return workload


def dbsim(
    root: Path, params: EdaParameters, sessions: int, seconds: float, runner: str = "auto"
) -> dict[str, Any]:
    """A closed-loop run: ops/s, MiB/s, mean latency and client CPU per op. ``runner``:
    ``load.session_runner`` (threads: a thread per session; loop: a pool hop per operation)."""
    workload = EdaWorkload(params, FileTreeTarget(FileTreeSettings(path=root)))
    load = Load(
        mode="closed",
        sessions=sessions,
        duration_s=seconds,
        warmup_s=0.5,
        seed=1,
        session_runner=runner,
    )
    engine = Engine(workload, workload.target, load, skip_load=True)
    marks: dict[str, Any] = {}

    def on_state(state: str, detail: str = "") -> None:
        if state in ("measure", "stopping"):
            marks[state] = resource.getrusage(resource.RUSAGE_SELF)

    engine.events.state.add_listener(on_state)
    result = on_uvloop(engine.run())
    if result.outcome != "completed":
        raise SystemExit(f"dbsim run {result.outcome}: {result.error}")
    totals = engine.recorder.totals
    ops = sum(s.count for s in totals.values())
    errors = sum(s.error_count for s in totals.values())
    moved = sum(n * workload.mean_bytes_per_op().get(op, 0) for op, n in _counts(totals).items())
    cpu = _cpu(marks["measure"], marks["stopping"])
    mean_us = sum(s.count * s.row().get("mean_us", 0) for s in totals.values()) / max(ops, 1)
    return {
        "ops": ops,
        "errors": errors,
        "ops_s": ops / result.measured_s,
        "mib_s": moved / result.measured_s / MIB,
        "cpu_us_per_op": 1e6 * cpu / max(ops, 1),
        "latency_us": mean_us,
    }


def _counts(totals: dict[str, Any]) -> dict[str, int]:
    return {name: stats.count for name, stats in totals.items()}


def _cpu(first: Any, last: Any) -> float:
    return float(last.ru_utime - first.ru_utime + last.ru_stime - first.ru_stime)


# --------------------------------------------------------------------------- proposed hop


class _Lane:
    """One worker thread fed by a SimpleQueue; results come back by call_soon_threadsafe."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def _work(self) -> None:
        get, loop = self.queue.get, self.loop
        while (item := get()) is not None:
            future, fn, args = item
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting task
                loop.call_soon_threadsafe(_settle, future, None, exc)
            else:
                loop.call_soon_threadsafe(_settle, future, result, None)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


@contextlib.contextmanager
def lanes() -> Iterator[None]:
    """The hop proposed for ``EngineContext.run_blocking``: each calling task (a session) gets
    its own worker thread, so a call costs one queue put and one call_soon_threadsafe instead
    of ThreadPoolExecutor's futures, conditions and idle semaphore, and the worker drops the
    GIL (blocking on its queue) right after handing the result back."""
    original = EngineContext.run_blocking
    made: dict[Any, _Lane] = {}

    def run_blocking(self: EngineContext, fn: Callable[..., Any], *args: Any) -> Any:
        task = asyncio.current_task()
        lane = made.get(task)
        if lane is None:
            lane = made[task] = _Lane(self.loop)
        future = self.loop.create_future()
        lane.queue.put((future, fn, args))
        return future

    EngineContext.run_blocking = run_blocking  # type: ignore[method-assign]
    try:
        yield
    finally:
        EngineContext.run_blocking = original  # type: ignore[method-assign]
        for lane in made.values():
            lane.queue.put(None)
            lane.thread.join()


def dbsim_both(root: Path, params: EdaParameters, sessions: int, seconds: float) -> dict[str, Any]:
    """dbsim as it is (``dbsim``) and with the proposed hop (``dbsim_lanes``)."""
    today = dbsim(root, params, sessions, seconds)
    with lanes():
        proposed = dbsim(root, params, sessions, seconds)
    return {"dbsim": today, "dbsim_lanes": proposed}


# --------------------------------------------------------------------------- stat


def c_stat(binary: Path, list_file: Path, seconds: float) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([str(binary), str(list_file), str(seconds)], capture_output=True,
                          text=True, check=True)  # fmt: skip
    figures = json.loads(done.stdout)
    cpu = _cpu(before, resource.getrusage(resource.RUSAGE_CHILDREN))
    return {
        "ops_s": figures["ops"] / figures["seconds"],
        "cpu_us_per_op": 1e6 * cpu / figures["ops"],
    }


def python_stat(paths: list[str], seconds: float) -> dict[str, Any]:
    """The floor of any Python client: os.stat in a bare loop, random files."""
    rng, ops, stat = random.Random(1), 0, os.stat
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        for _ in range(1024):
            stat(paths[rng.randrange(len(paths))])
        ops += 1024
        if time.perf_counter() >= deadline:
            return {"ops_s": ops / (time.perf_counter() - started)}


def executor_stat(paths: list[str], seconds: float) -> dict[str, Any]:
    """The floor of one pool hop per call: ``await run_in_executor(os.stat)`` on uvloop."""

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        rng, ops = random.Random(1), 0
        with concurrent.futures.ThreadPoolExecutor(5) as executor:
            started = time.perf_counter()
            while time.perf_counter() - started < seconds:
                await loop.run_in_executor(executor, os.stat, paths[rng.randrange(len(paths))])
                ops += 1
            return {"ops_s": ops / (time.perf_counter() - started)}

    return on_uvloop(main())


def stat_case(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    params = EdaParameters.model_validate(
        {
            "component": "EDA_FRONTEND",
            "frontend": {"processes_per_job_set": 1, "mix": {"stat": 100}},
        }
    )
    root = work / "stat"
    workload = build(root, params)
    tree = workload.trees[0]
    paths = layout.tree_of(root, tree)
    files = paths["data"] + paths["empty"]
    list_file = work / "paths.txt"
    list_file.write_text("\n".join(files) + "\n")
    source, binary = work / "stat.c", work / "stat_loop"
    source.write_text(C_STAT)
    subprocess.run(["cc", "-O2", "-o", str(binary), str(source)], check=True)
    runs = []
    for _ in range(args.repeat):
        runs.append(
            {
                "c": c_stat(binary, list_file, args.duration),
                **dbsim_both(root, params, 1, args.duration),
                "python_os_stat": python_stat(files, args.duration),
                "python_executor": executor_stat(files, args.duration),
            }
        )
    return runs


# --------------------------------------------------------------------------- streaming


def direct_io_works(directory: Path) -> bool:
    probe = directory / ".direct-probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | getattr(os, "O_DIRECT", 0), 0o644)
        os.close(fd)
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def fio(
    args: argparse.Namespace, rw: str, bs: str, directory: Path, direct: bool
) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [
        "fio", f"--name=eda-{rw}", f"--rw={rw}", f"--bs={bs}", "--size=10m",
        f"--numjobs={args.jobs}", f"--directory={directory}", "--ioengine=psync",
        f"--direct={int(direct)}", "--time_based", f"--runtime={int(args.duration)}",
        "--ramp_time=1", "--group_reporting", "--output-format=json",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    job = json.loads(done.stdout)["jobs"][0]["read" if rw == "read" else "write"]
    cpu = _cpu(before, resource.getrusage(resource.RUSAGE_CHILDREN))
    ops = job["total_ios"]
    return {"mib_s": job["bw_bytes"] / MIB, "ops_s": job["iops"],
            "cpu_us_per_op": 1e6 * cpu / max(ops, 1), "latency_us": job["clat_ns"]["mean"] / 1e3}  # fmt: skip


def stream_case(args: argparse.Namespace, work: Path, rw: str, bs: str) -> list[dict[str, Any]]:
    root, fio_dir = work / f"stream-{bs}", work / "fio"
    fio_dir.mkdir(exist_ok=True)
    direct = direct_io_works(work)
    op = "seq_read" if rw == "read" else "seq_write"
    params = EdaParameters.model_validate(
        {
            "component": "EDA_BACKEND",
            "backend": {
                "processes_per_job_set": args.jobs,
                "files_per_dir": 1,
                "dirs": 1,
                "file_size_bytes": "10M",
                "mix": {op: 100},
            },
            "transfer_size_bytes": bs,
            "direct_io": direct,
        }
    )
    build(root, params)
    runs = []
    for _ in range(args.repeat):
        if rw == "read" and not direct:
            drop_caches()
        reference = fio(args, rw, bs, fio_dir, direct)
        if rw == "read" and not direct:
            drop_caches()
        runs.append({"fio": reference, **dbsim_both(root, params, args.jobs, args.duration),
                     "direct_io": direct})  # fmt: skip
    return runs


# --------------------------------------------------------------------------- report


def median(runs: list[dict[str, Any]], tool: str, key: str) -> float:
    return statistics.median(r[tool][key] for r in runs)


def _verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "MISSED"


def summarise(report: dict[str, Any]) -> list[tuple[str, ...]]:
    """Table rows (and ``report["ratios"]``): dbsim today and with the proposed hop."""
    rows: list[tuple[str, ...]] = []
    target = TARGETS["stat"]
    if "stat" in report["cases"]:
        runs = report["cases"]["stat"]
        c = median(runs, "c", "ops_s")
        for tool, label in (("dbsim", "dbsim"), ("dbsim_lanes", "dbsim, proposed hop"),
                            ("python_os_stat", "floor: bare os.stat loop"),
                            ("python_executor", "floor: bare run_in_executor loop")):  # fmt: skip
            d = median(runs, tool, "ops_s")
            ratio = d / c
            report["ratios"][f"stat/{tool}"] = ratio
            verdict = f"≥ {target}: {_verdict(ratio, target)}" if tool.startswith("dbsim") else ""
            rows.append((f"stat, 1 process: {label}", f"C loop {c:,.0f} ops/s",
                         f"{d:,.0f} ops/s", f"{ratio:.3f}", verdict))  # fmt: skip
    target = TARGETS["stream"]
    for key, runs in report["cases"].items():
        if key == "stat":
            continue
        rw, bs = key.split("/")
        f = median(runs, "fio", "mib_s")
        for tool, label in (("dbsim", "dbsim"), ("dbsim_lanes", "dbsim, proposed hop")):
            d = median(runs, tool, "mib_s")
            ratio = d / f
            report["ratios"][f"{key}/{tool}"] = ratio
            rows.append((f"seq {rw}, {report['settings']['jobs']} jobs, bs {bs}: {label}",
                         f"fio {f:,.1f} MiB/s", f"{d:,.1f} MiB/s", f"{ratio:.3f}",
                         f"≥ {target}: {_verdict(ratio, target)}"))  # fmt: skip
    return rows


def print_table(rows: list[tuple[str, ...]], report: dict[str, Any]) -> None:
    s = report["settings"]
    print(f"\n{s['duration']} s per run, median of {s['repeat']}; direct I/O: "
          f"{report.get('direct_io')}; load average before: {report['loadavg_before']}")  # fmt: skip
    header = ("case", "reference", "dbsim", "ratio", "target")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="stat,read,write", help="stat, read, write")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool (medians)")
    parser.add_argument("--jobs", type=int, default=2, help="streaming sessions = fio numjobs")
    parser.add_argument("--block-sizes", default="64k,1m", help="transfer sizes (fio --bs)")
    parser.add_argument("--dir", type=Path, default=None, help="where the trees go (a temp dir)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for tool, package in (("cc", "gcc"), ("fio", "fio")):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found (apt-get install -y {package})")
    work = Path(tempfile.mkdtemp(prefix="eda-bench-", dir=args.dir))
    report: dict[str, Any] = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
        "direct_io": direct_io_works(work),
        "cases": {},
        "ratios": {},
    }
    try:
        cases = args.cases.split(",")
        if "stat" in cases:
            report["cases"]["stat"] = stat_case(args, work)
        for bs in args.block_sizes.lower().split(","):
            for rw in ("read", "write"):
                if rw in cases:
                    report["cases"][f"{rw}/{bs}"] = stream_case(args, work, rw, bs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = summarise(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"eda_bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print_table(rows, report)
    print(f"results: {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
