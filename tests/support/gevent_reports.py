"""gevent's monitor-thread reports ("… appears to be blocked") read from a child's stderr.

A report is dbsim's fault when its blocked stack runs through dbsim's own code. A block wholly
inside Locust, Flask or the standard library is not: Locust's own ``runner.stop()`` walks
``inspect.stack()``, which resolves the real path of every loaded module on the hub, and on a
loaded 2-core machine that alone can exceed the monitor's threshold (seen in CI).

A report whose stack reads "No thread found for hub" is about a hub whose thread had already
ended when the monitor looked — a gevent threadpool worker, which exists to run blocking work
(dbsim prepares a run there) — so it shows no stack of its own. Its text can still hold a dbsim
frame: output of the other processes of a distributed run is interleaved line by line on the
same stream (seen in CI), so such a report is not counted.
"""

from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
PRODUCT_DIRS = tuple(f'File "{_REPO / name}/' for name in ("sim", "workloads", "storage"))


def hub_blocks_in_dbsim(stderr: str) -> list[str]:
    """The blocked stacks (from "Blocked Stack" to the report's "Info:") with a dbsim frame."""
    stacks = (part.split("Info:", 1)[0] for part in stderr.split("Blocked Stack")[1:])
    return [
        stack
        for stack in stacks
        if "No thread found for hub" not in stack and any(d in stack for d in PRODUCT_DIRS)
    ]
