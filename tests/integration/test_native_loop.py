"""The native file loop (storage/targets/native/fileloop.c) on real trees: it deals exactly the
decks, moves exactly the bytes it counts, names errors as the Python path does, never goes
through a planted link, keeps O_DIRECT aligned, and an open-loop run on it still shows a
storage stall in its p99."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sim.config.scenario import Load
from sim.errors import TargetError
from storage.targets import fileloop
from storage.targets.filetree import FileSession
from tests.integration.test_eda_local import run
from tests.integration.test_tree_guard import SMALL, with_session
from tests.support.loopfs import loop_ext4
from workloads.eda.operations import FrontendSession, count_dealt

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        bool(fileloop.unavailable()), reason=f"!!! NOT RUN: {fileloop.unavailable()}"
    ),
]

TREE = "EDA_FRONTEND-001-1"
FAR_NS = 2**62  # no deadline: the batch runs to its end


def batch(session: FrontendSession, n: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """Run the session's next ``n`` dealt operations natively, closed loop; fold the counts."""
    program = session.native_program()
    codes = program.deck.ahead(n).copy()
    latency = np.zeros(n, dtype=np.int64)
    errors = np.zeros(n, dtype=np.int32)
    args = np.zeros(n, dtype=np.int64)
    generation = np.zeros(1, dtype=np.int64)
    done, _ = program.run(codes, latency, errors, args, generation, 0, n, FAR_NS, False, 0, 0)
    assert done == n
    program.advance(codes, done)
    return program, codes, errors, args


