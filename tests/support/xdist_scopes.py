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
#: The timing phase's longest units, handed out first in this order (longest processing time
#: first, as measured on 2026-12-06: 225, 166, 128, 122, 116 and 82 s), so none starts last
#: and holds the phase alone; the others follow in xdist's order.
LONGEST_FIRST = (
    GROUND_TRUTH_UNIT,
    LOOP_UNIT,
    "tests/integration/test_lab_iops.py",
    "tests/integration/test_replay_fio.py",
    "tests/integration/test_replay_files.py",
    "tests/integration/test_replay_db.py",
)
_PAGE = re.compile(r"\[(?P<page>[^\]]+\.md):\d+\]$")


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
    (``-m timing``), the device modules in their units, :data:`LONGEST_FIRST` handed out first."""

    def __init__(self, config: object, log: object = None) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._timing = (getattr(config, "option", None) and config.option.markexpr) == "timing"  # type: ignore[attr-defined]

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid, self._timing)

    def _assign_work_unit(self, node: object) -> None:
        if self._timing:
            longest_first(self.workqueue)
        super()._assign_work_unit(node)  # type: ignore[arg-type]


def longest_first(workqueue: OrderedDict[str, Any]) -> None:
    """Move the units of :data:`LONGEST_FIRST` still waiting to the queue's head, in order."""
    for scope in reversed(LONGEST_FIRST):
        if scope in workqueue:
            workqueue.move_to_end(scope, last=False)
