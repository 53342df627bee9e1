"""A session thread that runs its operations in batches in the native file loop.

The Python session thread (sim.core.session_threads) pays CPython's cost per operation — deal,
time, call, record: about 1.4 µs even for a no-op, more than a ``stat`` of a cached file.
Here the thread hands the C loop (storage/targets/native/fileloop.c) a batch of pre-dealt
operation codes and the GIL is released for the whole batch; the loop waits for each
operation's intended start, times it from there, and writes its latency and errno into arrays
that this thread folds into its :class:`~sim.core.session_threads.ThreadRecorder` with numpy.

A batch ends at whichever comes first: ``BATCH_OPS`` operations, its deadline (closed loop
over fast operations: just before the ticker's next interval close; else ``BATCH_NS`` of wall
time; see :func:`deadline_ns`), the engine's generation cell changing (a stage boundary or a
stop: ``ThreadedSessions.held`` and ``wake`` bump it), or an open-loop start that lies beyond
the batch's deadline (then the thread sleeps on the engine's condition, which a stop wakes). So stops, stage boundaries and
lab steps are seen within one operation, and nothing is recorded in a phase more than one
batch from the one it ran in; a batch during which the measured stage began ran in the
warm-up and is neither recorded nor counted as measured (``loops_per_session`` stays exact).
The same runner drives MariaDB/MySQL sessions over Connector/C and, a thread per session,
PostgreSQL sessions over libpq (storage.targets.pgloop_session); by default PostgreSQL
sessions share threads instead (:func:`run_native_group`: each thread runs several sessions'
batches together, one statement in flight on each connection, as pgbench's threads do).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.core.session_threads import Pacer, Tally, ThreadRecorder

if TYPE_CHECKING:
    from sim.core.session_threads import ThreadedSessions

#: At most this many operations per batch (the arrays' size).
BATCH_OPS = 4096
#: At most this long per batch of a paced session (or on a clock the ticker does not share),
#: so samples stay fresh (stops and stage boundaries end a batch at once through the generation
#: cell; this bounds only the batch's fixed cost per op).
BATCH_NS = 50_000_000
#: A closed-loop batch of fast operations ends this long before the engine closes the
#: interval (see :func:`deadline_ns`), so its fold lands in the interval they ran in.
TICK_MARGIN_NS = 10_000_000
#: Operations faster than this (the last batch's wall time per operation) are fast: an
#: operation started before the margin ends well inside it.
FAST_OP_NS = 1_000_000
#: Open loop: the thread sleeps on the engine's condition until this close to the next start;
#: the C loop sleeps the rest precisely (the thread's own wake-up is not timed).
NATIVE_SLEEP_NS = 2_000_000


class _Member:
    """One session's side of a batch: its stage, pacing, arrays, counts and recorder."""

    def __init__(self, threaded: ThreadedSessions, index: int, program: Any) -> None:
        engine = threaded.engine
        self.threaded, self.engine, self.index, self.program = threaded, engine, index, program
        self.recorder = threaded.recorders[index]
        self.loops_limit = engine.load.loops_per_session
        self.pacer = Pacer(threaded, index) if engine.load.mode == "open" else None
        self.tally = Tally(index)
        self.latency = np.zeros(BATCH_OPS, dtype=np.int64)
        self.errors = np.zeros(BATCH_OPS, dtype=np.int32)
        self.args = np.zeros(BATCH_OPS, dtype=np.int64)
        self.codes: np.ndarray = self.errors  # the batch's, set by plan()
        self.paced: Pacer | None = None
        self.count = self.period_ns = self.due_ns = 0

    def plan(self) -> int:
        """0 when a batch is dealt (codes, count, pacing set), else PARKED, or how many ns
        until the next intended start (the thread sleeps on the engine's condition first)."""
        engine = self.engine
        stage = engine._stage
        if self.index >= stage.sessions:  # parked: this stage runs fewer sessions
            return PARKED
        count = BATCH_OPS
        if self.loops_limit is not None and engine._measuring:
            count = max(min(count, self.loops_limit - self.tally.loops), 1)
        self.period_ns = self.due_ns = 0
        # A stage without a rate (the calibration) runs closed loop in an open-loop run.
        paced = self.pacer if stage.rate_ops_s is not None else None
        if paced is not None:
            paced.refresh(stage)
            delay_ns = paced.next_due_ns - time.perf_counter_ns()
            if delay_ns > NATIVE_SLEEP_NS:
                return delay_ns
            self.period_ns, self.due_ns = paced.period_ns, paced.next_due_ns
        self.paced = paced
        self.codes = self.program.deck.ahead(count)
        self.count = min(count, len(self.codes))
        return 0

    def finish(self, done: int, due_ns: int, was_measuring: bool) -> bool:
        """Fold the batch that ran ``done`` operations; True when the session's loops are
        done (it returns)."""
        if self.paced is not None:
            self.paced.next_due_ns = due_ns
        if not done:
            return False
        engine, tally, codes = self.engine, self.tally, self.codes
        self.program.advance(codes, done)
        tally.issued += done
        engine._stage_ops[self.index] += done
        with self.recorder.lock:  # the batch and the phase it counts in, together (held())
            if engine._measuring and not was_measuring:
                # The measured stage began during this batch, which ran in the warm-up: it is
                # neither recorded nor counted (loops_per_session stays exact).
                return False
            code = clean_code(self.program)
            if code is not None:  # one operation, no failure: nothing of the batch to scan
                _append(self.recorder, self.program.names[code], self.latency[:done].tobytes())
            else:
                lat, err, arg = self.latency[:done], self.errors[:done], self.args[:done]
                fold(self.recorder, self.program, codes[:done], lat, err, arg)
            measuring = tally.book(engine, done)
        return bool(measuring and self.loops_limit is not None and tally.loops >= self.loops_limit)


