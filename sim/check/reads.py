"""The check's read phase: SLOB reads for a few seconds while the database's own statistics are
sampled, then physical reads per read held against WORK_UNIT − 1.

The statistics are the ``db`` collector's (the dialect record's ``stats_collectors``), read
exactly as a run reads them and summed over the window by the collector's own ``findings``.
An engine inside dbsim's process (SQLite) has no statistics of its own: its physical reads
are the process's read calls (``syscr`` of /proc/self/io), each a page SQLite's own cache
did not hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.protocols import Collector, Sample, Target, Workload

#: A backend publishes its counters about once a second (PostgreSQL 15+) and at exit: the
#: last reading waits this long after the sessions closed, so every read of theirs counts.
FLUSH_WAIT_S = 1.5
SAMPLE_EVERY_S = 1.0
PROC_IO = Path("/proc/self/io")


@dataclass
class ReadWindow:
    """What the read phase saw: reads done, physical reads (None: none could be counted),
    the statistics sampled and any error of theirs."""

    reads: int = 0
    seconds: float = 0.0
    physical: float | None = None
    sources: list[str] = field(default_factory=list)
    samples: int = 0
    stats_error: str = ""


def process_read_calls(path: Path = PROC_IO) -> int | None:
    """This process's read system calls so far (None where /proc/self/io cannot be read)."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith("syscr:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def window_means(samples: list[Sample]) -> dict[str, dict[str, float]]:
    """Per entity, each rate's mean over the window weighted by its interval, so that
    mean × window = the counter's whole change (what ``findings`` multiplies back)."""
    totals: dict[str, dict[str, float]] = {}
    seconds: dict[str, float] = {}
    for sample in samples:
        if sample.gap:
            continue
        interval = float(sample.values.get("interval_s", 0.0))
        entity = totals.setdefault(sample.entity, {})
        seconds[sample.entity] = seconds.get(sample.entity, 0.0) + interval
        for key, value in sample.values.items():
            entity[key] = entity.get(key, 0.0) + float(value) * interval
    return {
        e: {k: v / seconds[e] for k, v in f.items()} if seconds[e] else {}
        for e, f in totals.items()
    }


async def _session(
    target: Target,
    workload: Workload,
    index: int,
    until: float,
    blocking: Callable[[Callable[[], Any]], Any],
) -> int:
    conn = await target.connect()
    session: Any = workload.new_session(index, conn, seed=index + 1)
    done = 0
    try:
        while time.monotonic() < until:
            if getattr(session, "blocking_ready", False):
                _, call = session.next_call()
                await blocking(call)
            else:
                _, pending = session.next_transaction()
                await pending
            done += 1
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
    return done


async def read_window(
    target: Target,
    workload: Workload,
    collectors: list[Collector],
    *,
    sessions: int,
    duration_s: float,
    process_reads: bool,
    blocking: Callable[[Callable[[], Any]], Any],
) -> ReadWindow:
    """Run ``sessions`` read-only SLOB sessions for ``duration_s`` and count physical reads."""
    window = ReadWindow(sources=[c.source for c in collectors])
    started: list[Collector] = []
    samples: list[Sample] = []
    try:
        for collector in collectors:
            await collector.start(time.monotonic())
            started.append(collector)
    except Exception as exc:
        window.stats_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
    calls_before = process_read_calls() if process_reads else None
    begin = time.monotonic()
    until = begin + duration_s
    tasks = [
        asyncio.ensure_future(_session(target, workload, i, until, blocking))
        for i in range(sessions)
    ]
    try:
        while not all(task.done() for task in tasks):
            await asyncio.wait(tasks, timeout=SAMPLE_EVERY_S)
            samples += await _sample(started, window)
        window.reads = sum(task.result() for task in tasks)
        window.seconds = time.monotonic() - begin
        calls_after = process_read_calls() if process_reads else None
        await asyncio.sleep(FLUSH_WAIT_S if started else 0.0)
        samples += await _sample(started, window)
    finally:
        for task in tasks:
            task.cancel()
        for collector in started:
            with contextlib.suppress(Exception):
                await collector.stop()
    window.samples = sum(1 for s in samples if not s.gap)
    if calls_before is not None and calls_after is not None:
        window.physical = float(calls_after - calls_before)
    elif started and not window.stats_error:
        window.physical = _physical(started, samples, window)
    return window


async def _sample(collectors: list[Collector], window: ReadWindow) -> list[Sample]:
    found: list[Sample] = []
    for collector in collectors:
        try:
            found += await collector.sample(time.monotonic())
        except Exception as exc:
            window.stats_error = window.stats_error or f"{type(exc).__name__}: {exc}"
    return found


def _physical(
    collectors: list[Collector], samples: list[Sample], window: ReadWindow
) -> float | None:
    """The collectors' own sum of blocks read from storage over the window."""
    for collector in collectors:
        own = [s for s in samples if s.source == collector.source]
        means: Mapping[str, Mapping[str, float]] = window_means(own)
        per_entity: dict[str, float] = {}
        for sample in own:
            if not sample.gap:
                interval = float(sample.values.get("interval_s", 0.0))
                per_entity[sample.entity] = per_entity.get(sample.entity, 0.0) + interval
        seconds = max(per_entity.values(), default=0.0)
        facts, _ = collector.findings(means, {"read": max(window.reads, 1)}, seconds)
        per_read = facts.get("physical_reads_per_read")
        if per_read is not None:
            return float(per_read) * max(window.reads, 1)
    return None


__all__ = ["ReadWindow", "process_read_calls", "read_window", "window_means"]
