"""Load, verify and drop a workload's data outside a run (``dbsim load`` / ``dbsim drop``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from sim.core.cache import check_caches
from sim.core.loading import WAITING
from sim.core.loading import load_and_verify as locked_load
from sim.core.loops import run_opened
from sim.core.progress import ProgressMeter
from sim.protocols import Target, Workload

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

T = TypeVar("T")
SETUP_THREADS = 4
#: Off a terminal, one progress line per step this often (and when the step is done).
PLAIN_PROGRESS_EVERY_S = 5.0


def _with_target(target: Target, work: Callable[[], Awaitable[T]]) -> T:
    return run_opened(target, work, threads=SETUP_THREADS, thread_name="dbsim-setup")


def connect_and_close(target: Target) -> None:
    """Open the target (reachability, credentials) and close it again, touching no data."""

    async def nothing() -> None:
        return None

    _with_target(target, nothing)


def check_loaded(workload: Workload, target: Target) -> dict[str, Any]:
    """What ``run --skip-load`` checks before any session: the data is there and dbsim's
    (MissingDataError / OwnershipError otherwise, both exit 2)."""
    return _with_target(target, workload.check_loaded)


def _progress_bar(console: Console) -> Progress:
    """The load's bar on ``console``; not on a pipe or a file: there the bar draws nothing but
    a stray blank line, which came before the one error line of a target that cannot be
    opened; plain lines instead."""
    from rich.progress import (  # here: see load_and_verify
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
    )

    columns: list[ProgressColumn] = [TextColumn("{task.description}"), BarColumn()]
    columns += [MofNCompleteColumn(), TaskProgressColumn(), TextColumn("{task.fields[rate]}")]
    columns.append(TimeRemainingColumn())
    return Progress(*columns, console=console, transient=True, disable=not console.is_terminal)


def load_and_verify(workload: Workload, target: Target) -> dict[str, Any]:
    """Build the data if needed (idempotent) with a progress bar on stderr, then verify it,
    under the target's load lock (a run or another ``dbsim load`` loading the same data is
    waited for, and said so on stderr)."""
    from rich.console import Console  # here: only the load draws; drop needs no rich (#25)

    console = Console(stderr=True)
    meter = ProgressMeter()
    printed: dict[str, float] = {}
    with _progress_bar(console) as bar:
        tasks: dict[str, Any] = {}

        def on_state(state: str, detail: str) -> None:
            if detail.startswith(WAITING):
                console.print(f"dbsim load: {detail}", highlight=False)

        def progress(what: str, done: int, total: int) -> None:
            meter.update(what, done, total)
            rate = meter.rate(what)
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total, rate="")
            bar.update(tasks[what], completed=done, rate=f"{rate:,.0f}/s" if rate else "")
            now = meter.clock()
            if not console.is_terminal and (
                done >= total
                or now - printed.get(what, -PLAIN_PROGRESS_EVERY_S) >= PLAIN_PROGRESS_EVERY_S
            ):
                printed[what] = now
                line = f"dbsim load: {meter.line(what)}"
                console.print(line, highlight=False, markup=False, soft_wrap=True)

        async def work() -> dict[str, Any]:
            cache = await check_caches(target, workload)
            reports = await locked_load(workload, target, progress, on_state=on_state)
            # Said once the data is there: a load refused (a foreign table, a planted marker)
            # prints its one error line and nothing else. Data small enough to warn about
            # loads quickly, so the line comes soon either way.
            if cache.get("warning"):
                console.print(
                    f"dbsim load: warning: {cache['warning']}",
                    highlight=False,
                    markup=False,
                    soft_wrap=True,
                )
            return {
                "load": reports.load,
                "verify": reports.verify,
                "target": target.describe(),
                "cache": cache,
            }

        return _with_target(target, work)


def drop_objects(workload: Workload, target: Target) -> list[str]:
    return _with_target(target, workload.drop)


__all__ = ["drop_objects", "load_and_verify"]
