"""Loading under the load lock, without a server: the lock's polling (wait reported once, a
file system that cannot lock), the election of a distributed run's loaders, lock names."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from sim.core.loading import built_anything, elect_loaders, host_of
from sim.protocols import SCOPE_HOST, SCOPE_PROCESS, SCOPE_SHARED, no_load_lock
from storage.targets import locks
from storage.targets.locks import LockUnsupported, lock_id, polled_lock


def test_a_taken_lock_is_waited_for_and_said_once() -> None:
    answers = [False, False, False, True]
    waits: list[str] = []
    released: list[bool] = []

    async def try_acquire() -> bool:
        return answers.pop(0)

    async def release() -> None:
        released.append(True)

    async def main() -> dict[str, Any]:
        async with polled_lock(
            try_acquire, release, what="db", how="test lock", shared=False, on_wait=waits.append
        ) as lock:
            assert released == []
            return lock.describe()

    locks.LOCK_POLL_S, poll = 0.01, locks.LOCK_POLL_S
    try:
        described = asyncio.run(main())
    finally:
        locks.LOCK_POLL_S = poll
    assert waits == ["db"] and answers == [] and released == [True]
    assert described["held"] is True and described["mode"] == "exclusive"
    assert described["waited_s"] >= 0.03


def test_a_storage_that_cannot_lock_loads_without_one() -> None:
    async def try_acquire() -> bool:
        raise LockUnsupported("flock /mnt/nfs refused (ENOLCK)")

    async def release() -> None:
        raise AssertionError("nothing to release")

    async def main() -> dict[str, Any]:
        async with polled_lock(
            try_acquire, release, what="x", how="-", shared=True, on_wait=None
        ) as lock:
            return lock.describe()

    described = asyncio.run(main())
    assert described == {
        "held": False,
        "how": "none: flock /mnt/nfs refused (ENOLCK)",
        "mode": "shared",
        "waited_s": described["waited_s"],
    }


def test_a_stopped_wait_releases_nothing_and_ends_at_once() -> None:
    released: list[bool] = []

    async def try_acquire() -> bool:
        return False

    async def release() -> None:
        released.append(True)

    async def hold() -> None:
        async with polled_lock(try_acquire, release, what="x", how="-", shared=False, on_wait=None):
            raise AssertionError("never acquired")

    async def main() -> None:
        task = asyncio.ensure_future(hold())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 1.0)

    asyncio.run(main())
    assert released == []


def test_the_directory_flock_excludes_a_second_descriptor(tmp_path: Path) -> None:
    """Two descriptors of one directory (as two processes have): the second cannot take it
    while the first holds it; shared holders share."""
    first, second = locks._DirectoryFlock(tmp_path), locks._DirectoryFlock(tmp_path)
    first.open()
    second.open()
    try:
        assert first.try_lock(shared=False) is True
        assert second.try_lock(shared=False) is False
        assert second.try_lock(shared=True) is False
        first.unlock()
        assert first.try_lock(shared=True) and second.try_lock(shared=True)
    finally:
        first.close()
        second.close()
    assert os.listdir(tmp_path) == []  # nothing created for the lock
    assert errno.ENOLCK in locks.UNSUPPORTED_ERRNOS


def test_no_load_lock_yields_at_once() -> None:
    async def main() -> dict[str, Any]:
        async with no_load_lock("a private temporary database") as lock:
            return lock.describe()

    assert asyncio.run(main())["how"] == "none: a private temporary database"


def test_lock_ids_are_stable_and_in_range() -> None:
    assert lock_id("public", "slob") == lock_id("public", "slob")
    assert lock_id("public", "slob") != lock_id("other", "slob")
    assert lock_id("public", "slob") != lock_id("public", "slob2")
    assert -(2**63) <= lock_id("public", "slob") < 2**63
    assert 0 <= lock_id("SCOTT", "slob", bits=30) < 2**30


def test_loaders_one_per_scope() -> None:
    workers = {"b_2": 2, "a_0": 0, "b_1": 1, "a_3": 3}
    assert host_of("my_host_9f2c") == "my_host"
    assert elect_loaders(workers, SCOPE_SHARED) == ["a_0"]
    assert elect_loaders(workers, SCOPE_HOST) == ["a_0", "b_1"]
    assert elect_loaders(workers, SCOPE_PROCESS) == []
    assert elect_loaders({}, SCOPE_SHARED) == []


@pytest.mark.parametrize(
    ("report", "built"),
    [
        ({"tables": [{"built": False}, {"built": True}]}, True),
        ({"tables": [{"built": False}]}, False),
        ({"built": ["EDA_FRONTEND-001-1"]}, True),
        ({"built": []}, False),
        ({"built": False, "verify_only": True}, False),
    ],
)
def test_built_anything(report: dict[str, Any], built: bool) -> None:
    assert built_anything(report) is built
