"""Finishing a run: the final summary, written once, with the SLO verdicts judged on it, then
the report.

:func:`finish_summary` finishes a run in one process (:mod:`sim.run.runner` prepared it);
:func:`write_final_summary` and :func:`judge_errors` also finish the merged bundle of a
distributed run (:mod:`sim.locust.merge`), so both kinds of run write the same summary.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim import registry
from sim.bundle.files import iso, os_reason
from sim.bundle.summary import RunFacts
from sim.bundle.writer import BundleWriter
from sim.config.scenario import ScenarioBase
from sim.core.cache import exercised_section
from sim.core.metrics import OpStats, mix_report
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_FAILED, OUTCOME_INTERRUPTED, RunResult
from sim.core.session_choice import RUNNER_DESCRIPTIONS
from sim.core.validity import error_section, failure_line
from sim.judge.sweep import service_levels
from sim.protocols import Workload
from sim.safeio import strict_json

if TYPE_CHECKING:
    from sim.run.runner import PreparedRun

log = logging.getLogger(__name__)


#: A session that finds its connection lost this soon after another session's reconnection
#: is the same outage: it could only look at its next operation. Native PostgreSQL sessions
#: sharing a thread no longer need it (the group checks every member's connection when one is
#: lost: pgloop_session.reconnect_group; a restart at 5.05 s had been found by two of four at
#: 12.198 s, 1 ms after the first two were back). A session between operations still looks
#: late: in think time on the Python paths (until it wakes) or in an open loop whose next
#: intended start comes after the others are back (a thread per session: MariaDB's native
#: loop, DBSIM_PGLOOP_GROUP=1, asyncpg). 2 s: the reconnect backoff's longest step.
SAME_OUTAGE_GAP_S = 2.0


def outage_windows(outages: list[dict[str, Any]]) -> dict[str, Any]:
    """Sessions' disconnections merged into windows (overlapping ones joined, and one found
    within SAME_OUTAGE_GAP_S of a window's end): when the target was lost and when it was
    back, with how many sessions were affected and when the last of them found its loss
    (``last_lost_t``: how far apart the sessions noticed one outage)."""
    windows: list[dict[str, Any]] = []
    for outage in sorted(outages, key=lambda o: o["lost_t"]):
        if windows and outage["lost_t"] <= windows[-1]["restored_t"] + SAME_OUTAGE_GAP_S:
            last = windows[-1]
            last["restored_t"] = max(last["restored_t"], outage["restored_t"])
            last["last_lost_t"] = outage["lost_t"]  # sorted: the latest so far
            last["sessions"] += 1
        else:
            windows.append(
                {
                    "lost_t": outage["lost_t"],
                    "last_lost_t": outage["lost_t"],
                    "restored_t": outage["restored_t"],
                    "sessions": 1,
                }
            )
    for window in windows:
        window["duration_s"] = round(window["restored_t"] - window["lost_t"], 3)
    return {"windows": windows, "reconnects": len(outages)}


def finish_summary(run: PreparedRun) -> dict[str, Any]:
    """Write the final summary and histograms; returns the summary.

    When the bundle could not be written (now or during the run) the run is ``failed`` with
    the bundle's one-line error, and the summary returned is the complete one held in memory,
    so the caller can still show what was measured; nothing else is written then (SLO
    verdicts and the report would be built on time series that stop early)."""
    engine, bundle, result = run.engine, run.bundle, run.engine.result
    bundle.on_failure = None  # the run is over: a failure now has nothing left to stop
    totals = engine.recorder.totals
    errors = judge_errors(run.scenario, totals, engine.recorder.error_examples, run.workload)
    if result.outcome == OUTCOME_COMPLETED and errors["invalid"]:
        result.outcome = OUTCOME_FAILED
        result.error = failure_line(errors)
        result.reason = "measure: invalid run"
    extra = _summary_extra(run, errors)
    extra["findings"] = _collector_findings(run)
    extra["cache"] = _cache_summary(run)
    for failure in engine.events.failures():
        bundle.add_message(failure)
    bundle.close()  # the time series are complete (a close can fail too: NFS write-back)
    bundle.write_histograms(totals)
    _bundle_failure(run, extra)
    summary = write_final_summary(
        run.scenario,
        bundle,
        result.outcome,
        totals=totals,
        measured_s=result.measured_s,
        extra=extra,
    )
    if _bundle_failure(run, extra):
        # The file keeps its last good version; the caller gets the whole summary, failed.
        return bundle.summary_dict(
            result.outcome, totals=totals, measured_s=result.measured_s, extra=extra
        )
    _write_report(bundle.path)
    return summary


def _summary_extra(run: PreparedRun, errors: dict[str, Any]) -> dict[str, Any]:
    """What the engine's result adds to the bundle's summary: how the run ended, its timing,
    stages, errors, outages, mix, workload reports, target and collectors."""
    engine, result = run.engine, run.engine.result
    totals = engine.recorder.totals
    facts = RunFacts(
        reason=result.reason,
        stopped_early=result.stopped_early,
        last_state=result.last_state,
        error=result.error,
        sessions=result.sessions,
        sessions_started_at=iso(result.sessions_started_wall),
        warmup_s=result.warmup_s,
        measured_s=result.measured_s,
        stages=result.stage_log,
        mix=mix_report(
            run.workload.operations(), totals, run.workload.expected_mix(result.op_ranges)
        ),
        workload={
            "name": run.workload.name,
            "load": result.load_report,
            "verify": result.verify_report,
            "score": _score(run.workload, result, engine.recorder.step_totals),
        },
        target=result.target or run.target.describe(),
        collectors=result.collectors,
        collector_errors=result.collector_errors,
    )
    return facts.summary_fields(
        session_runner={
            "runner": result.session_runner,
            "means": RUNNER_DESCRIPTIONS.get(result.session_runner, ""),
            "why": result.session_runner_why,
        },
        errors=errors,
        outages=outage_windows(result.outages),
        **({"calibration": result.calibration} if result.calibration else {}),
    )


def _collector_findings(run: PreparedRun) -> dict[str, Any]:
    """Each started collector's findings over the measured window (its warnings become the
    bundle's messages); a collector whose findings fail costs only those."""
    engine, bundle, result = run.engine, run.bundle, run.engine.result
    totals = engine.recorder.totals
    findings: dict[str, Any] = {}
    storage_means = bundle.storage_summary()
    op_counts = {name: stats.count for name, stats in totals.items()}
    for collector in engine.started_collectors:
        try:
            facts, warnings = collector.findings(
                storage_means.get(collector.source, {}), op_counts, result.measured_s
            )
        except Exception as exc:  # a finding is a nicety; never lose the summary for it
            log.warning("collector %s findings failed: %s", collector.source, exc)
            continue
        if facts:
            findings[collector.source] = facts
        for warning in warnings:
            bundle.add_message(f"{collector.source}: {warning}")
    return findings


