"""Loading a workload's data under its target's load lock.

What a run (:mod:`sim.core.engine`), ``dbsim load`` (:mod:`sim.core.dataset`) and a distributed run's
elected loader (:mod:`sim.locust.loading`) share: the build (``workload.load``, idempotent)
and its verification happen inside :meth:`~sim.protocols.Target.load_lock`, exclusive, so two
loaders of one target never interleave whoever started them; a verification alone
(``build=False``: another process loaded) holds the lock shared, so verifiers run together but
never while a loader builds. Also here, free of Locust: which workers of a distributed run load
(:func:`elect_loaders`, used by :mod:`sim.locust.loading`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.protocols import SCOPE_HOST, SCOPE_PROCESS, ProgressCallback, Target, Workload

StateCallback = Callable[[str, str], None]
"""``on_state(state, detail)``: "loading" / "verifying", and what is being waited for."""

STATE_LOADING = "loading"
STATE_VERIFYING = "verifying"
WAITING = "waiting for another loader of "


@dataclass
class LoadReports:
    """What loading and verifying found, filled in place as they go (a failed verification
    keeps the load's facts). ``load["lock"]`` records the lock held (or why none)."""

    load: dict[str, Any] = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)


async def load_and_verify(
    workload: Workload,
    target: Target,
    progress: ProgressCallback,
    *,
    build: bool = True,
    on_state: StateCallback | None = None,
    reports: LoadReports | None = None,
) -> LoadReports:
    """Build (unless ``build`` is False) and verify ``workload``'s data on the opened
    ``target``, under its load lock; raises what the workload or the target raise."""
    reports = reports if reports is not None else LoadReports()
    first = STATE_LOADING if build else STATE_VERIFYING

    def state(name: str, detail: str) -> None:
        if on_state is not None:
            on_state(name, detail)

    state(first, workload.name)
    lock_cm = target.load_lock(
        workload.load_key(), shared=not build, on_wait=lambda what: state(first, WAITING + what)
    )
    async with lock_cm as lock:
        reports.load["lock"] = lock.describe()
        if build:
            if lock.waited_s > 0:
                state(STATE_LOADING, workload.name)
            reports.load.update(await workload.load(progress))
        else:
            reports.load["built"] = False
            reports.load["verify_only"] = True
        state(STATE_VERIFYING, workload.name)
        reports.verify.update(await workload.verify())
    return reports


# --------------------------------------------------------------------------- distributed runs


def host_of(client_id: str) -> str:
    """The host a Locust worker runs on: its client id is ``<hostname>_<uuid hex>``."""
    return client_id.rsplit("_", 1)[0]


def elect_loaders(workers: Mapping[str, int], scope: str) -> list[str]:
    """The client ids that load, in the order they load: ``workers`` maps client id → worker
    index. ``shared``: the lowest index; ``host``: the lowest index on each host; ``process``:
    nobody (every engine loads its own private data)."""
    ordered = sorted(workers, key=workers.__getitem__)
    if scope == SCOPE_PROCESS or not ordered:
        return []
    if scope == SCOPE_HOST:
        first: dict[str, str] = {}
        for cid in ordered:
            first.setdefault(host_of(cid), cid)
        return list(first.values())
    return ordered[:1]


def built_anything(report: Mapping[str, Any]) -> bool:
    """Whether a workload's load report says it built something: a true (or non-empty)
    ``built`` at the top (SSB, EDA's list of trees) or in any of its ``tables`` (SLOB)."""
    if report.get("built"):
        return True
    return any(isinstance(t, Mapping) and t.get("built") for t in report.get("tables") or [])