def io_counters() -> tuple[int, int]:
    """(rchar, wchar): bytes this process passed through read and write system calls."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"]), int(fields["wchar"])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_batch_deals_the_exact_mix_and_counts_the_bytes_that_hit_the_files(
    tmp_path: Path,
) -> None:
    decks = 30

    async def body(session: FrontendSession, fs: FileSession) -> None:
        size = sum(session.deck.weights.values())
        await fs.call(session.native_program)  # its set-up reads (imports, the tree) first
        io_counters()
        before = io_counters()
        program, codes, errors, _ = await fs.call(batch, session, decks * size)
        read, written = (now - then for now, then in zip(io_counters(), before, strict=True))
        assert not errors.any(), errors[errors != 0]
        expected = count_dealt(session.deck.weights, session.deck.base, 0, decks * size)
        assert session.dealt == expected
        assert {program.names[c]: n for c, n in enumerate(np.bincount(codes)) if n} == {
            name: n for name, n in expected.items() if n
        }
        block, file_size = session.p.block_size_bytes, session.tree.file_size_bytes
        want_written = (
            expected["write_file"] * file_size
            + expected["random_write"] * block
            + expected["unlink2"] * block  # a deck's data-carrying creates, one per unlink2
        )
        want_read = expected["read_file"] * file_size + expected["random_read"] * block
        assert (fs.bytes_written, fs.bytes_read) == (want_written, want_read)
        assert session.bytes_by_op["write_file"] == expected["write_file"] * file_size
        # What the kernel saw pass through read and write calls: the same bytes (give or take
        # the read of /proc/self/io itself).
        assert 0 <= written - want_written < 4096, (written, want_written)
        assert 0 <= read - want_read < 4096, (read, want_read)

    with_session(tmp_path / "eda", body)
    # Everything the batch created was removed at close.
    leftovers = [
        p for p in (tmp_path / "eda").rglob("*") if p.name.startswith(("new_", "scratch_"))
    ]
    assert leftovers == []


def test_errors_carry_the_errno_names_and_messages_of_the_python_path(tmp_path: Path) -> None:
    data = tmp_path / "eda" / TREE / "dir_00" / "file_00"

    async def body(session: FrontendSession, fs: FileSession) -> None:
        session.data[:] = [str(data)]  # every data operation on the one file
        program = await fs.call(session.native_program)
        data.unlink()
        try:
            await fs.call(fs.read_file, str(data))
        except TargetError as exc:
            python_message = str(exc)
        program.deck = type(program.deck)({"read_file": 1}, "test")
        _, _, errors, args = await fs.call(batch, session, 10)
        assert set(errors.tolist()) == {errno.ENOENT}
        code = fileloop.CODES["read_file"]
        assert program.error_class(int(errors[0])) == "ENOENT"
        assert program.message(code, int(errors[0]), int(args[0])) == python_message

    with_session(tmp_path / "eda", body)


def test_a_planted_symlink_or_hard_link_is_never_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.v"
    victim.write_bytes(b"module top; endmodule\n" * 1000)
    before, mode = sha(victim), victim.stat().st_mode
    base = tmp_path / "eda" / TREE / "dir_00"

    async def body(session: FrontendSession, fs: FileSession) -> None:
        data, empty = base / "file_00", base / "empty_00"
        session.data[:], session.empty[:] = [str(data)], [str(empty)]
        program = await fs.call(session.native_program)
        data.unlink()
        data.symlink_to(victim)
        empty.unlink()
        os.link(victim, empty)
        weights = {"write_file": 1, "random_write": 1, "append": 1, "chmod": 1, "read_file": 1}
        program.deck = type(program.deck)(weights, "test")
        _, codes, errors, args = await fs.call(batch, session, 50)
        by_op = {program.names[c]: int(e) for c, e in zip(codes, errors, strict=True)}
        # Through the symlink: O_NOFOLLOW refuses the open itself.
        assert by_op["write_file"] == by_op["random_write"] == by_op["read_file"] == errno.ELOOP
        # The hard link: opened, seen to have two links, refused before a byte is written.
        assert by_op["append"] == by_op["chmod"] == fileloop.REFUSED_LINKS
        chmod = fileloop.CODES["chmod"]
        at = int(np.flatnonzero(codes == chmod)[0])
        message = program.message(chmod, int(errors[at]), int(args[at]))
        assert (
            message
            == f"filetree: {empty} has 2 hard links (dbsim makes one); refusing to write to it"
        )
        assert program.error_class(int(errors[at])) == "OwnershipError"

    with_session(tmp_path / "eda", body)
    assert sha(victim) == before and victim.stat().st_mode == mode


def test_direct_io_transfers_are_aligned(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    try:
        fd = os.open(probe, os.O_CREAT | os.O_WRONLY | os.O_DIRECT, 0o644)
        os.close(fd)
    except OSError:
        pytest.skip(f"!!! NOT RUN: {tmp_path} does not take O_DIRECT")
    direct = {**SMALL, "direct_io": True, "fsync": "close"}

    async def body(session: FrontendSession, fs: FileSession) -> None:
        weights = {"write_file": 2, "read_file": 2, "random_read": 2, "random_write": 2}
        program = await fs.call(session.native_program)
        program.deck = type(program.deck)(weights, "test")
        _, _, errors, _ = await fs.call(batch, session, 400)
        # The kernel refuses a misaligned O_DIRECT buffer, offset or length with EINVAL.
        assert not errors.any(), set(errors.tolist())
        assert fs.bytes_written > 0 and fs.bytes_read > 0

    with_session(tmp_path / "eda", body, direct)


def freeze(mount: Path, seconds: float) -> None:
    """A real storage stall: the file system frozen (as for a snapshot), so every write to it
    waits until it thaws."""
    subprocess.run(["fsfreeze", "--freeze", str(mount)], check=True)
    try:
        time.sleep(seconds)
    finally:
        subprocess.run(["fsfreeze", "--unfreeze", str(mount)], check=True)


@pytest.mark.root
@pytest.mark.timing  # p50 under 50 ms outside a 200 ms stall: a latency bound
def test_an_open_loop_run_on_the_native_loop_shows_a_storage_stall_in_p99(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.geteuid() != 0 or not shutil.which("fsfreeze"):
        pytest.skip("!!! NOT RUN: needs root and fsfreeze (util-linux)")
    load = Load(mode="open", rate_ops_s=100, warmup_s=0.5, duration_s=4.0, sessions=1)
    params = {
        "component": "EDA_BACKEND",
        "direct_io": True,
        "backend": {
            "processes_per_job_set": 1,
            "file_size_bytes": "1M",
            "dirs": 1,
            "files_per_dir": 4,
            "mix": {"seq_write": 1},
        },
    }
    stalled = threading.Event()
    from sim.core import engine as engine_module

    with loop_ext4(tmp_path / "disk", size_mib=32) as mount:

        def stall_once(engine: Any) -> None:
            while not engine._measuring:
                time.sleep(0.01)
            time.sleep(1.5)
            freeze(mount, 0.2)
            stalled.set()

        started = engine_module.Engine._start_sessions

        def start_and_stall(self: Any, sessions: list[Any]) -> Any:
            threading.Thread(target=stall_once, args=(self,), daemon=True).start()
            return started(self, sessions)

        # The stall starts 1.5 s into the measured window (the real engine, wrapped to know it).
        monkeypatch.setattr(engine_module.Engine, "_start_sessions", start_and_stall)
        _, engine, result, _ = run(mount / "eda", load, **params)
    assert stalled.is_set()
    assert result.session_runner == "native", result.session_runner_why
    stats = engine.recorder.totals["seq_write"]
    assert stats.error_count == 0, stats.errors
    p50 = stats.histogram.get_value_at_percentile(50)
    p99 = stats.histogram.get_value_at_percentile(99)
    assert p50 < 50_000, p50  # µs: the disk keeps up outside the stall
    # Operations due during the 200 ms stall are timed from their intended start.
    assert p99 >= 100_000, p99
    assert stats.histogram.get_max_value() >= 180_000
