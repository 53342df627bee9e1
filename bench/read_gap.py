"""Where the 64 KiB two-session O_DIRECT read's time goes between reads (issue #33).

Alternates, ``--repeat`` times: fio psync with its jobs as threads (``--thread``, as dbsim's
sessions are threads of one process) reading **dbsim's own two files**, then dbsim's native
loop (2 sessions, the EDA back-end's seq_read, closed loop) — and, with ``--before
CHECKOUT``, the same dbsim run from another checkout (built in place: ``python setup.py
build_ext --inplace``), so a change is compared on the same files in the same minutes.

With ``--trace`` every run is watched by ``bench/pread_gap.bt`` (bpftrace, root): per read,
the user-space gap between a thread's pread64 return and its next pread64, the time in
pread64, and every other system call of the reading threads. The gap is the client's own
time per read, independent of the disk's noise; its tail (> 16 µs) is the batch hand-overs
and a pass's reopen. Results: ``bench/results/read_gap-<time>.json`` (+ the bpftrace outputs
beside it) and a summary. See bench/README.md, issue #33's section.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PARAMS = {
    "component": "EDA_BACKEND",
    "backend": {"processes_per_job_set": 2, "files_per_dir": 1, "dirs": 1,
                "file_size_bytes": "10M", "mix": {"seq_read": 100}},
    "transfer_size_bytes": "64k",
    "direct_io": True,
}  # fmt: skip


def traced(pid: int, out: Path | None) -> subprocess.Popen[bytes] | None:
    if out is None:
        return None
    with out.open("w") as sink:
        tracer = subprocess.Popen(["bpftrace", str(HERE / "pread_gap.bt"), str(pid)],
                                  stdout=sink, stderr=subprocess.DEVNULL)  # fmt: skip
    time.sleep(2)  # bpftrace attaches its probes
    return tracer


def stop(tracer: subprocess.Popen[bytes] | None) -> None:
    if tracer is not None:
        tracer.send_signal(signal.SIGINT)
        tracer.wait()


def dbsim_run(repo: Path, tree: Path, seconds: float, trace: Path | None) -> None:
    """In a child process: one dbsim run of the code at ``repo``; prints its figures."""
    sys.path[:0] = [str(repo), str(repo / "bench")]
    import eda_bench

    from storage.targets import fileloop
    from workloads.eda.parameters import EdaParameters

    assert str(fileloop.__file__).startswith(str(repo)), fileloop.__file__
    params = EdaParameters.model_validate(PARAMS)
    if not tree.exists():
        tree.mkdir(parents=True)
        eda_bench.build(tree, params)
    tracer = traced(os.getpid(), trace)
    figures = eda_bench.dbsim(tree, params, 2, seconds, "native")
    stop(tracer)
    print(json.dumps(figures))


def dbsim(repo: Path, args: argparse.Namespace, trace: Path | None) -> dict[str, Any]:
    command = [sys.executable, __file__, "--dbsim-run", str(repo), "--tree", str(args.tree),
               "--duration", str(args.duration)] + (["--trace-to", str(trace)] if trace else [])  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=repo)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def fio(args: argparse.Namespace, trace: Path | None) -> dict[str, Any]:
    """fio psync, a job per dbsim file, jobs as threads of one process."""
    files = sorted(p for p in args.tree.rglob("file_*") if p.stat().st_size == 10 * 2**20)
    command = ["fio", "--thread", "--rw=read", "--bs=64k", "--direct=1", "--ioengine=psync",
               "--size=10m", "--time_based", f"--runtime={int(args.duration)}", "--ramp_time=1",
               "--group_reporting", "--output-format=json"]  # fmt: skip
    for i, path in enumerate(files[:2]):
        command += [f"--name=read{i}", f"--filename={path}"]
    before = os.times()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    tracer = traced(child.pid, trace)
    out, _ = child.communicate()
    stop(tracer)
    after = os.times()
    job = json.loads(out)["jobs"][0]["read"]
    cpu = (
        after.children_user - before.children_user + after.children_system - before.children_system
    )
    return {"mib_s": job["bw_bytes"] / 2**20, "latency_us": job["clat_ns"]["mean"] / 1e3,
            "ops": job["total_ios"], "cpu_us_per_op_with_ramp": 1e6 * cpu / job["total_ios"]}  # fmt: skip


def parse_trace(path: Path) -> dict[str, Any]:
    """pread_gap.bt's output: its counters and the gap histogram ({bucket's low ns: n})."""
    scale = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
    found: dict[str, Any] = {"gap_hist": {}, "other_syscalls": {}}
    section = ""
    for line in path.read_text().splitlines():
        if m := re.match(r"@(\w+)(?:\[(\d+)\])?: ?(\d+)?\s*$", line):
            section = m.group(1)
            if m.group(2) is not None:
                found[section][int(m.group(2))] = int(m.group(3))
            elif m.group(3) is not None:
                found[section] = int(m.group(3))
        elif section == "gap_ns" and (b := re.match(r"\[(\d+)(\w?), \S+\)\s+(\d+)", line)):
            found["gap_hist"][int(b.group(1)) * scale[b.group(2)]] = int(b.group(3))
    return found


def summarise_traces(paths: list[Path]) -> dict[str, Any]:
    total: collections.Counter[str] = collections.Counter()
    hist: collections.Counter[int] = collections.Counter()
    other: collections.Counter[int] = collections.Counter()
    for path in paths:
        one = parse_trace(path)
        hist.update(one.pop("gap_hist"))
        other.update(one.pop("other_syscalls"))
        total.update({k: v for k, v in one.items() if isinstance(v, int)})
    reads = max(total["reads"], 1)
    busy = total["in_read_sum_ns"] + total["gap_sum_ns"]
    return {
        "reads": total["reads"],
        "gap_us_per_read": total["gap_sum_ns"] / reads / 1e3,
        "in_pread_us_per_read": total["in_read_sum_ns"] / reads / 1e3,
        "long_gaps_per_1000_reads": 1000 * total["long_n"] / reads,
        "long_gap_us_per_read": total["long_sum_ns"] / reads / 1e3,
        "long_gap_share_pct": 100 * total["long_sum_ns"] / max(busy, 1),
        "short_gap_us": (total["gap_sum_ns"] - total["long_sum_ns"])
        / max(total["reads"] - total["long_n"], 1)
        / 1e3,
        "gap_hist": dict(sorted(hist.items())),
        "other_syscalls_per_1000_reads": {k: 1000 * v / reads for k, v in sorted(other.items())},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, required=True, help="dbsim's tree (built if absent)")
    parser.add_argument("--before", type=Path, help="another built checkout to alternate with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--duration", type=float, default=4.0)
    parser.add_argument("--trace", action="store_true", help="watch every run with pread_gap.bt")
    parser.add_argument("--dbsim-run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trace-to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dbsim_run is not None:
        dbsim_run(args.dbsim_run, args.tree, args.duration, args.trace_to)
        return 0
    stamp = time.strftime("%Y%m%d-%H%M%S")
    repos = {"dbsim": HERE.parent, **({"dbsim_before": args.before} if args.before else {})}
    if not args.tree.exists():
        dbsim(HERE.parent, argparse.Namespace(tree=args.tree, duration=1.0), None)
    report: dict[str, Any] = {"loadavg_before": os.getloadavg(), "runs": [], "traces": {}}
    for n in range(args.repeat):
        for tool in ("fio", *repos):
            trace = RESULTS / f"read_gap-{stamp}-{tool}-{n}.txt" if args.trace else None
            load = os.getloadavg()[0]
            run = fio(args, trace) if tool == "fio" else dbsim(repos[tool], args, trace)
            report["runs"].append({"tool": tool, "repeat": n, "load1": load, **run})
            print(n, tool, f"{run['mib_s']:.1f} MiB/s", f"load {load:.2f}", flush=True)
    report["loadavg_after"] = os.getloadavg()
    for tool in ("fio", *repos):
        mib = statistics.median(r["mib_s"] for r in report["runs"] if r["tool"] == tool)
        print(f"{tool}: median {mib:.1f} MiB/s")
        if args.trace:
            paths = sorted(RESULTS.glob(f"read_gap-{stamp}-{tool}-*.txt"))
            report["traces"][tool] = summary = summarise_traces(paths)
            print("  " + json.dumps({k: v for k, v in summary.items() if k != "gap_hist"}))
            print("  gap histogram (bucket's low ns: reads):", summary["gap_hist"])
    out = RESULTS / f"read_gap-{stamp}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
