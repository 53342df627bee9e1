"""One Locust master merging N workers' interval packets: the master's CPU per worker.

Every second each worker of a distributed run closes an interval: a packet
(:mod:`sim.locust.packets`) with one HDR histogram per operation and its host's collector
samples. Workers hand their packets to the master on Locust's worker report, every
``WORKER_REPORT_INTERVAL`` (3 s) — so each report carries about three packets — and the
master merges them (:class:`sim.locust.merge.RunMerger`) into one bundle. This bench runs
that path for real, in one process, for N = 1, 2, 4 … workers:

* packets are built by :func:`sim.locust.packets.interval_packet` from real
  :class:`~sim.core.metrics.Interval` objects: three operations whose HDR histograms hold
  ``--ops`` recorded latencies a second each (lognormal, a 1 % tail 20x slower), and the
  samples a worker on a block-device host sends (block per device, blocklatency per device and
  direction, host CPU, PSI; the field names of a real bundle's timeseries), each worker named
  as its own host;
* each report is serialised as Locust's wire message (``locust.rpc.protocol.Message``,
  msgpack) before the run, then, at its time, unserialised and handed to
  ``RunMerger.on_packet`` — the master's real merge: HDR decode on the decoder thread, the
  histogram sums, :func:`sim.live.worker_samples.merge_samples`, and the bundle's writes
  (``timeseries/*.csv``, ``intervals.hlog``) on the writer thread, into a real bundle in a
  scratch directory;
* the reports of the N workers are spread evenly over the 3-s report period, as workers that
  joined at different moments are.

Figures (measured, this process): ``master CPU`` is ``getrusage(RUSAGE_SELF)`` user+sys from
the merger's creation until every interval is in the bundle (every thread of the process:
hub, decoder, writer), divided by the run's seconds — the cores the master needs to keep up
at 1-s intervals, whatever wall time it took on a shared machine; ``per worker`` divides it
by N. ``late`` counts intervals written into the bundle
more than one interval (1 s) after the report carrying their last part was due; ``lag max``
is the largest such delay. What the bench leaves out, and the real master also spends: ZeroMQ
receive, Locust's own statistics merge of the same reports, heartbeats, the web UI.

    nice -n 19 .venv/bin/python bench/master_scale.py --workers 1,4,16,64 --seconds 12

Writes ``bench/results/master_scale-<time>.json`` and a table on stdout. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import sim.locust  # noqa: E402,F401  (gevent's patching first, as in every Locust process)

# isort: split
import gevent  # noqa: E402
from locust.rpc.protocol import Message  # noqa: E402
from locust.runners import WORKER_REPORT_INTERVAL  # noqa: E402

import storage.collectors  # noqa: E402,F401  (registers the collectors merge_samples asks)
from sim.config.resolve import resolve  # noqa: E402
from sim.core.metrics import Interval, OpStats  # noqa: E402
from sim.locust.app import environment_for  # noqa: E402
from sim.locust.merge import RunMerger  # noqa: E402
from sim.locust.packets import interval_packet  # noqa: E402
from sim.locust.roles import REPORT_KEY  # noqa: E402
from sim.protocols import Sample  # noqa: E402

RESULTS = Path(__file__).parent / "results"
OPS = ("read", "update", "scan")
#: A second of one worker, as a real bundle's timeseries names its figures
#: (block.csv, blocklatency.csv, host.csv, psi.csv of a dbsim run on this VM).
BLOCK_FIELDS = [
    "aqu_sz",
    "d_await_ms",
    "d_s",
    "dareq_sz_kB",
    "dkB_s",
    "drqm_pct",
    "drqm_s",
    "f_await_ms",
    "f_s",
    "iops",
    "r_await_ms",
    "r_s",
    "rareq_sz_kB",
    "rkB_s",
    "rrqm_pct",
    "rrqm_s",
    "util_pct",
    "w_await_ms",
    "w_s",
    "wareq_sz_kB",
    "wkB_s",
    "wrqm_pct",
    "wrqm_s",
]
LATENCY_FIELDS = [
    "inflight_max",
    "inflight_mean",
    "mean_ms",
    "n",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "seq_pct",
    "size_kib_gt_1024",
    "size_kib_le_1024",
    "size_kib_le_128",
    "size_kib_le_16",
    "size_kib_le_256",
    "size_kib_le_32",
    "size_kib_le_4",
    "size_kib_le_512",
    "size_kib_le_64",
    "size_kib_le_8",
]
HOST_FIELDS = [
    "cpu_busy_pct",
    "cpu_idle_pct",
    "cpu_iowait_pct",
    "cpu_steal_pct",
    "cpu_system_pct",
    "cpu_user_pct",
    "cpus",
    "process_cpu_pct",
]
PSI_FIELDS = ["full_avg10_pct", "full_pct", "some_avg10_pct", "some_pct"]
DEVICES = ("sda", "sdb")
#: Distinct packet bodies built per run (the master's cost does not depend on repetition).
TEMPLATES = 24
#: An interval is late when it is written more than this after its last part was due.
LATE_AFTER_S = 1.0


def samples(rng: random.Random, t: float) -> list[Sample]:
    """One worker's collector samples for one interval."""
    out: list[Sample] = []
    for dev in DEVICES:
        out.append(Sample("block", dev, {f: rng.uniform(0, 500) for f in BLOCK_FIELDS}, t))
        for entity in (dev, f"{dev}:read", f"{dev}:write"):
            values = {f: rng.uniform(0, 50) for f in LATENCY_FIELDS}
            out.append(Sample("blocklatency", entity, values, t))
    out.append(Sample("host", "vm", {f: rng.uniform(0, 100) for f in HOST_FIELDS}, t))
    out.append(Sample("psi", "system", {f: rng.uniform(0, 10) for f in PSI_FIELDS}, t))
    return out


