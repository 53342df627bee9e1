"""dbsim's native file loop and fio psync reading **at the same time**, counted over one common
window by the kernel (issue #33: the 64 KiB two-session O_DIRECT sequential read).

Why at the same time: on this VM's virtio disk a 4 s run of the same tool on the same files
moves by ±10 % from one run to the next (bench/README.md), so runs taken one after the other
cannot resolve a client difference of 1-2 %. Read side by side, both tools meet the same disk
at the same moment — whatever it does, it does to both — and each reader keeps one request in
flight, so each tool's reads per second are 1 / (the disk's time per read + the tool's own time
between reads). The ratio of their counts is then the client's difference, not the disk's.

Per pair: two dbsim trees of two 10 MiB files each (the EDA back-end's ``seq_read`` at 64 KiB
with O_DIRECT, 2 sessions, closed loop, ``session_runner: native``) — one tool reads one tree,
the other the other tree (fio: ``--ioengine=psync``, a process per job as fio runs by default,
a job per file, ``--filename``), and the trees swap every pair and which tool starts first
every second pair, so neither where a file lies nor start order favours a tool. Both start, run
past a settling time, and ``bpftrace`` counts every 64 KiB ``pread64`` each tool completes in
the same ``--duration`` seconds, with each tool's user and kernel CPU time over that window
(``/proc/PID/stat``). Series, interleaved pair by pair: dbsim vs fio (``--repeat``), dbsim with
every batch bounded by ``--batch-ms`` as before e7beb6c vs fio (``--fixed-batches``), fio vs fio
(``--control``: what the method gives two identical tools) and fio ``--thread`` vs fio
(``--thread-control``: what jobs as threads of one process cost).

Needs root, fio, bpftrace and tracefs (``mount -t tracefs nodev /sys/kernel/tracing``).
Results: ``bench/results/read_side_by_side-<time>.json`` and a summary; see bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from read_gap import PARAMS  # the same two-session 64 KiB read (bench/ is the script's path)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: The transfer size, bytes (``--block-kib``; the issue's case is 64 KiB): each tool's reads of
#: exactly this size are counted.
BLOCK = int(os.environ.get("DBSIM_SIDE_BY_SIDE_KIB", "64")) * 1024
SETTLE_S = 3.0  # both tools started, warmed and reading before the count opens
TICKS = os.sysconf("SC_CLK_TCK")


def dbsim_child(tree: Path, seconds: float, batch_ms: float | None) -> None:
    """In a child process: build ``tree`` if absent, or read it for ``seconds``. With
    ``batch_ms`` every batch is bounded by that wall time instead of by the interval close
    (``sim.core.session_native.deadline_ns``): 50 is the loop before e7beb6c."""
    sys.path[:0] = [str(HERE.parent), str(HERE)]
    import eda_bench

    from sim.core import session_native
    from workloads.eda.parameters import EdaParameters

    params = EdaParameters.model_validate({**PARAMS, "transfer_size_bytes": BLOCK})
    if batch_ms is not None:
        bound = int(batch_ms * 1e6)
        session_native.deadline_ns = lambda engine, long, now: now + bound
    if not tree.exists():
        tree.mkdir(parents=True)
        eda_bench.build(tree, params)
        return
    eda_bench.dbsim(tree, params, 2, seconds, "native")


def files_of(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("file_*") if p.stat().st_size == 10 * 2**20)


def start_dbsim(tree: Path, seconds: float, batch_ms: float | None) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "--child", str(tree), "--duration", str(seconds)]
    command += ["--child-batch-ms", str(batch_ms)] if batch_ms is not None else []
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


def start_fio(tree: Path, seconds: float, thread: bool = False) -> subprocess.Popen[bytes]:
    command = ["fio", *(["--thread"] if thread else []), "--rw=read", f"--bs={BLOCK}", "--direct=1", "--ioengine=psync", "--size=10m",
               "--time_based", f"--runtime={math.ceil(seconds)}", "--output-format=terse"]  # fmt: skip
    for i, path in enumerate(files_of(tree)):
        command += [f"--name=read{i}", f"--filename={path}"]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL)


def family(pid: int) -> list[int]:
    """``pid`` and its children (fio's job processes are its main process's children)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return [pid, *kids]


def cpu_ticks(pids: list[int]) -> tuple[int, int]:
    """User and kernel clock ticks of ``pids`` (every thread of each, from /proc/PID/stat)."""
    user = kernel = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        user, kernel = user + int(fields[11]), kernel + int(fields[12])
    return user, kernel


