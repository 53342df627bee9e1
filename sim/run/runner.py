"""One run, end to end: scenario → target, workload, collectors → engine → bundle.

The CLI, the Locust adapter and the tests all start runs through :func:`prepare_run` and
:func:`finish_summary`, so a bundle looks the same whoever started the run.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from sim import registry
from sim.bundle.files import iso, new_bundle_dir, os_reason
from sim.bundle.summary import RunFacts
from sim.bundle.writer import BundleWriter
from sim.config.resolve import resolved_dict
from sim.config.scenario import CollectorSettings, ScenarioBase
from sim.core.cache import check_caches, exercised_section
from sim.core.calibration import attach as attach_calibration
from sim.core.calibration import check_calibration
from sim.core.engine import Engine
from sim.core.metrics import OpStats, mix_report
from sim.core.result import OUTCOME_COMPLETED, OUTCOME_FAILED, OUTCOME_INTERRUPTED, RunResult
from sim.core.session_threads import RUNNER_DESCRIPTIONS
from sim.core.stages import Stage
from sim.core.validity import error_section, failure_line
from sim.dialects import needs_text, runs_on
from sim.errors import ConfigError, OutputDirectoryError, ScenarioError, SimError
from sim.judge.slo import unknown_operations
from sim.judge.sweep import attach as attach_sweep
from sim.judge.sweep import service_levels
from sim.protocols import Collector, Target, Workload
from sim.safeio import strict_json
from sim.secrets import SecretRef, resolve_secret

log = logging.getLogger(__name__)


@dataclass
class PreparedRun:
    scenario: ScenarioBase
    target: Target
    workload: Workload
    engine: Engine
    bundle: BundleWriter


def build_target(scenario: ScenarioBase) -> Target:
    settings = scenario.target  # type: ignore[attr-defined]
    entry = registry.target(settings.kind)
    if entry.factory is None:
        available = ", ".join(k for k, e in sorted(registry.targets().items()) if e.factory)
        raise ConfigError(
            f"target.kind: {settings.kind} is not available in this version of dbsim yet "
            f"(available: {available})"
        )
    return entry.factory(settings)


def build_workload(scenario: ScenarioBase, target: Target) -> Workload:
    spec = scenario.workload  # type: ignore[attr-defined]
    entry = registry.workload(spec.name)
    needs = entry.workload_class.needs
    if not runs_on(needs, target.kind, getattr(target, "dialect", None)):
        raise ConfigError(
            f"workload.name: {spec.name} does not run on a {target.kind} target "
            f"(it needs {needs_text(needs)})"
        )
    return entry.workload_class(spec.parameters, target)


def _workload_options(workload: Workload) -> dict[str, Any]:
    """What collectors may want to know of the workload: the prefix of its tables, so the
    database collector reports the workload's tables and not the whole database's."""
    pattern = workload.table_pattern()
    return {"table_pattern": pattern} if pattern else {}


def build_collectors(
    settings: CollectorSettings, target: Target, workload_options: dict[str, Any] | None = None
) -> list[Collector]:
    """The collectors a scenario asks for ('auto': every one that applies to the target)."""
    if settings.enabled == "none":
        return []
    known = registry.collectors()
    wanted = list(known) if settings.enabled == "auto" else list(settings.enabled)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ConfigError(
            f"collectors.enabled: unknown collector(s) {', '.join(unknown)} (known: {', '.join(known)})"
        )
    collectors: list[Collector] = []
    for name in wanted:
        options: dict[str, Any] = dict(workload_options or {})
        chosen = getattr(settings, name, None)  # collectors.<source>, when it has options
        if chosen is not None:
            options[name] = chosen
        collectors.extend(known[name].auto(target, options))
    return collectors


def prepare_run(scenario: ScenarioBase, *, skip_load: bool = False) -> PreparedRun:
    """Validate the combination, create the bundle directory and wire the engine's events."""
    target = build_target(scenario)
    workload = build_workload(scenario, target)
    check_slo_operations(scenario, workload)
    check_calibration(scenario)
    settings = scenario.collectors
    engine = Engine(
        workload,
        target,
        scenario.load,
        collector_factory=lambda t: build_collectors(settings, t, _workload_options(workload)),
        interval_s=settings.interval_s,
        collector_timeout_s=settings.timeout_s,
        skip_load=skip_load,
    )
    engine.before_load = _cache_check(engine, workload)
    attach_calibration(engine)  # load asked in device IOPS: calibrate first
    lab_steps = [stage for stage in engine.stages if stage.lab]
    if lab_steps:
        attach_lab(engine)
    path = new_bundle_dir(scenario.output.directory, scenario.output.name or scenario.name)
    try:
        # A bundle that can no longer be written stops the run: measuring on would only
        # produce figures that are lost (finish_summary turns it into a failed run).
        bundle = BundleWriter(
            path,
            resolved_dict(scenario),
            scenario.output.flush_interval_s,
            on_failure=engine.request_stop,
        )
    except OutputDirectoryError:
        # The directory was created a moment ago for this run alone (never reused), so a
        # refused start removes it and leaves the output directory as it was.
        shutil.rmtree(path, ignore_errors=True)
        raise
    bundle.running_extra = {"sessions": engine.max_sessions, "stages": engine.result.stage_log}

    def on_stopping(state: str, detail: str = "") -> None:
        # Folded in as the engine stops, before it announces how the run ended: the console
        # and the "finished" listeners then say "failed", not the "interrupted" of the stop
        # the bundle asked for.
        if state == "stopping":
            _fold_bundle_failure(engine.result, bundle.failure)

    engine.events.state.add_listener(on_stopping)
    attach_sweep(engine, scenario)  # stops a sweep at its first SLO breach
    engine.events.state.add_listener(bundle.on_state)
    engine.events.interval.add_listener(bundle.on_interval)
    engine.events.collector_error.add_listener(bundle.on_collector_error)
    return PreparedRun(scenario, target, workload, engine, bundle)


