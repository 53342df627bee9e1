"""``dbsim check`` on a loop of its own: the target opened and closed around the checks, the
blocking drivers' calls on a thread pool, and Ctrl-C or SIGTERM turned into a cancellation
whose ``finally`` drops what was loaded (the drop line is still printed)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
from collections.abc import Callable
from typing import Any

from sim.check.probe import LATER, PRIVILEGE_LINE, CheckLine, CheckOptions, run_checks
from sim.core.loops import new_event_loop
from sim.protocols import EngineContext, Target

#: The exit codes of a run stopped by these signals (sim.cli.app's EXIT_SIGINT, EXIT_SIGTERM).
STOP_SIGNALS = ((signal.SIGINT, 130), (signal.SIGTERM, 143))
NOT_RUN = (*PRIVILEGE_LINE, *LATER)


async def _open_and_check(
    target: Target,
    options: CheckOptions,
    emit: Callable[[CheckLine], None],
    context: EngineContext,
    blocking: Callable[[Callable[[], Any]], Any],
) -> list[CheckLine]:
    try:
        await target.open(context)
    except Exception as exc:  # the pool or its first connection: the connect line says why
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        lines = [CheckLine("connect", False, text, "check the target's settings")]
        lines += [CheckLine(name, False, "not run: no connection") for name in NOT_RUN]
        lines.append(CheckLine("drop", True, "nothing was created"))
        for line in lines:
            emit(line)
        return lines
    try:
        return await run_checks(target, options, emit, blocking)
    finally:
        await target.close()


def check_target(
    target: Target, options: CheckOptions, emit: Callable[[CheckLine], None]
) -> tuple[list[CheckLine], int | None]:
    """Every check against the (unopened) ``target``; the lines, and the exit code of the
    signal that stopped them (None: they ran to the end)."""
    loop = new_event_loop()
    executor = concurrent.futures.ThreadPoolExecutor(
        options.sessions + 2, thread_name_prefix="dbsim-check"
    )

    def blocking(call: Callable[[], Any]) -> Any:
        return loop.run_in_executor(executor, call)

    context = EngineContext(loop, executor)
    task = loop.create_task(_open_and_check(target, options, emit, context, blocking))
    stopped: list[int] = []
    for signum, code in STOP_SIGNALS:
        loop.add_signal_handler(signum, _stop, task, stopped, code)
    try:
        lines = loop.run_until_complete(task)
    except asyncio.CancelledError:
        lines = []
    finally:
        for signum, _ in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        executor.shutdown(wait=True)
        loop.close()
    return lines, stopped[0] if stopped else None


def _stop(task: asyncio.Task[Any], stopped: list[int], code: int) -> None:
    if not stopped:  # the first signal only: a second must not cut the drop short
        stopped.append(code)
        task.cancel()


__all__ = ["check_target"]
