"""The master's merge is incremental, and merges exactly what it merged before (issue #32).

``RunMerger.on_packet`` used to re-merge every worker's latest storage samples and to walk
every worker (sorted) at each packet: N packets an interval, O(N) each, O(N²) an interval
(bench/README.md, master_scale). Now a packet costs O(1) — the workers the next interval
waits for are kept, the latest samples merged only when asked — and each merged interval O(N).

Here the same packets go through the merger and through a copy of it with the old
``on_packet``/``_merge_ready``/``latest_samples`` (``OLD`` below, as the code was before): 5
workers on 3 hosts (two share host ``a``: its device once, dbsim's CPU summed), reports of
three packets each in a shuffled order, one worker finishing two intervals early, one lost
mid-run, phases from warm-up to measured. Every merged interval (its index, times, phase, each
operation's count, errors and histogram, the merged samples), the live samples after every
report and the run's totals must be identical, and each interval merged after the same report. Locust and gevent patch the process that
imports them, so both run in a child process that prints what they gave as JSON (one child
for the three seeds, each seed's mergers as a child of its own would run them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = [pytest.mark.integration]

CHILD = r"""
import sim.locust  # first: gevent's (partial) monkey patching, then Locust
import json, random, sys
import storage.collectors  # registers the collectors merge_samples asks
from sim.config.resolve import resolve
from sim.core.metrics import Interval, OpStats
from sim.live.worker_samples import merge_samples
from sim.locust.app import environment_for
from sim.locust.merge import RunMerger
from sim.locust.packets import interval_packet
from sim.protocols import Sample

class OLD(RunMerger):
    # The merge as it was before it was made incremental (sim/locust/merge.py as of f10b572).
    latest_samples = []

    def on_packet(self, client_id, packet):
        worker = self.workers.get(client_id)
        if worker is None or self.finished:
            return
        worker.host = str(packet.get("host", worker.host))
        worker.received += 1
        worker.last_interval = max(worker.last_interval, int(packet["i"]))
        from sim.locust.packets import packet_ops, packet_samples
        worker.latest_samples = packet_samples(packet)
        if int(packet["i"]) < self.next_index:
            self._late(worker, packet)
            return
        packet["_decoded_ops"] = self._decoder.apply(packet_ops, (packet,))
        worker.pending[int(packet["i"])] = packet
        self.latest_samples = merge_samples(
            (w.index, w.host, w.latest_samples) for w in self.workers.values()
        )
        self._merge_ready()

    def _merge_ready(self):
        while True:
            index = self.next_index
            parts = []
            for worker in sorted(self.workers.values(), key=lambda w: w.index):
                if index in worker.pending:
                    parts.append((worker, worker.pending.pop(index)))
                elif not worker.done_before(index):
                    for w, packet in parts:
                        w.pending[index] = packet
                    return
            if not parts:
                return
            self._merge(index, parts)
            self.next_index += 1

HOSTS = {"w0": "a", "w1": "a", "w2": "b", "w3": "c", "w4": "c"}
LAST = {"w0": 12, "w1": 12, "w2": 10, "w3": 12, "w4": 12}  # w2 finishes two intervals early
LOST, LOST_AFTER = "w4", 6  # w4 sends intervals 0-5, then is lost

def packets(rng):
    out = {}
    for cid, host in HOSTS.items():
        index = int(cid[1])
        mine = []
        for k in range(LAST[cid] if cid != LOST else LOST_AFTER):
            stats = {}
            for op in ("read", "update"):
                s = OpStats()
                for _ in range(rng.randint(1, 40)):
                    s.histogram.record_value(rng.randint(50, 50_000))
                if rng.random() < 0.2:
                    s.errors["TimeoutError"] = rng.randint(1, 3)
                stats[op] = s
            phase = "warmup" if k < 3 else "measure"
            interval = Interval(k, k + 0.001 * index, k + 1 + 0.001 * index, phase, None, stats)
            samples = [
                Sample("block", "loop" + host, {"r_s": rng.uniform(0, 900), "util_pct": 3.0}, t=k + 1),
                Sample("host", host, {"cpu_busy_pct": 50.0, "process_cpu_pct": rng.uniform(1, 90)}, t=k + 1),
            ]
            packet = interval_packet(interval, samples, wall0=0.0, with_histograms=True)
            packet["host"] = host
            mine.append(packet)
        # Locust's worker report carries about three packets at a time.
        out[cid] = [mine[i:i + 3] for i in range(0, len(mine), 3)]
    return out

