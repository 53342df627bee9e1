"""The summary of a distributed run: the keys a single-process run's summary has
(:func:`sim.run.finish.finish_summary`), built from the workers' final reports, plus a
``distributed`` section with the per-worker breakdown and what was lost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sim.bundle.files import iso
from sim.bundle.summary import RunFacts
from sim.core.metrics import mix_report
from sim.core.result import OUTCOME_COMPLETED as STATUS_COMPLETED
from sim.core.result import OUTCOME_FAILED as STATUS_FAILED
from sim.core.result import OUTCOME_INTERRUPTED as STATUS_INTERRUPTED

if TYPE_CHECKING:
    from sim.locust.merge import RunMerger, WorkerRun


def run_status(finals: Sequence[dict[str, Any] | None], stopped_by: str | None) -> str:
    """completed / interrupted / failed over the workers that reported. A lost worker does not
    fail the run (its loss is recorded); a worker whose engine failed does; nobody left to
    report is a failure."""
    outcomes = [f.get("outcome") for f in finals if f is not None]
    if not outcomes:
        return STATUS_FAILED
    if STATUS_FAILED in outcomes:
        return STATUS_FAILED
    if STATUS_INTERRUPTED in outcomes:
        return STATUS_INTERRUPTED
    return STATUS_COMPLETED


def _first(finals: Sequence[dict[str, Any]], key: str, default: Any = None) -> Any:
    for final in finals:
        value = final.get(key)
        if value:
            return value
    return default


def merged_stages(finals: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first worker's stage log with every worker's sessions, target rates and
    per-session counts added up stage by stage: the stages are the same on every worker."""
    logs = [f.get("stages") or [] for f in finals]
    if not logs:
        return []
    out: list[dict[str, Any]] = []
    for position, entry in enumerate(logs[0]):
        stage = dict(entry)
        same = [log[position] for log in logs if len(log) > position]
        stage["sessions"] = sum(int(s.get("sessions") or 0) for s in same)
        rates = [s.get("rate_ops_s") for s in same]
        if all(rate is not None for rate in rates):  # each worker ran its share of the rate
            stage["rate_ops_s"] = round(sum(float(rate) for rate in rates), 6)
        if "session_ops" in stage:
            stage["session_ops"] = [n for s in same for n in s.get("session_ops") or []]
        out.append(stage)
    return out


def mix_section(
    merger: RunMerger, finals: Sequence[dict[str, Any]], complete: bool
) -> dict[str, Any]:
    """Requested versus measured mix over the merged totals; ``exact`` when the counts every
    worker's rule prescribed, summed, were met to the op (no verdict when a worker is lost)."""
    expected = [f.get("expected_mix") for f in finals]
    summed: dict[str, int] | None = None
    if complete and expected and all(e is not None for e in expected):
        summed = {}
        for part in expected:
            assert part is not None
            for name, n in part.items():
                summed[name] = summed.get(name, 0) + int(n)
    return mix_report(_first(finals, "requested_pct", {}), merger.totals, summed)


