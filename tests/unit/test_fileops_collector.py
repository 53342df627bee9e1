"""The fileops collector without bpftrace: opt-in, the file systems it watches, the interval
its probes attached in left out, and its prints turned into rates."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path
from typing import Any

from storage.collectors import fileops
from storage.collectors.blocklatency_script import kernel_dev
from storage.collectors.fileops import FileOpsCollector, auto_fileops, mount_point
from tests.unit.test_devices import PathsTarget


class _Reader:
    """Stands for the bpftrace process: prints handed over as its reading thread would."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.failure: str | None = None
        self.prints: list[list[str]] = []

    def request_print(self, printed: Any) -> None:
        printed()

    def take_lines(self) -> list[list[str]]:
        out, self.prints = self.prints, []
        return out

    def stop(self) -> None:
        pass


def test_off_unless_enabled_and_a_tree_to_be_made_is_watched_on_its_parent(tmp_path: Path) -> None:
    later = tmp_path / "not" / "yet"
    assert auto_fileops(PathsTarget([later]), {}) == []
    (found,) = auto_fileops(PathsTarget([later]), {"fileops": {"enabled": True}})
    st = os.stat(tmp_path)
    assert isinstance(found, FileOpsCollector)
    assert found.mounts == {
        kernel_dev(os.major(st.st_dev), os.minor(st.st_dev)): str(mount_point(tmp_path))
    }


def test_the_interval_the_probes_attached_in_is_left_out(tmp_path: Path) -> None:
    dev = 7 << 20
    collector = FileOpsCollector({dev: "/mnt"})
    reader = _Reader()
    collector._reader = reader  # type: ignore[assignment]
    collector._last = 0.0

    async def run() -> list[list[Any]]:
        out = []
        reader.ready.set()  # attached during the first interval
        reader.prints.append([f"@ops[{dev}, 3]: 10"])
        out.append(await collector.sample(1.0))
        reader.prints.append(
            [f"@ops[{dev}, 3]: 200", f"@ops[{dev}, 1]: 50", f"@bytes[{dev}, 1]: 204800"]
        )
        out.append(await collector.sample(3.0))
        return out

    first, second = asyncio.run(run())
    assert first == []
    (sample,) = second
    assert sample.entity == "/mnt"
    assert sample.values["getattr_s"] == 100.0 and sample.values["read_s"] == 25.0
    assert sample.values["read_kib"] == 4.0 and sample.values["ops_s"] == 125.0


def test_a_mount_point_too_long_is_said(monkeypatch: Any) -> None:
    monkeypatch.setattr(fileops, "syscalls_unavailable", lambda: None)
    collector = FileOpsCollector({1: "/" + "x" * 200})
    asyncio.run(collector.start(0.0))
    assert "longer than" in str(collector.describe()["unavailable"])
