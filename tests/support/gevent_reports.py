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

Nor is one whose stack ends in ``real_sleep`` (sim/locust/__init__.py): that sleep is taken
only on a thread with no hub of its own, so the hub reported is not that thread's. It is a
hub whose thread had ended (a threadpool worker's), its thread id since given to a new thread
(a collector's reader waiting for its subprocess: ``Popen.wait`` sleeps in a loop), whose
stack the monitor then prints (seen alone, 2026-12-06, at the 0.1 s threshold).

Nor is one where dbsim's innermost frame hands the work to Locust's web stack (Flask, Werkzeug,
Jinja, blinker, Locust): dbsim's request guard (sim/locust/guard.py) wraps every route of
Locust's web UI, so each of Locust's own pages runs "through" dbsim. Seen in a rehearsal's
parallel phase (2026-12-07, CPUs 97 % busy): Locust rendering its index page, the stack ending
in blinker's ``receivers_for``, the guard's pass-through the only dbsim frame. A route of
dbsim's own, called by Flask, has a dbsim frame after Flask's and still counts; so does dbsim
calling a blocking function itself (its frame innermost, or followed by the standard
library's or a driver's).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
PRODUCT_DIRS = tuple(f'File "{_REPO / name}/' for name in ("sim", "workloads", "storage"))


_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+', re.MULTILINE)
#: Locust's web stack: work dbsim's guard hands on is theirs until a dbsim frame comes back.
WEB_STACK = tuple(
    f"/site-packages/{name}/" for name in ("flask", "werkzeug", "jinja2", "blinker", "locust")
)


def hub_blocks_in_dbsim(stderr: str) -> list[str]:
    """The blocked stacks (from "Blocked Stack" to the report's "Info:") whose work at the
    moment of the report was dbsim's (the module docstring says which are not)."""
    stacks = (part.split("Info:", 1)[0] for part in stderr.split("Blocked Stack")[1:])
    return [
        stack
        for stack in stacks
        if "No thread found for hub" not in stack
        and not stack.rstrip().endswith("real_sleep(seconds)")
        and _dbsim_at_work(stack)
    ]


def _dbsim_at_work(stack: str) -> bool:
    """Whether a dbsim frame is in the stack and, after the innermost one, no frame of Locust's
    web stack: dbsim's own code, or what it called itself."""
    paths = [f'File "{m["path"]}' for m in _FRAME.finditer(stack)]
    ours = [i for i, path in enumerate(paths) if path.startswith(PRODUCT_DIRS)]
    if not ours:
        return False
    return not any(web in path for path in paths[ours[-1] + 1 :] for web in WEB_STACK)


def hub_monitor_env(threshold_s: float = 0.1) -> dict[str, str]:
    """The environment that turns gevent's monitor thread on in a child, with its threshold.

    The monitor reports a hub that has not switched for ``threshold_s`` of *wall* time. Run
    alone, that is dbsim's own code holding the hub. Beside make test's other parallel
    workers (``PYTEST_XDIST_WORKER_COUNT``, each with its child processes) on fewer CPUs, the
    same code may wait for a CPU behind them: up to workers / CPUs times as long, so the
    threshold is stretched by that share (0.1 s -> 0.4 s for 8 workers on 2 CPUs), or by the
    host's measured run queue (the 1-minute load average over the CPUs) where that is longer:
    other work beside the suite is as much a neighbour as its workers. A blocking call (a socket
    read, a sleep, a synchronous query on the hub) still shows: they last far longer. Measured:
    three false reports in one parallel phase at 0.1 s (a rich write to a pipe, a gevent
    server's readline), none when each test ran alone; one at 0.4 s (a worker's start-up, in
    Locust's runner) in a parallel phase beside another suite's timing phase.
    """
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    cpus = os.cpu_count() or 1
    share = max(1.0, workers / cpus, os.getloadavg()[0] / cpus)
    return {
        "GEVENT_MONITOR_THREAD_ENABLE": "true",
        "GEVENT_MAX_BLOCKING_TIME": f"{threshold_s * share:g}",
    }