def loading_section(merger: RunMerger, finals: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``distributed.loading``: who loaded and what (sim.locust.loading), and ``loads``, every
    build pass the run made — the loaders' plus any engine that loaded rather than verified
    (all of them when the target's data is private to each process)."""
    section = dict(merger.loading or {"scope": None, "loaders": []})
    section.pop("load", None)
    section.pop("verify", None)
    engines = sum(
        1
        for f in finals
        if f.get("load") and not f["load"].get("verify_only") and not f.get("load_job")
    )
    section["loads"] = len(section["loaders"]) + engines
    section["engine_loads"] = engines
    return section


def clock_row(worker: WorkerRun, interval_s: float) -> dict[str, Any]:
    """``distributed.workers[].clock``: the offset measured (sim.live.clock) and the
    worker's wall-clock figures on its own clock and corrected to the master's."""
    section = worker.clock.section(interval_s)
    final = worker.final or {}
    walls = {
        "intervals_start": worker.wall0,
        "sessions_started": final.get("sessions_started_wall"),
    }
    section["own_clock"] = {k: v for k, v in walls.items() if v}
    section["master_clock"] = {k: worker.clock.to_master(v) for k, v in walls.items() if v}
    return section


def _worker_row(worker: WorkerRun, interval_s: float) -> dict[str, Any]:
    final = worker.final or {}
    return {
        "index": worker.index,
        "id": worker.client_id,
        "host": worker.host or final.get("host"),
        "sessions": worker.sessions,
        "status": "lost" if worker.lost else final.get("outcome"),
        "reason": worker.lost or final.get("reason") or "",
        "error": final.get("error"),
        "intervals_received": worker.received,
        "last_interval": worker.last_interval,
        "measured_s": round(float(final.get("measured_s") or 0.0), 3) if final else None,
        "operations": {
            name: {"count": s.count, "errors": s.error_count}
            for name, s in sorted(worker.measured.items())
        },
        "clock": clock_row(worker, interval_s),
    }


def _interval_s(merger: RunMerger) -> float:
    return float((merger.scenario.get("collectors") or {}).get("interval_s") or 1.0)


def _sessions_started(workers: Sequence[WorkerRun]) -> list[float]:
    """Each worker's sessions' start on the master's clock (its offset measured, removed)."""
    return [
        w.clock.to_master(float(w.final["sessions_started_wall"]))
        for w in workers
        if w.final is not None and w.final.get("sessions_started_wall")
    ]


def distributed_extra(merger: RunMerger, workers: Sequence[WorkerRun]) -> dict[str, Any]:
    """Everything ``finish_summary`` puts beside the totals, for a merged run."""
    finals = [w.final for w in workers if w.final is not None]
    lost = [w for w in workers if w.lost]
    measured_s = max((float(f.get("measured_s") or 0.0) for f in finals), default=0.0)
    if not measured_s:  # nobody finished: the master's own view of the measured window
        measured_s = merger.measured_s
    collector_errors: dict[str, int] = {}
    for final in finals:
        for source, n in (final.get("collector_errors") or {}).items():
            collector_errors[source] = collector_errors.get(source, 0) + int(n)
    started = _sessions_started(workers)
    stats = merger.environment.stats
    facts = RunFacts(
        reason=merger.stopped_by or _first(finals, "reason", ""),
        last_state=_first(finals, "last_state", "setup"),
        error=_first(finals, "error"),
        sessions=sum(w.sessions for w in workers),
        sessions_started_at=iso(min(started)) if started else None,
        warmup_s=max((float(f.get("warmup_s") or 0) for f in finals), default=0.0),
        measured_s=measured_s,
        stages=merged_stages(finals),
        mix=mix_section(merger, finals, complete=not lost and len(finals) == len(workers)),
        workload={
            "name": (merger.scenario.get("workload") or {}).get("name"),
            # The loader's report where one loaded for everyone (the engines only verified).
            "load": (merger.loading or {}).get("load") or _first(finals, "load", {}),
            "verify": _first(finals, "verify", {}) or (merger.loading or {}).get("verify", {}),
        },
        target=_first(finals, "target", {}),
        collectors=_first(finals, "collectors", []),
        collector_errors=collector_errors,
        # Collectors' findings divide the storage figures by the operations of one process;
        # with several workers on one device they would mislead, so they are left out here.
        findings={},
        stopped_early=any(f.get("stopped_early") for f in finals),
    )
    return facts.summary_fields(
        distributed={
            "run_id": merger.run_id,
            "workers": [_worker_row(w, _interval_s(merger)) for w in workers],
            "lost": [
                {
                    "index": w.index,
                    "id": w.client_id,
                    "host": w.host,
                    "reason": w.lost,
                    "last_interval": w.last_interval,
                    "operations_counted": {n: s.count for n, s in sorted(w.measured.items())},
                }
                for w in lost
            ],
            "loading": loading_section(merger, finals),
            "locust_requests": {
                name: entry.num_requests for (name, _), entry in sorted(stats.entries.items())
            },
            "merge": "interval k = sum of every worker's interval k; totals = sum of every "
            "worker's measured intervals; storage views once per host (process CPU summed)",
        }
    )
