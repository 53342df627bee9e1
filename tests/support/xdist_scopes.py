"""make test's work units for pytest-xdist (tests/conftest.py): a module is one unit, as with
``--dist loadscope``, but the docs blocks of tests/docs/test_docs.py are one unit per page, and
in the timing phase the device modules are in the units of :data:`DEVICE_UNITS`.

A page's blocks share its working directory and build on each other in page order (a block
runs what an earlier one wrote), so they stay together and in order on one worker; different
pages share nothing (each worker makes its own page directories).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any

from xdist.scheduler import LoadScopeScheduling

DOCS_MODULE = "tests/docs/test_docs.py"

#: The timing modules that hold a lab device at a ceiling, judge a rate or a latency against
#: one, or need their data to stay in the page cache. They used to run one after another as
#: one unit, because they disturbed each other through the host: a lab's ``up`` dropped every
#: cache of the host (a neighbour's loop device then read from the disk), and the loop devices'
#: images shared the host's one disk (a busy neighbour held a 2000-IOPS step to 899; a replay's
#: burst delivered 964.9 of 765.4 IOPS asked). Since then a lab drops only its own files'
#: pages (storage/lab/pagecache.py) and every test's images are on a tmpfs of its own
#: (tests/support/ramdisk.py), so beside each other they share only the two CPUs — no more
#: than the `stress-ng --cpu 2` the timing phase must hold beside (tests/README.md) — and,
#: until the labs synced only their own file systems (storage/lab/pagecache.py), the labs'
#: host-wide sync(): it made every other test's ext4 commit its journal, whose blocks and
#: flushes were counted as that test's writes (a fio replay's calibration 217 writes/s for
#: fio's 203). A sync() from anything else on the host still does (someone's stress-ng
#: --iomix). Their units are below.
#: The device modules' units in the timing phase. A unit runs its modules one after another
#: on one worker; units run beside each other and beside the other timing tests.
#: The ground-truth unit: the lab's ground truth with the array's, whose T3 step at 500 IOPS
#: fell short (430.7) when it ran at the same moment as the lab's 2,000-IOPS T3 step (a unit
#: per module on three workers, session 12): the two heaviest database steps never overlap.
#: The loop unit: the lab's ceilings, the baseline and the cache and IOPS commands, short
#: modules together. The longest device modules — the fio and file replays, the lab's IOPS
#: control and the database replay — are a unit each: a worker whose module uses the
#: session's ground-truth lab (tests/integration/conftest.py ``ground_lab``) builds its own
#: (7-8 s), on a port of its own. History: one unit for all (the labs' global cache drop and
#: the shared disk made neighbours disturb each other); a unit per module on three workers
#: (7a5ea23), then a fio replay 5.8 % over its asked writes beside the other device modules —
#: since traced to the labs' host-wide sync() committing every file system's journal into the
#: replay's device (labs now syncfs only their own, 291f7f4) and to the calibration
#: correcting Poisson noise (b5e7679); then one unit again; then two (the ground-truth lab's
#: four modules, 435 s, and the loop devices', 404 s, which held the phase to 413-463 s);
#: now these six.
GROUND_TRUTH_UNIT = "timing phase: the ground truths"
LOOP_UNIT = "timing phase: the lab's ceilings"
DEVICE_UNITS: dict[str, str] = {
    "tests/integration/test_ground_truth.py": GROUND_TRUTH_UNIT,
    "tests/integration/test_ground_truth_array.py": GROUND_TRUTH_UNIT,
    "tests/integration/test_lab.py": LOOP_UNIT,
    "tests/integration/test_lab_array.py": LOOP_UNIT,
    "tests/integration/test_lab_volumes.py": LOOP_UNIT,
    "tests/integration/test_baseline_lab.py": LOOP_UNIT,
    "tests/e2e/test_cache_cli.py": LOOP_UNIT,
    "tests/e2e/test_iops_cli.py": LOOP_UNIT,
    "tests/integration/test_lab_iops.py": "tests/integration/test_lab_iops.py",
    "tests/integration/test_replay_fio.py": "tests/integration/test_replay_fio.py",
    "tests/integration/test_replay_files.py": "tests/integration/test_replay_files.py",
    "tests/integration/test_replay_db.py": "tests/integration/test_replay_db.py",
}
DEVICE_MODULES = frozenset(DEVICE_UNITS)
#: Each timing unit's seconds on one worker: its tests' setup, call and teardown summed from
#: the JUnit XML of two fresh-clone `make test` runs' timing phase (2026-12-06 evening, session
#: 22; their mean). The phase is planned from them (:class:`PageScopes`); a unit not listed
#: counts :data:`UNLISTED_S`. Their order and rough size matter: the figures of the morning
#: had the file and database replays at 83 and 81 s where they now take ~116 and ~93, and
#: planned from those, the same two runs' busiest worker had 341-349 s against 320-330 s
#: planned from these (the phase took 332-337 s, the end's stealing making up part of it).
TIMING_SECONDS: dict[str, float] = {
    GROUND_TRUTH_UNIT: 198,
    LOOP_UNIT: 143,
    "tests/integration/test_lab_iops.py": 138,
    "tests/integration/test_replay_fio.py": 124,
    "tests/integration/test_replay_files.py": 116,
    "tests/integration/test_replay_db.py": 93,
    "tests/integration/test_capture_live.py": 59,
    "tests/integration/test_netns_hosts.py": 55,
    "tests/integration/test_engine_pacing.py": 38,
    "tests/integration/test_postgres_physical_reads.py": 37,
    "tests/integration/test_reconnect.py": 31,
    "tests/integration/test_netns_verdict.py": 28,
    "tests/integration/test_eda_local.py": 23,
    "tests/integration/test_netns_array.py": 22,
    "tests/integration/test_pgloop_reconnect.py": 22,
    "tests/e2e/test_capture_cli.py": 20,
    "tests/unit/test_iops_control.py": 20,
    "tests/integration/test_marialoop_reconnect.py": 19,
    "tests/integration/test_pgloop.py": 15,
    "tests/integration/test_odbcloop.py": 15,
    "tests/integration/test_blocklatency_shape.py": 13,
    "tests/integration/test_marialoop.py": 8,
}
UNLISTED_S = 5.0
_PAGE = re.compile(r"\[(?P<page>[^\]]+\.md):\d+\]$")


def is_timing_phase(markexpr: str | None) -> bool:
    """Whether ``-m markexpr`` selects make test's timing phase: ``timing``, or ``timing and
    not long`` (the Makefile's SERIAL_MARKS); not ``not timing …`` (the parallel phase)."""
    return (markexpr or "").split(" and ")[0].strip() == "timing"


def scope_of(nodeid: str, timing_phase: bool = False) -> str:
    """The work unit of a test: its page for a docs block, in the timing phase a device
    module's unit (:data:`DEVICE_UNITS`), else its module (or class)."""
    module, _, name = nodeid.partition("::")
    if timing_phase and module in DEVICE_UNITS:
        return DEVICE_UNITS[module]
    if module == DOCS_MODULE and (found := _PAGE.search(name)):
        return f"{DOCS_MODULE}::{found['page']}"
    return nodeid.rsplit("::", 1)[0]


class PageScopes(LoadScopeScheduling):
    """``--dist loadscope`` with a unit per docs page; when the phase selects the timing tests
    (``-m timing``), the device modules in their units, and the units planned over the workers.

    The plan: the units, longest first (:data:`TIMING_SECONDS`), each to the worker with the
    least planned so far (longest processing time first); a worker is then given its own
    planned units in that order, and one that has run out of its own takes the longest unit
    still waiting. Planned, not handed out from one queue, because xdist gives a worker its
    next unit while it still runs the one before (a worker runs a test only once it knows the
    next: a one-test unit waits for a second unit), and a unit queued so behind a long one
    waited there while other workers stood idle: the phase took 347 s where its units' 1,243 s
    fit in 311 on four workers."""

    def __init__(self, config: object, log: object = None) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._timing = is_timing_phase(getattr(getattr(config, "option", None), "markexpr", ""))
        self._plan: dict[object, list[str]] | None = None

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid, self._timing)

    def _assign_work_unit(self, node: object) -> None:
        if self._timing:
            if self._plan is None:
                plans = plan_units(list(self.workqueue), len(self.nodes))
                self._plan = dict(zip(self.nodes, plans, strict=True))
            scope = next_unit(self._plan.get(node, []), self.workqueue)
            self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)  # type: ignore[arg-type]


def unit_seconds(scope: str) -> float:
    return TIMING_SECONDS.get(scope, UNLISTED_S)


def plan_units(scopes: list[str], workers: int) -> list[list[str]]:
    """Each worker's units: longest first, each to the worker with the least planned so far
    (ties to the lowest worker; the order of equal units is the queue's)."""
    plans: list[list[str]] = [[] for _ in range(workers)]
    planned = [0.0] * workers
    for scope in sorted(scopes, key=unit_seconds, reverse=True):
        worker = planned.index(min(planned))
        plans[worker].append(scope)
        planned[worker] += unit_seconds(scope)
    return plans


def next_unit(plan: list[str], workqueue: OrderedDict[str, Any]) -> str:
    """The worker's next planned unit still waiting (taken off its plan), else the longest
    unit still waiting (another worker's, which has not reached it)."""
    while plan:
        scope = plan.pop(0)
        if scope in workqueue:
            return scope
    return max(workqueue, key=unit_seconds)
