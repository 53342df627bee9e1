"""What ``dbsim capture`` is asked to watch, read and checked before anything is opened.

A capture reads the sections of a scenario file that say where production is — ``target``
and ``collectors`` (with ``output`` and ``name``) — plus a ``capture`` section of its own
(``duration_s``, ``max_bytes``, ``paths``); the ``workload``, ``load`` and ``slos`` sections
are ignored, since a capture runs nothing. Command-line options override the file as ``--set``
does (``--target-kind``, ``--host`` … are ``target.*``; ``--path`` adds to ``capture.paths``).
Every problem is one ``field: what is wrong`` line (exit 2), as for a run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BaseModel, Field, ValidationError, create_model

from sim import registry
from sim.capture.budget import MIN_MAX_BYTES
from sim.config.resolve import (
    collector_settings_model,
    env_overrides,
    literal_secrets,
    read_scenario_file,
    shape_problems,
)
from sim.config.scenario import ENV_PREFIX, Output, StrictModel
from sim.errors import ScenarioError
from sim.field_errors import error_lines
from sim.pathcheck import path_problems

#: Sections of a scenario file a capture has no use for (it runs no workload).
IGNORED_SECTIONS = ("workload", "load", "slos")
DEFAULT_NAME = "capture"
#: How often a capture rewrites its summary.json unless ``output.flush_interval_s`` says.
CAPTURE_FLUSH_INTERVAL_S = 10.0
#: A capture longer than a year is a typo (a duration in ms?), not a plan.
MAX_DURATION_S = 366 * 86400.0


class CaptureSection(StrictModel):
    """How long a capture runs, how large its bundle may grow and what else it watches."""

    duration_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_DURATION_S,
        description="Stop after this many seconds (default: until SIGINT or SIGTERM).",
    )
    max_bytes: int | None = Field(
        default=None,
        ge=MIN_MAX_BYTES,
        description="Size cap of the bundle: past half of it the interval doubles, and so on; "
        "when even the coarsest interval no longer fits, the capture stops (completed).",
    )
    paths: list[Path] = Field(
        default_factory=list,
        description="Local paths whose block devices (or NFS mounts) are watched as well.",
    )


@cache
def capture_model() -> type[BaseModel]:
    """The capture's scenario model: name, target (optional), collectors, output, capture."""
    target_models = tuple(entry.settings_model for entry in registry.targets().values())
    target_union = Annotated[Union[target_models], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007
    return create_model(
        "CaptureScenario",
        __base__=StrictModel,
        name=(
            str,
            Field(default=DEFAULT_NAME, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,80}$"),
        ),
        description=(str, Field(default="")),
        target=(target_union | None, Field(default=None)),
        collectors=(collector_settings_model(), Field(default_factory=collector_settings_model())),
        output=(Output, Field(default_factory=Output)),
        capture=(CaptureSection, Field(default_factory=CaptureSection)),
    )


@dataclass
class CapturePlan:
    """A validated capture: the model (``target`` may be None) and its resolved dict (for the
    bundle's scenario.yaml: secret references only, never secrets)."""

    scenario: Any
    resolved: dict[str, Any]
    ignored: list[str]

    @property
    def target(self) -> Any:
        return self.scenario.target

    @property
    def section(self) -> CaptureSection:
        section: CaptureSection = self.scenario.capture
        return section

    @property
    def interval_s(self) -> float:
        return float(self.scenario.collectors.interval_s)


def _set(data: dict[str, Any], dotted: str, value: Any, origin: str) -> None:
    node = data
    keys = dotted.split(".")
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ScenarioError([f"{origin}: {'.'.join(keys[:-1])} is not a section"])
        node = child
    node[keys[-1]] = value


def resolve_capture(
    path: Path | None,
    overrides: list[tuple[str, Any]],
    extra_paths: list[Path] | None = None,
    environ: Mapping[str, str] | None = None,
) -> CapturePlan:
    """Read the scenario file (when given), apply ``DBSIM_*`` and the command line's
    overrides, validate. ``extra_paths`` (``--path``) are added to ``capture.paths``."""
    data = read_scenario_file(path) if path is not None else {}
    ignored = [name for name in IGNORED_SECTIONS if data.pop(name, None) is not None]
    for dotted, value in env_overrides(os.environ if environ is None else environ):
        if dotted.split(".")[0] not in IGNORED_SECTIONS:
            _set(data, dotted, value, f"environment {ENV_PREFIX}{dotted.upper()}")
    for dotted, value in overrides:
        _set(data, dotted, value, dotted)
    output = data.setdefault("output", {})
    if isinstance(output, dict):
        # The summary is rewritten (and fsynced) at each flush, on a disk that may be the one
        # watched; the time series are appended every interval whatever this is.
        output.setdefault("flush_interval_s", CAPTURE_FLUSH_INTERVAL_S)
    if extra_paths:
        section = data.setdefault("capture", {})
        if not isinstance(section, dict):
            raise ScenarioError(["capture: is not a section"])
        section["paths"] = [*(section.get("paths") or []), *(str(p) for p in extra_paths)]
    scenario = _validate(data)
    if scenario.target is None and not scenario.capture.paths:
        raise ScenarioError(
            [
                "target: nothing to watch: give a scenario with a target, --target-kind "
                "(postgres, mysql …) or --path DIR"
            ]
        )
    return CapturePlan(scenario, scenario.model_dump(mode="json"), ignored)


def _validate(data: dict[str, Any]) -> Any:
    shape = shape_problems(data)
    if shape:
        raise ScenarioError(shape)
    secrets, data = literal_secrets(data)
    try:
        scenario = capture_model().model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(secrets + error_lines(exc)) from None
    problems = secrets + path_problems(scenario)
    if problems:
        raise ScenarioError(problems)
    return scenario
