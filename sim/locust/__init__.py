"""The Locust integration: the one place in dbsim that imports Locust and gevent.

Locust drives dbsim's engine; it never replaces it. Locust decides how many sessions run and
where (its users, its master/worker mode); dbsim's engine runs them on its own asyncio loop,
times every operation in microseconds and writes the bundle. Modules:

* :mod:`~sim.locust.stats` — a µs-resolution ``bucket_response_time`` and the batch feed of
  Locust's ``RequestStats`` from the engine's interval histograms;
* :mod:`~sim.locust.packets` — intervals and final results as plain (msgpack-ready) dicts,
  and the storage-sample merge rule;
* :mod:`~sim.locust.host` — :class:`~sim.locust.host.EngineHost`: one engine per test start
  per process, on a native thread, sessions = the users Locust placed on this process;
* :mod:`~sim.locust.roles`, :mod:`~sim.locust.master` — what a LocalRunner, a worker and the
  master do with Locust's events and messages;
* :mod:`~sim.locust.merge`, :mod:`~sim.locust.summary` — :class:`~sim.locust.merge.RunMerger`:
  the master merges the workers' histogram deltas and storage samples into one bundle, with a
  summary shaped like a single-process run's plus a per-worker breakdown;
* :mod:`~sim.locust.users`, :mod:`~sim.locust.form` — user classes from the workload registry,
  the start form's parameters;
* :mod:`~sim.locust.webui` — the Storage, Correlation and Run tabs, and ``--web-login``;
  :mod:`~sim.locust.live`, :mod:`~sim.locust.live_routes` — the live page (``/dbsim/live``):
  its charts, verdict and strip of latency beside the limiting device;
* :mod:`~sim.locust.app` — the processes: ``dbsim ui``, ``dbsim worker``;
* :mod:`~sim.locust.secure`, :mod:`~sim.locust.handshake`, :mod:`~sim.locust.workerport` —
  the master's worker port: CURVE keyed by a shared secret, a worker's check of the master's
  security before it joins, and a master that drops malformed messages instead of dying;
* :mod:`~sim.locust.distributed` — ``dbsim run --workers N``.

Why the monkey patching here is partial: Locust's own ``import locust`` runs gevent's
``patch_all()``, which turns ``threading`` into greenlets. The engine's thread pool (SQLite,
pyodbc and file-tree calls) is a ``concurrent.futures.ThreadPoolExecutor``; with threading
patched its "threads" become greenlets on a hub that the engine's native thread never runs,
and every pooled call hangs. So Locust's patch is skipped and gevent patches what Locust relies on
(sockets, DNS, ``time.sleep`` on a hub's thread: :func:`_sleep_where_called`) but not
``thread``, ``queue`` (the executor's work queue), ``select`` (the asyncio fallback loop's
selector), ``subprocess`` and ``os`` (a gevent child watcher only works on the hub's thread,
and the engine's threads start processes too: ``platform.platform()`` in the bundle runs
``uname``) nor ``ssl`` (imported before us by asyncio; Locust's master and workers speak plain
ZeroMQ and HTTP). Locust itself uses no threads, no ``queue`` and no subprocesses.
"""

from __future__ import annotations

import os

# Must precede the first ``import locust`` anywhere in the process (see the module docstring).
os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"

from gevent import monkey


def _sleep_where_called() -> None:
    """``time.sleep`` as gevent's on a thread that runs a hub, the real one on any other.

    gevent's patched ``time.sleep`` gives the native thread that calls it a hub of its own (a
    collector's reader thread, the engine's executor waiting for a subprocess), never
    destroyed: with gevent's monitor on, each such hub gets a monitor thread that reports it
    as blocked every period once its thread idles or ends, for the rest of the process (38
    reports, 0.9 MB of stderr and 0.5 CPU-s a worker in a 2 s two-worker run). A thread
    without a hub has no greenlet to yield to: the real sleep is the same wait, without it.
    """
    import time
    from typing import SupportsIndex

    import gevent
    from gevent._hub_local import get_hub_if_exists

    real_sleep = monkey.get_original("time", "sleep")

    def sleep(seconds: float | SupportsIndex) -> None:
        if get_hub_if_exists() is None:
            real_sleep(seconds)
        else:
            gevent.sleep(seconds)

    time.sleep = sleep


if not monkey.is_module_patched("socket"):
    monkey.patch_all(
        thread=False, queue=False, select=False, ssl=False, subprocess=False, os=False, signal=False
    )
    _sleep_where_called()

import faulthandler  # noqa: E402
import signal  # noqa: E402

import locust  # noqa: E402, F401  (after the patch, on purpose)

# SIGUSR1 writes every thread's stack to stderr: a Locust-hosted run that stops making progress
# (seen twice on 2026-12-06: a worker alive on its heartbeats, its engine silent, no output)
# can then be asked where it is (docs/ui.md). Neither Locust nor gevent uses SIGUSR1.
faulthandler.register(signal.SIGUSR1, all_threads=True)
