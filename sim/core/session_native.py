"""A session thread that runs its operations in batches in the native file loop.

The Python session thread (sim.core.session_threads) pays CPython's cost per operation — deal,
time, call, record: about 1.4 µs even for a no-op, more than a ``stat`` of a cached file.
Here the thread hands the C loop (storage/targets/native/fileloop.c) a batch of pre-dealt
operation codes and the GIL is released for the whole batch; the loop waits for each
operation's intended start, times it from there, and writes its latency and errno into arrays
that this thread folds into its :class:`~sim.core.session_threads.ThreadRecorder` with numpy.

A batch ends at whichever comes first: ``BATCH_OPS`` operations, ``BATCH_NS`` of wall time,
the engine's generation cell changing (a stage boundary or a stop: ``ThreadedSessions.held``
and ``wake`` bump it), or an open-loop start that lies beyond the batch's deadline (then the
thread sleeps on the engine's condition, which a stop wakes). So stops, stage boundaries and
lab steps are seen within one operation, and nothing is recorded in a phase more than one
batch from the one it ran in.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.core.session_threads import Pacer, Tally, ThreadRecorder

if TYPE_CHECKING:
    from sim.core.session_threads import ThreadedSessions

#: At most this many operations per batch (the arrays' size).
BATCH_OPS = 4096
#: At most this long per batch, so samples stay fresh (stops and stage boundaries end a batch
#: at once through the generation cell; this bounds only the batch's fixed cost per op).
BATCH_NS = 50_000_000
#: Open loop: the thread sleeps on the engine's condition until this close to the next start;
#: the C loop sleeps the rest precisely (the thread's own wake-up is not timed).
NATIVE_SLEEP_NS = 2_000_000


def run_native(threaded: ThreadedSessions, index: int, program: Any) -> None:
    """Session ``index`` until the run stops or its loops are done."""
    engine = threaded.engine
    recorder = threaded.recorders[index]
    perf_ns = time.perf_counter_ns
    loops_limit = engine.load.loops_per_session
    pacer = Pacer(threaded, index) if engine.load.mode == "open" else None
    tally = Tally(index)
    latency = np.zeros(BATCH_OPS, dtype=np.int64)
    errors = np.zeros(BATCH_OPS, dtype=np.int32)
    args = np.zeros(BATCH_OPS, dtype=np.int64)
    generation = threaded.generation
    while not engine._stopping:
        seen = int(generation[0])  # before the stage: a change after it ends the batch
        stage = engine._stage
        if index >= stage.sessions:  # parked: this stage runs fewer sessions
            threaded._park(index)
            continue
        count = BATCH_OPS
        if loops_limit is not None and engine._measuring:
            count = max(min(count, loops_limit - tally.loops), 1)
        period_ns = due_ns = 0
        # A stage without a rate (the calibration) runs closed loop in an open-loop run.
        paced = pacer if stage.rate_ops_s is not None else None
        if paced is not None:
            paced.refresh(stage)
            delay_ns = paced.next_due_ns - perf_ns()
            if delay_ns > NATIVE_SLEEP_NS:
                threaded._sleep((delay_ns - NATIVE_SLEEP_NS) / 1e9)
                continue
            period_ns, due_ns = paced.period_ns, paced.next_due_ns
        codes = program.deck.ahead(count)
        deadline_ns = perf_ns() + BATCH_NS
        done, due_ns = program.run(
            codes, latency, errors, args, generation, seen, count, deadline_ns,
            paced is not None, period_ns, due_ns,
        )  # fmt: skip
        if paced is not None:
            paced.next_due_ns = due_ns
        if not done:
            continue
        program.advance(codes, done)
        tally.issued += done
        engine._stage_ops[index] += done
        with recorder.lock:  # the batch and the phase it counts in, together (see held())
            fold(recorder, program, codes[:done], latency[:done], errors[:done], args[:done])
            measuring = tally.book(engine, done)
        if measuring and loops_limit is not None and tally.loops >= loops_limit:
            return


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
        _append(recorder, names[first], latency)
        return
    # One stable sort, then a slice per operation (not a mask per operation).
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    starts = np.flatnonzero(np.diff(ordered)) + 1
    for run in np.split(order, starts):
        _append(recorder, names[int(codes[run[0]])], latency[run])


def _append(recorder: ThreadRecorder, name: str, values: np.ndarray) -> None:
    raw = recorder.raw.get(name)
    if raw is None:
        from array import array

        raw = recorder.raw[name] = array("q")
    raw.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())


__all__ = ["BATCH_NS", "BATCH_OPS", "NATIVE_SLEEP_NS", "fold", "run_native"]