def _cache_summary(run: PreparedRun) -> dict[str, Any]:
    """The summary's ``cache`` section: the pre-load check and whether the devices read at
    all (sim.core.cache), each said in the summary's messages when it warns."""
    bundle, result = run.bundle, run.engine.result
    device_source = registry.collector_with_role(registry.ROLE_DEVICE) or ""
    cache: dict[str, Any] = dict(result.cache)
    cache["exercised"] = exercised_section(
        bundle.storage_summary().get(device_source, {}),
        run.engine.recorder.totals,
        run.workload.read_operations(),
        result.measured_s,
    )
    if cache.get("warning"):
        bundle.add_message(str(cache["warning"]))
    if cache["exercised"].get("exercised") is False:
        bundle.add_message(f"storage not exercised: {cache['exercised']['reason']}")
    return cache


def judge_errors(
    scenario: ScenarioBase,
    totals: Mapping[str, OpStats],
    examples: Mapping[str, Mapping[str, str]],
    workload_ops: Workload | Mapping[str, float],
) -> dict[str, Any]:
    """The summary's ``errors`` section for a finished run (single-process or merged): the
    measured window's failures against ``load.max_error_pct``, or against the scenario's
    error SLOs where it has any (see :mod:`sim.core.validity`)."""
    ops = workload_ops.operations() if isinstance(workload_ops, Workload) else workload_ops
    return error_section(
        totals,
        examples,
        judged_ops=set(ops),
        budget_pct=scenario.load.max_error_pct,
        budget_by_slo=any(slo.error_pct_max is not None for slo in scenario.slos),
    )