def template(rng: random.Random, ops_per_s: int) -> tuple[dict[str, OpStats], list[Sample]]:
    """One interval's operations (HDR histograms of µs latencies) and samples."""
    ops: dict[str, OpStats] = {}
    share = ops_per_s // len(OPS)
    for name in OPS:
        stats = OpStats()
        for _ in range(share):
            slow = 20.0 if rng.random() < 0.01 else 1.0
            stats.histogram.record_value(max(1, int(rng.lognormvariate(5.5, 0.6) * slow)))
        if rng.random() < 0.2:
            stats.errors = {"timeout": rng.randint(1, 3)}
        ops[name] = stats
    return ops, samples(rng, 1.0)


def reports(
    workers: int, seconds: int, ops_per_s: int, seed: int
) -> list[tuple[float, str, bytes, list[int]]]:
    """(due time, client id, Locust wire message, its intervals) of every report of the run,
    in time order."""
    rng = random.Random(seed)
    bodies = [template(rng, ops_per_s) for _ in range(TEMPLATES)]
    wall0 = time.time()
    events: list[tuple[float, str, bytes, list[int]]] = []
    for w in range(workers):
        cid = f"worker-{w}"
        offset = WORKER_REPORT_INTERVAL * w / workers
        sent = 0
        due = offset
        while sent < seconds:
            # Intervals closed by the report's time (interval k closes at k + 1 s).
            closed = min(seconds, int(due))
            packets = []
            for k in range(sent, closed):
                ops, base = bodies[(w * 7 + k) % TEMPLATES]
                t1 = float(k + 1)
                interval = Interval(k, float(k), t1, "measure", None, ops)
                at_t1 = [Sample(s.source, s.entity, s.values, t1) for s in base]
                packet = interval_packet(interval, at_t1, wall0=wall0, with_histograms=True)
                packet["host"] = f"host-{w}"  # each worker its own host
                packets.append(packet)
            if packets:
                data = {REPORT_KEY: {"run": "bench", "packets": packets}}
                raw = Message("stats", data, cid).serialize()
                events.append((due, cid, raw, [p["i"] for p in packets]))
            sent = closed
            due += WORKER_REPORT_INTERVAL
    events.sort(key=lambda e: e[0])
    return events


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(workers: int, seconds: int, ops_per_s: int, seed: int) -> dict[str, Any]:
    """One run of N workers: the master's CPU and the intervals' lag."""
    events = reports(workers, seconds, ops_per_s, seed)
    with tempfile.TemporaryDirectory(prefix="master_scale-") as tmp:
        scenario = resolve(None, [("output.directory", tmp), ("output.name", "scale")])
        environment = environment_for(scenario, workers)
        clients = {f"worker-{w}": (w, 4) for w in range(workers)}
        last_due: dict[int, float] = {}
        for due, _, _, indices in events:
            for index in indices:
                last_due[index] = max(last_due.get(index, 0.0), due)
        cpu0 = cpu_s()
        merger = RunMerger(environment, scenario, "bench", clients)
        written: dict[int, float] = {}
        writer = merger._writer
        on_interval = writer.on_interval

        def timed(interval: Interval, found: list[Sample]) -> None:
            on_interval(interval, found)
            written[interval.index] = time.monotonic()

        writer.on_interval = timed  # type: ignore[method-assign,assignment]
        start = time.monotonic()
        behind_max = 0.0
        for due, cid, raw, _ in events:
            now = time.monotonic()
            if start + due > now:
                gevent.sleep(start + due - now)
            behind_max = max(behind_max, time.monotonic() - (start + due))
            message = Message.unserialize(raw)
            merger.seen(cid)
            for packet in message.data[REPORT_KEY]["packets"]:
                merger.on_packet(cid, packet)
            gevent.sleep(0)
        # What is still queued: wait until every interval is written (bounded), the workers'
        # heartbeats going on meanwhile (one a second, as Locust's).
        deadline = time.monotonic() + 300
        while len(written) < seconds and time.monotonic() < deadline:
            for cid in clients:
                merger.seen(cid)
            gevent.sleep(0.2)
        cpu1 = cpu_s()
        # What the master itself said (sim.live.lateness, where merge.py calls it).
        said = getattr(merger, "lateness", None)
        lags = [written[k] - (start + last_due[k]) for k in sorted(written)]
        merger.summary = {"bundle": "bench"}  # stops the merger's watcher
        merger._pool.kill()
        merger._decoder.kill()
    # CPU per second of run, whatever the wall time it took on a shared machine: what the
    # master needs to keep up, in cores.
    cores = (cpu1 - cpu0) / seconds
    return {
        "workers": workers,
        "seconds": seconds,
        "ops_per_worker_s": ops_per_s,
        "report_bytes_mean": round(sum(len(e[2]) for e in events) / len(events)),
        "master_cores": round(cores, 4),
        "cpu_ms_per_worker_s": round(cores / workers * 1000, 2),
        "intervals_written": len(written),
        "late": sum(1 for lag in lags if lag > LATE_AFTER_S),
        "lag_max_s": round(max(lags), 2) if lags else None,
        "reports_behind_max_s": round(behind_max, 2),
        "master_said_late": said.late if said is not None else None,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope (one point: slope through the origin)."""
    if len(points) < 2:
        n, y = points[0]
        return 0.0, y / n
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4,8,16,32", help="N values, comma-separated")
    parser.add_argument("--seconds", type=int, default=12, help="intervals per worker")
    parser.add_argument("--ops", type=int, default=3000, help="operations per worker a second")
    parser.add_argument("--seed", type=int, default=32)
    args = parser.parse_args(argv)
    try:
        counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        print(f"error: --workers: {args.workers!r} is not a list of numbers", file=sys.stderr)
        return 2
    if args.seconds < 3 or min(counts) < 1:
        print("error: --seconds at least 3, --workers 1 or more each", file=sys.stderr)
        return 2
    # The merger's per-worker notes (lost, clock offsets) would flood the table: warnings of
    # the master's merge are counted through sim.live.lateness instead.
    logging.getLogger("sim.locust").setLevel(logging.ERROR)
    rows = []
    print(f"{'workers':>7} {'master CPU':>10} {'per worker':>11} {'late':>5} {'lag max':>8} load")
    for n in counts:
        row = measure(n, args.seconds, args.ops, args.seed)
        rows.append(row)
        print(
            f"{n:>7} {row['master_cores']:>7.3f} c {row['cpu_ms_per_worker_s']:>6.2f} ms/s "
            f"{row['late']:>5} {row['lag_max_s']:>6.2f} s {row['load_avg_1m']:>5.1f}",
            flush=True,
        )
    fit = [r for r in rows if r["master_cores"] < 0.5]
    base, slope = line([(r["workers"], r["master_cores"]) for r in rows])
    estimate = math.floor((0.5 - base) / slope) if slope > 0 else None
    print(
        "measured: master CPU (getrusage, every thread) per second of run; late: "
        f"written > {LATE_AFTER_S:g} s after due"
    )
    if fit:
        print(f"measured: largest N under half a core: {max(r['workers'] for r in fit)}")
    print(
        f"derived (least squares): {base:.3f} core + {slope * 1000:.2f} ms/s per worker; "
        f"half a core at N = {estimate}"
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"master_scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    meta = {"load_avg": os.getloadavg(), "cpus": os.cpu_count(), "argv": sys.argv[1:]}
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"results: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