def drive(cls, out, reports, order):
    scenario = resolve(None, [("output.directory", out), ("output.name", cls.__name__)])
    workers = {cid: (int(cid[1]), 2) for cid in HOSTS}
    merger = cls(environment_for(scenario, 10), scenario, "run", workers)
    merged, live = [], []
    def on_interval(interval, samples):
        merged.append([len(live), interval.index, interval.t_start, interval.t_end, interval.phase,
                       {op: [s.count, s.error_count, s.histogram.encode().decode()]
                        for op, s in sorted(interval.ops.items())},
                       sorted([s.source, s.entity, sorted(s.values.items()), sorted(s.meta.items())]
                              for s in samples)])
    merger.interval_listeners.append(on_interval)
    for cid, batch in order:
        for packet in reports[cid][batch]:
            merger.on_packet(cid, dict(packet))
        live.append(sorted([s.source, s.entity, sorted(s.values.items())]
                           for s in merger.latest_samples))
        if cid == LOST and batch == len(reports[LOST]) - 1:
            merger._lose(merger.workers[LOST], "test: cut off")  # as _watch does
            merger._merge_ready()
    for cid in HOSTS:
        if cid != LOST:
            merger.on_final(cid, {"packets": LAST[cid], "outcome": "completed", "totals": {}})
    merger._merge_ready()
    totals = {op: [s.count, s.error_count, s.histogram.encode().decode()]
              for op, s in sorted(merger.totals.items())}
    merger._pool.kill(); merger._decoder.kill(); merger._watcher.kill()
    return {"merged": merged, "live": live, "totals": totals, "next": merger.next_index}

import os
results = {}
for seed in sys.argv[2:]:
    rng = random.Random(int(seed))
    reports = packets(rng)
    order = [(cid, b) for cid in HOSTS for b in range(len(reports[cid]))]
    # Each worker's reports stay in its order; the workers' interleave at random.
    rng.shuffle(order)
    order.sort(key=lambda item: (item[1] + rng.random() * 1.5))
    out = os.path.join(sys.argv[1], seed)
    results[seed] = {"new": drive(RunMerger, out, reports, order),
                     "old": drive(OLD, out, reports, order)}
print(json.dumps(results))
"""

SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every seed's merges, from one child: the child's Locust and gevent imports (~1 CPU-s)
    once for the module, not once per seed; each seed's packets and both mergers are the
    same as in a child of its own (a new ``random.Random(seed)``, a directory of its own)."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path_factory.mktemp("merge")), *map(str, SEEDS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_incremental_merge_gives_what_the_old_one_gave(
    merged: dict[str, Any], seed: int
) -> None:
    result = merged[str(seed)]
    new, old = result["new"], result["old"]
    assert old["next"] == new["next"] == 12  # every interval merged, w2's last two without it
    assert [m[1] for m in new["merged"]] == list(range(12))
    assert new["merged"] == old["merged"]
    assert new["live"] == old["live"]
    assert new["totals"] == old["totals"] and new["totals"]
    # Host a's two workers: its device once, dbsim's CPU the sum of both.
    hosts = {s[1] for s in new["merged"][0][6]}
    assert hosts == {"a/loopa", "b/loopb", "c/loopc", "a", "b", "c"}, hosts