def count_reads(groups: dict[str, list[int]], seconds: float) -> dict[str, int]:
    """Every ``pread64`` of exactly 64 KiB each group's processes complete in ``seconds``."""
    probes = []
    for name, pids in groups.items():
        test = " || ".join(f"pid == {p}" for p in pids)
        probes.append(f"tracepoint:syscalls:sys_exit_pread64 /args->ret == {BLOCK} && ({test})/ "
                      f"{{ @{name} = count(); }}")  # fmt: skip
    program = " ".join(probes) + f" interval:ms:{int(seconds * 1000)} {{ exit(); }}"
    out = subprocess.run(["bpftrace", "-e", program], capture_output=True, text=True, check=True)
    found = dict(re.findall(r"@(\w+): (\d+)", out.stdout))
    return {name: int(found.get(name, 0)) for name in groups}


def side_by_side(
    args: argparse.Namespace, left: tuple[str, Path], right: tuple[str, Path], b_first: bool
) -> dict[str, Any]:
    """Two tools at once, each on its own tree (``b_first``: the right one started first); the
    counts and CPU over one common window."""
    run_s = SETTLE_S + args.duration + 5  # both outlast the count (and bpftrace's attach)
    procs = {}
    order = (("a", left), ("b", right))
    for role, (tool, tree) in order[::-1] if b_first else order:
        if tool == "dbsim":
            procs[role] = start_dbsim(tree, run_s, None)
        elif tool == "dbsim_fixed_batches":
            procs[role] = start_dbsim(tree, run_s, args.batch_ms)
        else:  # "fio" (a process per job, fio's default) or "fio_thread" (--thread)
            procs[role] = start_fio(tree, run_s, thread=tool == "fio_thread")
    try:
        time.sleep(SETTLE_S)
        groups = {role: family(p.pid) for role, p in procs.items()}
        before = {role: cpu_ticks(pids) for role, pids in groups.items()}
        counts = count_reads(groups, args.duration)
        after = {role: cpu_ticks(pids) for role, pids in groups.items()}
    finally:
        for p in procs.values():
            p.wait(timeout=run_s + 60)
    out = {}
    for role, (tool, tree) in (("a", left), ("b", right)):
        user = (after[role][0] - before[role][0]) / TICKS
        kernel = (after[role][1] - before[role][1]) / TICKS
        n = counts[role]
        out[role] = {"tool": tool, "tree": tree.name, "reads": n,
                     "mib_s": n * BLOCK / 2**20 / args.duration,
                     "user_us_per_read": 1e6 * user / max(n, 1),
                     "kernel_us_per_read": 1e6 * kernel / max(n, 1)}  # fmt: skip
    out["b_first"] = b_first
    return out


def median_ci(values: list[float]) -> tuple[float, float]:
    """The 95 % distribution-free interval of the median (binomial order statistics)."""
    xs, n = sorted(values), len(values)
    if n < 6:
        return xs[0], xs[-1]
    cdf, k = 0.0, 0
    while cdf + math.comb(n, k) / 2**n <= 0.025:
        cdf += math.comb(n, k) / 2**n
        k += 1
    return xs[max(k - 1, 0)], xs[n - k]


def summary(pairs: list[dict[str, Any]], mine: str, other: str) -> dict[str, Any]:
    """The median ratio of the pairs' counts, its 95 % interval, and the median by start order
    (the tool started first reads ~0.5 % less in fio-against-fio pairs, whichever it is: the
    mean of the two orders' medians is the ratio with that taken out)."""
    ratios = [p["a"]["reads"] / p["b"]["reads"] for p in pairs]
    low, high = median_ci(ratios)
    by_order = {
        order: statistics.median(
            r for r, p in zip(ratios, pairs, strict=True) if p["b_first"] == flag
        )
        for order, flag in ((f"{mine}_started_first", False), (f"{other}_started_first", True))
        if any(p["b_first"] == flag for p in pairs)
    }
    side = {}
    for role in ("a", "b"):
        side[role] = {k: statistics.median(p[role][k] for p in pairs)
                      for k in ("mib_s", "user_us_per_read", "kernel_us_per_read")}  # fmt: skip
    return {"pairs": len(pairs), f"{mine}_over_{other}": statistics.median(ratios),
            "ci95": [low, high], "by_start_order": by_order,
            "order_balanced": statistics.fmean(by_order.values()),
            "ratios": ratios, mine: side["a"], other: side["b"]}  # fmt: skip