#: plan(): the session is parked (its stage runs fewer sessions).
PARKED = -1


def run_native(threaded: ThreadedSessions, index: int, program: Any) -> None:
    """Session ``index`` until the run stops or its loops are done."""
    engine = threaded.engine
    member = _Member(threaded, index, program)
    generation = threaded.generation
    fast = False  # the last batch's operations were fast (see deadline_ns)
    while not engine._stopping:
        seen = int(generation[0])  # before the stage: a change after it ends the batch
        wait = member.plan()
        if wait == PARKED:
            threaded._park(index)
            continue
        if wait:
            threaded._sleep((wait - NATIVE_SLEEP_NS) / 1e9)
            continue
        was_measuring = engine._measuring  # after `seen`: a boundary since ends the batch
        began = time.perf_counter_ns()
        long = fast and member.paced is None
        done, due_ns = program.run(
            member.codes, member.latency, member.errors, member.args, generation, seen,
            member.count, deadline_ns(engine, long, began), member.paced is not None,
            member.period_ns, member.due_ns,
        )  # fmt: skip
        fast = done > 0 and time.perf_counter_ns() - began < done * FAST_OP_NS
        if member.finish(done, due_ns, was_measuring):
            return


def run_native_group(
    threaded: ThreadedSessions, members: list[tuple[int, Any]], settle: Callable[[int], None]
) -> None:
    """Several sessions on this thread, each with one statement in flight on its own
    connection (their programs' ``run_group`` runs their batches together, as pgbench's
    threads multiplex their connections); ``settle(index)`` as each session's loops end."""
    engine = threaded.engine
    generation = threaded.generation
    group = [_Member(threaded, index, program) for index, program in members]
    runner = members[0][1].run_group
    # A member's lost connection: every member's is checked and the lost ones reconnected
    # together, so one restart is found by all of them at once (not each at its next batch).
    reconnect = members[0][1].reconnect_group
    fast = False  # the last batch's operations were fast (see deadline_ns)
    while group and not engine._stopping:
        if not reconnect([m.program for m in group]):
            break  # the run stops
        seen = int(generation[0])
        ready, waits = [], []
        for member in group:
            wait = member.plan()
            if wait == 0:
                ready.append(member)
            elif wait != PARKED:
                waits.append(wait)
        if not ready:
            if waits:
                threaded._sleep((min(waits) - NATIVE_SLEEP_NS) / 1e9)
            else:
                threaded._park(min(m.index for m in group))
            continue
        was_measuring = engine._measuring
        long = fast and all(m.paced is None for m in ready)
        began = time.perf_counter_ns()
        outcomes = runner([m.program for m in ready], ready, generation, seen,
                          deadline_ns(engine, long, began))  # fmt: skip
        least = min(done for done, _ in outcomes)  # the slowest session's operations
        fast = least > 0 and time.perf_counter_ns() - began < least * FAST_OP_NS
        for member, (done, due_ns) in zip(ready, outcomes, strict=True):
            if member.finish(done, due_ns, was_measuring):
                group.remove(member)
                settle(member.index)


