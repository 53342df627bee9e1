"""make test's work units for pytest-xdist (tests/conftest.py): a module is one unit, as with
``--dist loadscope``, but the docs blocks of tests/docs/test_docs.py are one unit per page, and
in the timing phase the ground-truth lab's modules are one unit together.

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
#: --iomix). Each was its own unit (the ground-truth lab's two modules one together,
#: :data:`GROUND_LAB_MODULES`), then one unit again (below).
DEVICE_MODULES = frozenset(
    {
        "tests/integration/test_ground_truth.py",
        "tests/integration/test_ground_truth_array.py",
        "tests/integration/test_lab.py",
        "tests/integration/test_lab_array.py",
        "tests/integration/test_lab_iops.py",
        "tests/integration/test_lab_volumes.py",
        "tests/integration/test_baseline_lab.py",
        "tests/integration/test_replay_fio.py",
        "tests/integration/test_replay_db.py",
        "tests/integration/test_replay_files.py",
        "tests/e2e/test_cache_cli.py",
        "tests/e2e/test_iops_cli.py",
    }
)
#: The device modules in two units of the timing phase, each run one module after another on
#: one worker, the two units beside each other (and beside the other timing tests on a third
#: worker). The ground-truth unit: the modules of the session-scoped ground-truth lab
#: (tests/integration/conftest.py ``ground_lab``: a loop device, PostgreSQL and an 80,000-row
#: table, built once per worker in 7-8 s) with the array's ground truth, whose T3 step at
#: 500 IOPS fell short (430.7) when it ran at the same moment as the lab's 2,000-IOPS T3 step
#: (a unit per module on three workers, session 12): the two heaviest database steps never
#: overlap. The loop unit: every other device module (fio and file replays, the lab's
#: ceilings, the baseline). History: one unit for all (the labs' global cache drop and the
#: shared disk made neighbours disturb each other); a unit per module on three workers
#: (7a5ea23), green twice, then a fio replay 5.8 % over its asked writes beside the other
#: device modules — since traced to the labs' host-wide sync() committing every file system's
#: journal into the replay's device (labs now syncfs only their own, 291f7f4) and to the
#: calibration correcting Poisson noise (b5e7679); so one unit again, until this split.
GROUND_LAB_MODULES = frozenset(
    {
        "tests/integration/test_ground_truth.py",
        "tests/integration/test_ground_truth_array.py",
        "tests/integration/test_lab_iops.py",
        "tests/integration/test_replay_db.py",
    }
)
GROUND_LAB_UNIT = "timing phase: the ground-truth lab"
LOOP_UNIT = "timing phase: the loop devices"
#: The timing phase's longest units, handed out first in this order (longest processing time
#: first), so none starts last and holds the phase alone; the others follow in xdist's order.
LONGEST_FIRST = (GROUND_LAB_UNIT, LOOP_UNIT)
_PAGE = re.compile(r"\[(?P<page>[^\]]+\.md):\d+\]$")


def scope_of(nodeid: str, timing_phase: bool = False) -> str:
    """The work unit of a test: its page for a docs block, in the timing phase the ground-truth
    lab's unit or the loop devices' for a device module, else its module (or class)."""
    module, _, name = nodeid.partition("::")
    if timing_phase and module in GROUND_LAB_MODULES:
        return GROUND_LAB_UNIT
    if timing_phase and module in DEVICE_MODULES:
        return LOOP_UNIT
    if module == DOCS_MODULE and (found := _PAGE.search(name)):
        return f"{DOCS_MODULE}::{found['page']}"
    return nodeid.rsplit("::", 1)[0]


class PageScopes(LoadScopeScheduling):
    """``--dist loadscope`` with a unit per docs page; when the phase selects the timing tests
    (``-m timing``), the device modules in two units, :data:`LONGEST_FIRST` handed out first."""

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