def write_final_summary(
    scenario: ScenarioBase,
    bundle: BundleWriter,
    status: str,
    *,
    totals: Mapping[str, OpStats],
    measured_s: float,
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """Write a finished run's summary.json, once, with the scenario's SLO verdicts (and a
    sweep's steps) in it; returns the summary, whole even when the write failed (the file
    then keeps its last good version and the summary holds no verdicts).

    The verdicts are judged on the summary about to be written, as its readers will read it
    (strict JSON): its operations' percentiles (from the measured histograms), their counts
    over the measured window, the devices' means; for a sweep, also on the bundle's time
    series, which must be closed. A bundle that already failed is not judged (its series may
    stop early). Called before the report reads the bundle, by :func:`finish_summary` and by
    the master of ``dbsim run --workers`` on its merged bundle (:mod:`sim.locust.merge`)."""
    levels: dict[str, Any] = {}
    if bundle.failure is None:
        draft = bundle.summary_dict(status, totals=totals, measured_s=measured_s, extra=extra)
        levels = service_levels(scenario, json.loads(strict_json(draft)), bundle.path)
    summary = bundle.write_summary(
        status, totals=totals, measured_s=measured_s, extra={**extra, **levels}
    )
    if bundle.failure is not None:
        for key in levels:  # judged on a bundle that could not be written whole: not shown
            summary.pop(key, None)
    return summary


def _bundle_failure(run: PreparedRun, extra: dict[str, Any]) -> bool:
    """Fold the bundle's failure, if any, into the run's result and ``extra``."""
    if not fold_bundle_failure(run.engine.result, run.bundle.failure):
        return False
    extra.update(reason=run.engine.result.reason, error=run.engine.result.error)
    return True


def fold_bundle_failure(result: RunResult, failure: str | None) -> bool:
    """A run whose bundle could not be written failed, even when the engine counts the stop
    it was asked for as an interruption. An error of the run's own stays first and the
    bundle's is added as a second line (the CLI prints one ``error:`` line per line).
    Idempotent; False when there is no failure."""
    if failure is None:
        return False
    stopped_for_it = result.outcome == OUTCOME_INTERRUPTED and result.reason == failure
    if result.outcome == OUTCOME_FAILED and result.error:
        if failure not in result.error:
            result.error = f"{result.error}\n{failure}; the bundle keeps what was written before"
    elif failure not in (result.error or ""):
        when = f"run stopped during {result.last_state}, " if stopped_for_it else ""
        result.outcome = OUTCOME_FAILED
        result.error = f"{failure}; {when}the bundle keeps what was written before"
        result.reason = f"{result.last_state}: {failure}"
    return True


def _score(
    workload: Workload, result: RunResult, step_ops: dict[Any, Any]
) -> dict[str, Any] | None:
    """The workload's scoring, never fatal to the summary."""
    try:
        return workload.score(result, step_ops)
    except Exception as exc:
        log.warning("workload %s could not score the run: %s", workload.name, exc)
        return {"error": f"{type(exc).__name__}: {exc}"}


def _write_report(path: Path) -> None:
    """analysis.json and report.html: a by-product of the run, so never fatal to it."""
    from sim.report import write_report

    try:
        _, problem = write_report(path)
    except OSError as exc:
        # The disk filled or the bundle became read-only at the very end: every figure is on
        # disk already, so one line saying how to get the report later, not a traceback.
        log.warning(
            "report.html not written: %s: %s; `dbsim report %s` writes it later",
            exc.filename or path,
            os_reason(exc),
            path,
        )
        return
    except Exception:  # the bundle is complete; a report bug must not fail the run
        log.warning("report.html not written", exc_info=True)
        return
    if problem:
        log.warning("report.html written without analysis: %s", problem)


__all__ = [
    "finish_summary",
    "fold_bundle_failure",
    "judge_errors",
    "outage_windows",
    "write_final_summary",
]
