"""What a live capture's ``summary.json`` says beside the run bundle's common fields:
``kind: capture``, the ``capture`` object of issue #26's spec (origin ``live``, interval, what
only means were available for, the capture's own CPU and memory, the size cap), its timing
and how it ended. Rewritten with every running summary, so a capture killed by SIGKILL still
says what it cost up to its last flush."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim import registry
from sim.bundle.files import iso
from sim.capture.budget import SizeBudget
from sim.capture.own import OwnUsage
from sim.core.result import OUTCOME_INTERRUPTED

KIND_CAPTURE = "capture"
#: Figures of the device-latency source that give the request-size distribution.
SIZE_FIGURE_PREFIX = "size_kib_"


@dataclass
class CaptureFacts:
    """How the capture is going, and then how it ended."""

    interval_s: float
    outcome: str = OUTCOME_INTERRUPTED
    reason: str = ""
    error: str | None = None
    started_wall: float | None = None
    measured_s: float = 0.0
    collectors: list[dict[str, Any]] = field(default_factory=list)
    collector_errors: dict[str, int] = field(default_factory=dict)
    #: The ``capture`` object, updated in place (the running summary holds this very dict).
    capture: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    budget: SizeBudget | None = None

    def running(
        self, target: dict[str, Any], budget: SizeBudget | None, own: OwnUsage
    ) -> dict[str, Any]:
        """The fields every running summary holds (the writer's ``running_extra``)."""
        self.capture.update(
            {
                "origin": "live",
                "format": "live",
                "interval_s": self.interval_s,
                "timezone": "UTC",
                "dropped": [],
                "dropped_count": 0,
                "means_only": [],
                "own": own.describe(),
            }
        )
        if budget is not None:
            self.capture["limits"] = budget.describe()
        self.timing.update(sessions_started_at=iso(self.started_wall), warmup_s=0.0, measured_s=0.0)
        self.budget = budget
        return {
            "kind": KIND_CAPTURE,
            "capture": self.capture,
            "timing": self.timing,
            "sessions": 0,
            "target": target,
            "collectors": self.collectors,
            "collector_errors": self.collector_errors,
        }

    def refresh(self, own: OwnUsage) -> None:
        """After each interval: the capture's cost, its size cap and its length so far."""
        self.capture["own"] = own.describe()
        if self.budget is not None:
            self.capture["limits"] = self.budget.describe()
        self.timing["measured_s"] = round(self.measured_s, 3)


def means_only(storage: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """What the capture could give only as means: without request sizes from eBPF (the
    device-latency source not running, or a version without size counts) the block devices'
    request sizes are iostat's means per interval."""
    device = registry.collector_with_role(registry.ROLE_DEVICE)
    latency = registry.collector_with_role(registry.ROLE_DEVICE_LATENCY)
    if not device or device not in storage:
        return []
    sized = any(
        key.startswith(SIZE_FIGURE_PREFIX)
        for means in storage.get(latency or "", {}).values()
        for key in means
    )
    if sized:
        return []
    # The words of issue #26's spec, which the importers use too.
    return [f"{device}: no request-size distribution (iostat means only)"]


def final_extra(
    facts: CaptureFacts,
    target: dict[str, Any],
    own: OwnUsage,
    storage: dict[str, dict[str, dict[str, Any]]],
) -> dict[str, Any]:
    """The fields the final summary adds: how the capture ended, and the last facts."""
    facts.refresh(own)
    facts.capture["means_only"] = means_only(storage)
    return {
        "kind": KIND_CAPTURE,
        "capture": facts.capture,
        "timing": facts.timing,
        "reason": facts.reason,
        "last_state": "measure",
        "error": facts.error,
        "sessions": 0,
        "target": target,
        "collectors": facts.collectors,
        "collector_errors": facts.collector_errors,
    }


def bundle_bytes(path: Path) -> int:
    """The bundle's size: every regular file under it (a few files, listed each interval)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total
