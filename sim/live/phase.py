"""Where a run stands, as the web UI's phase indicator shows it (the live page's header and the
Run tab): connecting, loading with progress and ETA, warm-up and measuring with elapsed and
remaining time, finishing, finished.

Read from an :class:`~sim.locust.host.EngineHost`: its state (the engine's, which the engine
thread stores), when each state was first entered, and its load's
:class:`~sim.core.progress.ProgressMeter` (``load slob_1_cf1: 5,120/10,240 rows (50 %),
12,400 rows/s, ETA 0:00:04``, the console's own line). Times are the web UI's clock, measured.
Outside :mod:`sim.locust` (whose import patches sockets with gevent): it needs no Locust.
"""

from __future__ import annotations

import time
from typing import Any

from sim.core.progress import clock_text

#: Engine (and host) states by the phase a person reads.
PHASES = {
    "idle": "ready",
    "preparing": "connecting",
    "setup": "connecting",
    "connecting": "connecting",
    "loading": "loading",
    "verifying": "loading",
    "checking": "loading",
    "calibrate": "calibrating",
    "warmup": "warm-up",
    "measure": "measuring",
    "stopping": "finishing",
    "finished": "finished",
}


def _timed(host: Any, state: str, now: float) -> tuple[float, float | None]:
    """Seconds since ``state`` began and, when its stages have a duration, seconds left."""
    elapsed = max(now - host.entered.get(state, now), 0.0)
    engine = host.engine
    stages = [s for s in engine.stages if s.phase == state] if engine is not None else []
    if not stages or any(s.duration_s is None for s in stages):
        return elapsed, None
    return elapsed, max(sum(s.duration_s for s in stages) - elapsed, 0.0)


def _loading(host: Any) -> tuple[str, float | None]:
    meter = host.meter
    what = meter.current
    if what is None:
        return f"{host.state} the data", None
    step = meter.steps[what]
    return meter.line(what), round(100 * step.done / max(step.total, 1), 1)


def describe(host: Any, status_text: str = "", now: float | None = None) -> dict[str, Any]:
    """``{"phase", "state", "text", "pct", "elapsed_s", "remaining_s"}`` for the host's run."""
    now = time.monotonic() if now is None else now
    state = str(host.state)
    phase = PHASES.get(state, state)
    if phase == "finished" and host.final is None:
        phase = "finishing"  # the engine has finished; the bundle is being written
    out: dict[str, Any] = {"phase": phase, "state": state, "pct": None}
    out.update(elapsed_s=None, remaining_s=None)
    if phase == "ready":
        out["text"] = "no run yet: fill the form and press Start"
    elif phase == "finished":
        out["text"] = f"finished: {status_text}" if status_text else "finished"
        out["pct"] = 100.0
    elif phase == "loading":
        out["text"], out["pct"] = _loading(host)
    elif state in ("preparing", "setup"):
        out["text"] = "preparing the bundle and opening the target"
    elif state == "connecting":
        sessions = host.engine.max_sessions if host.engine is not None else "the"
        out["text"] = f"connecting {sessions} sessions"
    elif state in ("warmup", "measure", "calibrate"):
        elapsed, remaining = _timed(host, state, now)
        out.update(elapsed_s=round(elapsed, 1), remaining_s=_round(remaining))
        text = f"{phase}: {clock_text(elapsed)} elapsed"
        if remaining is not None:
            text += f", {clock_text(remaining)} remaining"
            total = elapsed + remaining
            out["pct"] = round(100 * elapsed / total, 1) if total > 0 else 100.0
        out["text"] = text
    else:
        out["text"] = "finishing: writing the bundle and the report"
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def phase_of(snapshot: dict[str, Any]) -> dict[str, Any]:
    """The snapshot's phase (a local run's has one); else one from its state alone (a
    master's: its workers run the engines)."""
    if snapshot.get("phase"):
        return dict(snapshot["phase"])
    state = str(snapshot.get("state") or "idle")
    phase = PHASES.get(state, state)
    return {"phase": phase, "state": state, "text": f"{phase} ({state})", "pct": None}
