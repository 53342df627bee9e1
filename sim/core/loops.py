"""Event loops for the engine: uvloop when available, on the caller's thread or on a native
OS thread inside a gevent (Locust) process."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from sim.core.engine import Engine
    from sim.protocols import Target

T = TypeVar("T")


def run_opened(
    target: Target, work: Callable[[], Awaitable[T]], *, threads: int, thread_name: str
) -> T:
    """``work()`` on an event loop of its own, between ``target``'s open and close, with a
    pool of ``threads`` for its blocking driver calls (load, verify, drop, the probes).
    Blocking: for commands that run one such step at a time."""
    from sim.protocols import EngineContext

    loop = new_event_loop()
    executor = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix=thread_name)

    async def main() -> T:
        # No sessions: one step at a time, on a connection or two of its own.
        await target.open(EngineContext(loop, executor, sessions=0))
        try:
            return await work()
        finally:
            await target.close()

    try:
        return loop.run_until_complete(main())
    finally:
        executor.shutdown(wait=True)
        loop.close()


def run_on_native_thread(
    engine: Engine,
    start_new_thread: Callable[[Callable[..., None], tuple[Any, ...]], Any] | None = None,
    use_uvloop: bool = True,
    on_done: Callable[[], None] | None = None,
) -> None:
    """Run ``engine`` on a new event loop in a native OS thread.

    A gevent (Locust) process passes ``gevent.monkey.get_original('_thread',
    'start_new_thread')``: the loop then lives on a real OS thread, not a greenlet, and never
    blocks the hub. (``threading.Thread`` is no good there even from ``get_original``: its
    ``start()`` and ``is_alive()`` wait on gevent primitives set from the other thread, which
    stalls the hub.) Completion is signalled through ``on_done``, called on the engine thread
    after the loop is closed.
    """

    def body() -> None:
        new_loop = _new_event_loop(use_uvloop)
        try:
            new_loop.run_until_complete(engine.run())
        finally:
            new_loop.close()
            if on_done is not None:
                on_done()

    if start_new_thread is None:
        import _thread

        start_new_thread = _thread.start_new_thread
    start_new_thread(body, ())


def _new_event_loop(use_uvloop: bool) -> asyncio.AbstractEventLoop:
    if use_uvloop:
        try:
            import uvloop

            return uvloop.new_event_loop()
        except ImportError:  # uvloop is a dependency, but a plain loop still works
            pass
    return asyncio.new_event_loop()


def new_event_loop(use_uvloop: bool = True) -> asyncio.AbstractEventLoop:
    """The loop the CLI runs the engine on: uvloop when available."""
    return _new_event_loop(use_uvloop)


def all_done_future(tasks: list[asyncio.Task[None]]) -> asyncio.Future[None]:
    """A future that resolves once every task has finished; cancelling it cancels no task
    (unlike ``asyncio.gather``): the engine's wait for its sessions."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    remaining = len(tasks)

    def one_finished(_: asyncio.Task[None]) -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0 and not done.done():
            done.set_result(None)

    if not tasks:
        done.set_result(None)
    for task in tasks:
        task.add_done_callback(one_finished)
    return done
