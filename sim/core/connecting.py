"""The sessions' connections, made together before any session starts (the SLOB barrier)."""

from __future__ import annotations

import asyncio

from sim.errors import SimError, TargetError
from sim.protocols import Connection, Target


async def connect_all(target: Target, count: int) -> list[Connection]:
    """``count`` connections of ``target``; all or none (a failure closes those made).

    Cancelled (a stop while the sessions connect), it gives back the connections already
    made before it ends: the engine never sees them, and asyncmy's pool close waits for every
    connection out of the pool, so one lost here turned a SIGTERM into a hang (#33)."""
    tasks = [asyncio.ensure_future(target.connect()) for _ in range(count)]
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        made = await asyncio.gather(*tasks, return_exceptions=True)
        await _close([c for c in made if isinstance(c, Connection)])
        raise
    connections = [r for r in results if isinstance(r, Connection)]
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        await _close(connections)
        first = failures[0]
        if isinstance(first, SimError):
            raise first
        raise TargetError(
            f"{len(failures)} of {count} sessions could not connect: {first}"
        ) from first
    return connections


async def _close(connections: list[Connection]) -> None:
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)


__all__ = ["connect_all"]
