"""The lab array's service model: a QoS policy group behind a FIFO queue, then the array.

Every request joins one first-in-first-out queue (ONTAP's QoS delay centre). The policy lets
requests leave it at no more than ``max_iops`` a second and ``max_bps`` bytes a second: a
request's turn starts when the one before it has used its share of the ceiling (1 / max_iops
seconds, or its size / max_bps, whichever is longer). Then the array serves it in
``service_s`` (a base service time; requests are served in parallel, as an array's many
drives and cache do). Below the ceiling latency is the service time; past it the queue grows
and every request waits its turn, so latency rises with the offered load, as on a real LUN
with a QoS policy. The model is pure arithmetic on the times given, so it is tested without
a clock.

The array's files live here too: the policy the lab writes (``policy.json``) and the
cumulative counters the array process writes (``counters.json``: ops, bytes, latency and QoS
delay in µs per read and write, with the time they were read), both JSON renamed into place.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_SERVICE_US = 500
LUN = "lun"
POLICY_FILE = "policy.json"
COUNTERS_FILE = "counters.json"


def read_policy(directory: Path) -> Policy:
    """The policy recorded in ``directory`` (the default one when there is none)."""
    try:
        return Policy.from_dict(json.loads((directory / POLICY_FILE).read_text()))
    except (OSError, ValueError):
        return Policy()


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Written to a temporary name and renamed: a reader never sees half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def read_counters(directory: Path) -> dict[str, Any] | None:
    """The counters the array last wrote, or None when there are none yet."""
    try:
        data = json.loads((directory / COUNTERS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@dataclass(frozen=True)
class Policy:
    """A QoS policy group: ``max_iops`` and ``max_bps`` (None: unlimited), and the array's
    base service time in microseconds."""

    max_iops: int | None = None
    max_bps: int | None = None
    service_us: int = DEFAULT_SERVICE_US

    def as_dict(self) -> dict[str, int | None]:
        return {"max_iops": self.max_iops, "max_bps": self.max_bps, "service_us": self.service_us}

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Policy:
        def whole(key: str) -> int | None:
            value = data.get(key)
            return int(value) if isinstance(value, int) and value > 0 else None

        service = data.get("service_us", DEFAULT_SERVICE_US)
        return cls(
            whole("max_iops"),
            whole("max_bps"),
            int(service) if isinstance(service, int) else DEFAULT_SERVICE_US,
        )


@dataclass(frozen=True)
class Admission:
    """When a request left the QoS queue and when the array answers it (seconds, the
    caller's clock); ``qos_delay_s`` is the time it waited its turn."""

    start_s: float
    done_s: float
    qos_delay_s: float


class QosQueue:
    """The FIFO queue in front of the policy; thread-safe (FUSE serves requests on many
    threads)."""

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._next_free_s = 0.0
        self._lock = threading.Lock()

    @property
    def policy(self) -> Policy:
        return self._policy

    def set_policy(self, policy: Policy) -> None:
        """A new policy applies to requests that arrive from now on."""
        with self._lock:
            self._policy = policy

    def admit(self, nbytes: int, now_s: float) -> Admission:
        """Queue a request of ``nbytes`` arriving at ``now_s``."""
        with self._lock:
            policy = self._policy
            share = 0.0
            if policy.max_iops:
                share = 1.0 / policy.max_iops
            if policy.max_bps:
                share = max(share, nbytes / policy.max_bps)
            start = max(now_s, self._next_free_s)
            self._next_free_s = start + share
        return Admission(start, start + policy.service_us / 1e6, start - now_s)
