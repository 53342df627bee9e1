"""One run, end to end: scenario → target, workload, collectors → engine → bundle.

The CLI, the Locust adapter and the tests all start runs through :func:`prepare_run` and
finish them through :func:`sim.run.finish.finish_summary`, so a bundle looks the same
whoever started the run.
"""

from __future__ import annotations

import shutil
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from sim import registry
from sim.config.resolve import resolved_dict
from sim.config.scenario import CollectorSettings, ScenarioBase
from sim.core.stages import Stage
from sim.dialects import needs_text, runs_on
from sim.errors import ConfigError, OutputDirectoryError, ScenarioError
from sim.judge.slo import unknown_operations
from sim.protocols import Collector, Target, Workload
from sim.run.calibration import check_calibration
from sim.secrets import SecretRef, resolve_secret

if TYPE_CHECKING:
    from sim.bundle.writer import BundleWriter
    from sim.core.engine import Engine


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
    needs = entry.needs
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
    # Imported here: build_target/build_workload/check_before_run serve load, drop, check and
    # validate too, which run no engine (~20 ms CPU of their start).
    from sim.bundle.files import new_bundle_dir
    from sim.bundle.writer import BundleWriter
    from sim.core.engine import Engine
    from sim.judge.sweep import attach as attach_sweep
    from sim.run.calibration import attach as attach_calibration
    from sim.run.finish import fold_bundle_failure

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
            fold_bundle_failure(engine.result, bundle.failure)

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
    # Imported here: the cache check needs numpy (sim.core.metrics), which validate, load,
    # drop and check, also served by this module, do not (issue #25).
    from sim.core.cache import check_caches

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


__all__ = [
    "PreparedRun",
    "attach_lab",
    "build_collectors",
    "build_target",
    "build_workload",
    "check_before_run",
    "check_slo_operations",
    "prepare_run",
    "secret_references",
]