#: The series a run can hold: (name, the tool on side a, the tool on side b).
SERIES = {
    "dbsim_vs_fio": ("dbsim", "fio"),
    # dbsim with every batch bounded by --batch-ms (50: the loop before e7beb6c).
    "fixed_batches_vs_fio": ("dbsim_fixed_batches", "fio"),
    # fio against fio: what the method gives two identical tools.
    "control": ("fio", "fio"),
    # fio's jobs as threads of one process (dbsim's sessions are threads of one process)
    # against fio's default, a process per job: what the thread model itself costs.
    "threads": ("fio_thread", "fio"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=16, help="dbsim-vs-fio pairs (4n: balanced)")
    parser.add_argument("--fixed-batches", type=int, default=0,
                        help="pairs of dbsim with fixed --batch-ms batches vs fio (4n)")  # fmt: skip
    parser.add_argument("--batch-ms", type=float, default=50.0, help="see --fixed-batches")
    parser.add_argument("--control", type=int, default=8, help="fio-vs-fio pairs (4n: balanced)")
    parser.add_argument("--thread-control", type=int, default=0,
                        help="fio --thread against fio pairs (4n: balanced)")  # fmt: skip
    parser.add_argument("--duration", type=float, default=4.0, help="the counted window, s")
    parser.add_argument("--dir", type=Path, default=None, help="where the trees go (removed)")
    parser.add_argument("--block-kib", type=int, default=64, help="the transfer size, KiB")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child-batch-ms", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:  # BLOCK is the parent's, from the environment
        dbsim_child(args.child, args.duration, args.child_batch_ms)
        return 0
    # The children (dbsim's runs) read the size from the environment they inherit.
    os.environ["DBSIM_SIDE_BY_SIDE_KIB"] = str(args.block_kib)
    global BLOCK
    BLOCK = args.block_kib * 1024
    work = Path(tempfile.mkdtemp(prefix="side-by-side-", dir=args.dir))
    trees = [work / "tree_a", work / "tree_b"]
    for tree in trees:
        subprocess.run([sys.executable, __file__, "--child", str(tree)], check=True)
    wanted = {"dbsim_vs_fio": args.repeat, "fixed_batches_vs_fio": args.fixed_batches,
              "control": args.control, "threads": args.thread_control}  # fmt: skip
    report: dict[str, Any] = {"settings": {**vars(args), "settle": SETTLE_S, "dir": str(args.dir)},
                              "loadavg_before": os.getloadavg(),
                              "series": {name: [] for name, n in wanted.items() if n}}  # fmt: skip
    try:
        # The series interleave, pair by pair, so each meets the disk in the same minutes. In
        # each series every fourth pair repeats an arrangement: the trees swap every pair and
        # which tool starts first every second (in fio-against-fio pairs the tool started first
        # read ~0.5 % less, whichever it was: start order is balanced, not left to one side).
        for n in range(max(wanted.values())):
            for name, pairs in report["series"].items():
                if n >= wanted[name]:
                    continue
                left, right = SERIES[name]
                a, b = trees[n % 2], trees[1 - n % 2]
                pair = side_by_side(args, (left, a), (right, b), n // 2 % 2 == 1)
                pairs.append(pair)
                print(name, n, f"{left} {pair['a']['mib_s']:.1f} ({a.name}) "
                      f"{right} {pair['b']['mib_s']:.1f} MiB/s", flush=True)  # fmt: skip
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    report["loadavg_after"] = os.getloadavg()
    report["summary"] = {
        name: summary(pairs, *(f"{t}_{x}" if SERIES[name][0] == SERIES[name][1] else t
                               for t, x in zip(SERIES[name], "ab", strict=True)))
        for name, pairs in report["series"].items()
    }  # fmt: skip
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"read_side_by_side-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    for name, s in report["summary"].items():
        print(f"{name}: median ratio of {s['pairs']} pairs {s['ratios'] and statistics.median(s['ratios']):.4f} "
              f"(95 % CI {s['ci95'][0]:.4f}-{s['ci95'][1]:.4f}); by start order "
              + ", ".join(f"{k} {v:.4f}" for k, v in s["by_start_order"].items())
              + f"; order-balanced {s['order_balanced']:.4f}")  # fmt: skip
        for k, v in s.items():
            if isinstance(v, dict) and k != "by_start_order":
                print(f"  {k}: " + ", ".join(f"{x} {y:.2f}" for x, y in v.items()))
    print(f"results: {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