def deadline_ns(engine: Any, long: bool, now: int) -> int:
    """When a batch starting ``now`` ends at the latest (``time.perf_counter_ns``).

    A **long** batch — closed loop, and the session's last batch ran operations faster than
    ``FAST_OP_NS`` each — runs until ``TICK_MARGIN_NS`` before the ticker's next interval close
    (at most ``BATCH_OPS`` operations): each hand-over to Python costs a reader 100-300 us on a
    CPU its blocking calls left cold, and at 50 ms batches a 64 KiB O_DIRECT stream read 0.994
    x fio psync side by side, at batches bounded by the close 0.9987 (issue #33,
    bench/read_side_by_side.py). Ending at the close also puts the batch's operations in the
    interval they ran in; a batch that would start inside the margin runs ``TICK_MARGIN_NS``
    and is folded just after the close. Any other batch keeps ``BATCH_NS``: an operation in
    flight at the deadline runs to its end, so slow ones (a SLOB transaction on a throttled
    device, 100 ms) would fold every batch after the close, each interval's operations in the
    next (a CI rehearsal: the IOPS calibration found 1 interval with operations where 2 were
    needed); and paced sessions sleep in C until each start inside a batch, which a stop must
    not wait out. Only on the ticker's own clock (``time.perf_counter``, the engine's default):
    another clock has no close to align to."""
    if not long or engine.clock is not time.perf_counter:
        return now + BATCH_NS
    close = int(engine.tick_at(engine._tick + 1) * 1e9) - TICK_MARGIN_NS
    return close if close > now else now + TICK_MARGIN_NS


def clean_code(program: Any) -> int | None:
    """The last batch's one operation code when the program knows that every operation of it
    ran that code and none failed (a deck of one operation, and a loop that counts its
    failures: the file loop), else None.

    Why it matters: a batch of blocking calls leaves the CPU cold for the thread's hand-over
    (on the 2-CPU VM of bench/README.md every numpy call there cost 50-150 us, 1-6 us warm),
    and a 64 KiB O_DIRECT read stream hands over every 50 ms: fold's scans of the batch were
    most of a hand-over that kept one reader off the disk for ~1 % of the run (issue #33)."""
    if getattr(program, "failed", None) != 0:
        return None
    code: int | None = getattr(program.deck, "constant", None)
    return code


def fold(
    recorder: ThreadRecorder,
    program: Any,
    codes: np.ndarray,
    latency: np.ndarray,
    errors: np.ndarray,
    args: np.ndarray,
) -> None:
    """One batch into the recorder (its lock held): latencies of the operations that
    succeeded by name, failures counted by name and error class with their first message."""
    names = program.names
    failed = np.flatnonzero(errors)
    ok = None
    if len(failed):
        ok = errors == 0
        # One count per (operation, error) pair; a message only for the first of each.
        pairs = codes[failed].astype(np.int64) * 2**32 + errors[failed].astype(np.int64)
        _, first_of, counts = np.unique(pairs, return_index=True, return_counts=True)
        for at, n in zip(failed[first_of].tolist(), counts.tolist(), strict=True):
            code, error, arg = int(codes[at]), int(errors[at]), int(args[at])
            message = functools.partial(program.message, code, error, arg)
            recorder.record_error(names[code], program.error_class(error), message, n)
    if ok is not None:
        codes, latency = codes[ok], latency[ok]
        if not len(codes):
            return
    first = int(codes[0])
    if not np.any(codes != first):
        _append(recorder, names[first], _raw_bytes(latency))
        return
    # One stable sort, then a slice per operation (not a mask per operation).
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.diff(ordered)) + 1
    for run in np.split(order, starts):
        _append(recorder, names[int(codes[run[0]])], _raw_bytes(latency[run]))


def _raw_bytes(values: np.ndarray) -> bytes:
    return np.ascontiguousarray(values, dtype=np.int64).tobytes()


def _append(recorder: ThreadRecorder, name: str, values: bytes) -> None:
    """Latencies (native int64 µs) onto the recorder's raw array of ``name``."""
    raw = recorder.raw.get(name)
    if raw is None:
        from array import array

        raw = recorder.raw[name] = array("q")
    raw.frombytes(values)


__all__ = [
    "BATCH_NS",
    "BATCH_OPS",
    "NATIVE_SLEEP_NS",
    "PARKED",
    "clean_code",
    "fold",
    "run_native",
    "run_native_group",
]
