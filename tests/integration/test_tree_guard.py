"""A session's own guard: links swapped into a tree *during* a run (after the checks passed)
are never written through — the operation fails alone, naming the object, and the victim is
unchanged. (The CLI traps laid before a run are in tests/e2e/test_tree_safety.py.)"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sim.core.dataset import load_and_verify
from sim.core.loops import new_event_loop
from sim.errors import OwnershipError, TargetError
from sim.protocols import EngineContext
from storage.targets.filetree import FileSession, FileTreeTarget
from storage.targets.settings import FileTreeSettings
from workloads.eda.operations import FrontendSession
from workloads.eda.parameters import EdaParameters
from workloads.eda.workload import EdaWorkload

pytestmark = pytest.mark.integration

SMALL = {
    "component": "EDA_FRONTEND",
    "frontend": {
        "processes_per_job_set": 1,
        "dirs": 2,
        "files_per_dir": 2,
        "empty_files_per_dir": 2,
    },
}


def with_session(
    root: Path,
    body: Callable[[FrontendSession, FileSession], Awaitable[Any]],
    settings: dict[str, Any] | None = None,
) -> Any:
    """Load, verify (which records the guards), open one session and run ``body`` on it."""
    params = EdaParameters.model_validate(settings or SMALL)
    load_and_verify(*_eda(root, params))
    workload, target = _eda(root, params)
    loop = new_event_loop()
    executor = concurrent.futures.ThreadPoolExecutor(2)

    async def main() -> Any:
        await target.open(EngineContext(asyncio.get_running_loop(), executor))
        await workload.verify()
        fs = await target.connect()
        session = workload.new_session(0, fs, 1)
        assert isinstance(session, FrontendSession)
        try:
            return await body(session, fs)
        finally:
            await fs.close()
            await target.close()

    try:
        return loop.run_until_complete(main())
    finally:
        executor.shutdown()
        loop.close()


def _eda(root: Path, params: EdaParameters) -> tuple[EdaWorkload, FileTreeTarget]:
    target = FileTreeTarget(FileTreeSettings(path=root))
    return EdaWorkload(params, target), target


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_hard_link_swapped_in_mid_run_is_refused_by_every_writing_op(tmp_path: Path) -> None:
    victim = tmp_path / "victim.v"
    victim.write_bytes(b"module top; endmodule\n" * 1000)
    before, mode = sha(victim), victim.stat().st_mode
    root = tmp_path / "eda"
    data = root / "EDA_FRONTEND-001-1" / "dir_00" / "file_00"
    empty = root / "EDA_FRONTEND-001-1" / "dir_00" / "empty_00"

    async def body(session: FrontendSession, fs: FileSession) -> list[str]:
        await fs.call(fs.pwrite, str(data), 0, 4096)  # fine before the swap
        for path, target in ((data, victim), (empty, victim)):
            path.unlink()
            os.link(target, path)
        messages = []
        for op in (
            lambda: fs.pwrite(str(data), 0, 4096),
            lambda: fs.write_file(str(data), 16384),
            lambda: fs.append(str(empty), 4096, 16384),
            lambda: fs.chmod(str(empty), 0o600),
        ):
            with pytest.raises(OwnershipError) as caught:
                await fs.call(op)
            messages.append(str(caught.value))
        return messages

    messages = with_session(root, body)
    assert all("has 3 hard links" in m for m in messages), messages  # victim + 2 names
    assert sha(victim) == before and victim.stat().st_mode == mode


def test_a_directory_swapped_for_a_symlink_mid_run_is_never_entered(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    for name in ("file_00", "file_01", "empty_00"):
        (foreign / name).write_bytes(b"theirs\n" * 100)
    before = {p.name: sha(p) for p in foreign.iterdir()}
    root = tmp_path / "eda"
    tree = root / "EDA_FRONTEND-001-1"

    async def body(session: FrontendSession, fs: FileSession) -> str:
        # dir_01 not yet opened by this session: swapped for a link before its first use.
        os.rename(tree / "dir_01", tmp_path / "aside")
        (tree / "dir_01").symlink_to(foreign)
        with pytest.raises(TargetError) as caught:
            await fs.call(fs.pwrite, str(tree / "dir_01" / "file_00"), 0, 4096)
        with pytest.raises(TargetError):
            await fs.call(fs.create, str(tree / "dir_01" / "new_x"), 4096)
        return str(caught.value)

    message = with_session(root, body)
    # O_DIRECTORY|O_NOFOLLOW on a link: ENOTDIR (ELOOP on some kernels)
    assert ("ENOTDIR" in message or "ELOOP" in message) and "dir_01/file_00" in message, message
    assert {p.name: sha(p) for p in foreign.iterdir()} == before


def test_a_file_replaced_by_another_regular_file_mid_run_is_not_written(tmp_path: Path) -> None:
    root = tmp_path / "eda"
    data = root / "EDA_FRONTEND-001-1" / "dir_01" / "file_01"

    async def body(session: FrontendSession, fs: FileSession) -> str:
        size = data.stat().st_size
        (tmp_path / "mine").write_bytes(b"m" * size)
        os.replace(tmp_path / "mine", data)
        with pytest.raises(OwnershipError) as caught:
            await fs.call(fs.write_file, str(data), size)
        assert data.read_bytes() == b"m" * size  # not even truncated
        return str(caught.value)

    assert "is not the file dbsim wrote" in with_session(root, body)
