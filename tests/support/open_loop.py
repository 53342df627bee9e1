"""What an open-loop run can count: the bound the native and event-loop session tests share."""

from __future__ import annotations

import math

from sim.config.scenario import Load


def schedule_bound(load: Load, measured_s: float) -> int:
    """The most operations an open-loop measured stage can count: each session's due starts
    in it (its schedule restarts at the stage's start, session i offset by i/n of a period:
    sim.core.coroutine_sessions ``schedule``), rounded up, plus the one operation each
    session had in flight when the stage began (the event loop counts it where it ends; the
    native loop does not count a batch the stage began in: sim.core.session_native). Seen
    beside stress-ng: 603 = 301 + 300 + 2 where rate x time was 600.4."""
    n, rate = load.sessions, load.rate_ops_s
    assert rate is not None
    return sum(math.ceil(rate / n * measured_s - i / n) for i in range(n)) + n