def check_before_run(scenario: ScenarioBase) -> Target:
    """Everything ``dbsim run`` would refuse before a session starts that can be known without
    connecting: the target kind's driver and local path (``Target.check_paths``), the workload
    on that target, the SLOs' operation names, and every secret reference (an unset variable,
    an unreadable file). Raises the error ``run`` would (exit 2); returns the target, unopened."""
    target = build_target(scenario)
    target.check_paths()
    check_slo_operations(scenario, build_workload(scenario, target))
    check_calibration(scenario)
    sections = {"target": scenario.target, "collectors": scenario.collectors}  # type: ignore[attr-defined]
    for where, ref in secret_references(sections):
        resolve_secret(ref, where)
    return target


def secret_references(sections: Mapping[str, Any]) -> list[tuple[str, SecretRef]]:
    """Each secret reference in the settings, with its dotted place (``target``,
    ``collectors.ontap``)."""
    found: list[tuple[str, SecretRef]] = []
    for where, model in sections.items():
        if isinstance(model, SecretRef):
            found.append((where, model))
        if isinstance(model, BaseModel):
            children = {
                f"{where}.{name}": getattr(model, name) for name in type(model).model_fields
            }
            found.extend(secret_references(children))
    return found


def _cache_check(
    engine: Engine, workload: Workload
) -> Callable[[Target], Awaitable[dict[str, Any]]]:
    """The engine's pre-load hook: the data against the caches, its warning as a notice."""

    async def check(target: Target) -> dict[str, Any]:
        section = await check_caches(target, workload)
        if section.get("warning"):
            engine.events.notice.fire(message=section["warning"])
        return section

    return check


def check_slo_operations(scenario: ScenarioBase, workload: Workload) -> None:
    """Refuse (exit 2, one line each) objectives naming an operation the workload does not
    have, before anything runs (``dbsim run`` with and without ``--workers``)."""
    problems = unknown_operations(scenario.slos, workload.operations())
    if problems:
        raise ScenarioError(problems)


def attach_lab(engine: Engine) -> None:
    """Apply each stage's lab ceilings when it starts. Checked now, so a scenario that needs
    the lab fails before anything runs when it is not up (or we are not root)."""
    from storage.lab import Lab, apply_step_ceiling, require_root

    require_root()
    lab = Lab()
    if not lab.status().get("up"):
        raise ConfigError("load.steps[].lab: the lab is not up; start it with `dbsim lab up`")
    names = lab.volume_names()
    for stage in engine.stages:
        volume = (stage.lab or {}).get("volume")
        if stage.lab and (volume not in names if volume else len(names) > 1):
            raise ConfigError(
                f"load.steps[].lab.volume: {'no volume ' + repr(volume) if volume else 'needed'}"
                f" (the lab's volumes: {', '.join(names)})"
            )

    def on_stage(stage: Stage, log: dict[str, Any]) -> None:
        if stage.lab:
            log["lab"] = apply_step_ceiling(lab, stage.lab)

    engine.events.stage.add_listener(on_stage)


def outage_windows(outages: list[dict[str, Any]]) -> dict[str, Any]:
    """Sessions' disconnections merged into windows (overlapping ones joined): when the target
    was lost and when it was back, with how many sessions were affected."""
    windows: list[dict[str, Any]] = []
    for outage in sorted(outages, key=lambda o: o["lost_t"]):
        if windows and outage["lost_t"] <= windows[-1]["restored_t"]:
            last = windows[-1]
            last["restored_t"] = max(last["restored_t"], outage["restored_t"])
            last["sessions"] += 1
        else:
            windows.append(
                {"lost_t": outage["lost_t"], "restored_t": outage["restored_t"], "sessions": 1}
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
    if not _fold_bundle_failure(run.engine.result, run.bundle.failure):
        return False
    extra.update(reason=run.engine.result.reason, error=run.engine.result.error)
    return True


def _fold_bundle_failure(result: RunResult, failure: str | None) -> bool:
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
    "PreparedRun",
    "SimError",
    "build_collectors",
    "check_slo_operations",
    "finish_summary",
    "judge_errors",
    "prepare_run",
    "write_final_summary",
]
