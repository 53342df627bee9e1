"""What ``dbsim capture`` costs the host it watches: CPU per sampled second and memory over a
long capture (issue #26: under 1 % of one core at 1 s sampling, memory flat).

The capture runs as a child process (``dbsim capture … --duration D``); every ``--every``
seconds this script reads, from outside, the CPU time (``utime + stime`` of
``/proc/<pid>/stat``) and resident memory (``VmRSS``) of the capture process and of each of
its children (the block-latency collector's ``bpftrace``), and the bundle's own
``summary.json`` (``intervals_written``, ``capture.own``). Per window of ``--window`` seconds
it reports the CPU the capture used per second of capture, in ms and as a share of one core,
and the resident memory at the window's end, so a growth shows as a trend. The first window
holds the start-up (imports, bpftrace compiling its program); the steady state is the rest.
Figures go to ``bench/results/capture_cost-<stamp>.json`` and a table to stdout.

    .venv/bin/python bench/capture_cost.py --duration 1800 -- --path /tmp \\
        --target-kind postgres --host 127.0.0.1 --user postgres --database postgres
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def proc_status_kb(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                found += [int(w) for w in (task / "children").read_text().split()]
            except OSError:
                continue
    except OSError:
        pass
    return sorted(set(found))


def reading(pid: int, bundle_root: Path, t0: float) -> dict[str, Any]:
    kids = children(pid)
    summary: dict[str, Any] = {}
    bundles = sorted(bundle_root.glob("*/summary.json"))
    if bundles:
        try:
            summary = json.loads(bundles[-1].read_text())
        except (OSError, ValueError):
            summary = {}
    return {
        "t": round(time.monotonic() - t0, 3),
        "cpu_s": proc_cpu_s(pid),
        "children_cpu_s": sum(proc_cpu_s(k) for k in kids),
        "rss_kB": proc_status_kb(pid, "VmRSS"),
        "children_rss_kB": sum(proc_status_kb(k, "VmRSS") for k in kids),
        "children": len(kids),
        "intervals": summary.get("intervals_written", 0),
        "own": (summary.get("capture") or {}).get("own"),
    }


def windows(readings: list[dict[str, Any]], window_s: float) -> list[dict[str, Any]]:
    """CPU per second of capture and memory per window, from the outside readings."""
    rows: list[dict[str, Any]] = []
    start = readings[0]
    for r in readings[1:]:
        if r["t"] - start["t"] < window_s and r is not readings[-1]:
            continue
        seconds = r["t"] - start["t"]
        cpu = (r["cpu_s"] + r["children_cpu_s"]) - (start["cpu_s"] + start["children_cpu_s"])
        child = r["children_cpu_s"] - start["children_cpu_s"]
        rows.append(
            {
                "from_s": round(start["t"]),
                "to_s": round(r["t"]),
                "intervals": r["intervals"] - start["intervals"],
                "cpu_ms_per_s": round(1000 * cpu / seconds, 2),
                "cpu_pct_of_core": round(100 * cpu / seconds, 3),
                "children_cpu_ms_per_s": round(1000 * child / seconds, 2),
                "rss_kB": r["rss_kB"],
                "children_rss_kB": r["children_rss_kB"],
            }
        )
        start = r
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=1800.0)
    parser.add_argument("--every", type=float, default=10.0, help="outside readings, s")
    parser.add_argument("--window", type=float, default=300.0, help="table rows, s")
    parser.add_argument("capture_args", nargs="*", help="after --: dbsim capture's options")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="capture-cost-"))
    command = [
        str(REPO / ".venv" / "bin" / "dbsim"), "capture", *args.capture_args,
        "--duration", str(args.duration), "-o", str(out), "--quiet",
    ]  # fmt: skip
    t0 = time.monotonic()
    # stderr to a file: a pipe nobody reads while the capture runs would fill and block it.
    log = (out / "capture.stderr").open("w+")
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
    readings = [reading(child.pid, out, t0)]
    while child.poll() is None:
        time.sleep(args.every)
        if child.poll() is None:
            readings.append(reading(child.pid, out, t0))
    stdout, _ = child.communicate()
    log.seek(0)
    stderr = log.read()
    bundle = Path(stdout.strip()) if stdout.strip() else None
    summary = json.loads((bundle / "summary.json").read_text()) if bundle else {}
    table = windows(readings, args.window)
    result = {
        "command": command,
        "exit_code": child.returncode,
        "stderr": stderr[-2000:],
        "bundle": str(bundle),
        "own_final": (summary.get("capture") or {}).get("own"),
        "intervals_written": summary.get("intervals_written"),
        "sources": sorted(summary.get("storage") or {}),
        "windows": table,
        "readings": readings,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"capture_cost-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"exit {child.returncode}; bundle {bundle}; sources {', '.join(result['sources'])}")
    print(f"capture.own at the end: {result['own_final']}")
    print("from_s  to_s  intervals  CPU ms/s  % core  bpftrace ms/s  RSS kB  children RSS kB")
    for w in table:
        print(
            f"{w['from_s']:>6} {w['to_s']:>5} {w['intervals']:>10} {w['cpu_ms_per_s']:>9} "
            f"{w['cpu_pct_of_core']:>7} {w['children_cpu_ms_per_s']:>14} {w['rss_kB']:>7} "
            f"{w['children_rss_kB']:>16}"
        )
    print(f"figures: {path}")
    return 0 if child.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
