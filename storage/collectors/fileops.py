"""The ``fileops`` collector: the file system calls made on the watched file systems, per
class and per second, with the mean size of reads and writes, from eBPF.

What a file workload asks of its storage, which the block devices below it do not show: a
build's ``stat``/``open``/``LOOKUP`` storm, an EDA tree's creates and removes. The classes are
NFS's operation names (GETATTR, ACCESS, SETATTR, READ, WRITE, CREATE, MKDIR, REMOVE, RENAME,
READDIR, LINK, LOOKUP) plus OPEN (NFSv4's), so a capture on a local file system and one on an
NFS mount (the ``nfs`` collector's per-operation counts) speak of the same operations; which
system call counts as which, and how its file system is told, is in
:mod:`storage.collectors.fileops_script`.

One ``bpftrace`` process, two probes on the raw system-call tracepoints (every call of every
process passes them: a few hundred nanoseconds each) and the signal tracepoint its prints are
asked through, as the ``blocklatency`` collector's (:mod:`~storage.collectors.
blocklatency_reader`). Opt-in: ``collectors.fileops.enabled: true`` (``--set
collectors.fileops.enabled=true`` on the command line), since it costs every process of the
host. The call numbers are x86_64's; elsewhere, or where eBPF cannot be used, the collector
stays in the run without figures and the summary says why.

Figures per file system (entity: its mount point), per interval: ``<class>_s`` calls per
second, ``read_kib`` and ``write_kib`` (bytes returned per call), ``ops_s`` (all classes).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from sim.errors import CollectorError
from sim.protocols import Collector, Sample, Target
from sim.registry import (
    CollectorEntry,
    Display,
    Figure,
    collector_options,
    register_collector,
)
from storage.collectors.blocklatency import _print_now, ebpf_unavailable
from storage.collectors.blocklatency_reader import BpftraceReader
from storage.collectors.blocklatency_script import kernel_dev
from storage.collectors.fileops_script import (
    CLASSES,
    MAX_MOUNT_CHARS,
    OpCounts,
    bpftrace_script,
    figures,
    parse_tick,
)

SOURCE = "fileops"


class FileOpsOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(
        default=False,
        description="Trace the file system calls on the target's file systems (eBPF, root; "
        "every process's system calls pass the probe).",
    )
    attach_wait_s: float = Field(
        default=0.0,
        ge=0,
        le=120,
        description="Wait this long at most for the probes to attach before the run goes on "
        "(about 5 s here; within collectors.timeout_s). 0: go on, the intervals before they "
        "attached have no figures.",
    )


class _Reader(BpftraceReader):
    def take_lines(self) -> list[list[str]]:
        """Each print's lines since the last call."""
        with self._lock:
            ticks, self._ticks = self._ticks, []
        return [lines for lines, _ in ticks]


def mount_point(path: Path) -> Path:
    """The mount point of the file system ``path`` is on (``os.path.ismount`` walking up)."""
    here = Path(os.path.abspath(path))
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return here


def syscalls_unavailable() -> str | None:
    if platform.machine() != "x86_64":
        return f"the system call numbers are known for x86_64 only (this is {platform.machine()})"
    return ebpf_unavailable()


class FileOpsCollector(Collector):
    """Calls per class per second on each watched file system (see the module's notes).
    ``mounts``: the kernel's s_dev -> the mount point."""

    source: ClassVar[str] = SOURCE

    def __init__(self, mounts: dict[int, str], attach_wait_s: float = 0.0) -> None:
        self.mounts = dict(mounts)
        self.attach_wait_s = attach_wait_s
        self.unavailable: str | None = None
        self._reader: _Reader | None = None
        self._last: float | None = None
        self._attached = False  # bpftrace had attached at the previous sample

    async def start(self, now: float) -> None:
        if self._reader is not None:
            raise CollectorError("fileops collector: started twice")
        self._last = now
        long = [m for m in self.mounts.values() if len(m) > MAX_MOUNT_CHARS]
        self.unavailable = syscalls_unavailable() or (
            f"mount point longer than {MAX_MOUNT_CHARS} characters: {long[0]}" if long else None
        )
        if self.unavailable is not None:
            return
        try:
            self._reader = _Reader(bpftrace_script(self.mounts, os.getpid()), {})
        except OSError as exc:
            self.unavailable = f"cannot start bpftrace: {exc}"
            return
        if self.attach_wait_s > 0:
            # Attached before the run goes on: the first interval is whole.
            self._attached = await self.wait_ready(self.attach_wait_s)

    async def wait_ready(self, timeout_s: float) -> bool:
        """Whether bpftrace attached within ``timeout_s`` (a replay waits for it)."""
        reader = self._reader
        if reader is None:
            return False
        # Imported here: the registry imports every collector to read a scenario, which needs
        # no event loop (dbsim validate, report, import; issue #25).
        import asyncio

        ok = await asyncio.to_thread(reader.ready.wait, timeout_s)
        return bool(ok) and reader.failure is None

    async def sample(self, now: float) -> list[Sample]:
        reader = self._reader
        seconds = now - (self._last if self._last is not None else now)
        self._last = now
        if reader is None:
            return []
        if reader.ready.is_set() and reader.failure is None:
            await _print_now(reader)
        ticks = reader.take_lines()
        if reader.failure is not None and self.unavailable is None:
            self.unavailable = reader.failure
        attached_before, self._attached = self._attached, reader.ready.is_set()
        if not attached_before or self.unavailable is not None or seconds <= 0:
            return []  # bpftrace attached during this interval: its counts are partial
        interval = {dev: OpCounts() for dev in self.mounts}
        for lines in ticks:
            for dev, counts in parse_tick(lines).items():
                if dev in interval:
                    interval[dev].merge(counts)
        return [
            Sample(self.source, self.mounts[dev], figures(counts, seconds), t=now)
            for dev, counts in sorted(interval.items(), key=lambda kv: self.mounts[kv[0]])
        ]

    async def stop(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            import asyncio  # here: see wait_ready

            await asyncio.to_thread(reader.stop)
            if reader.failure is not None and self.unavailable is None:
                self.unavailable = reader.failure

    def describe(self) -> dict[str, Any]:
        facts: dict[str, Any] = {
            "source": self.source,
            "file_systems": {m: f"{dev >> 20}:{dev & 0xFFFFF}" for dev, m in self.mounts.items()},
            "measures": "system calls on the file systems, counted at their return, per class "
            f"({', '.join(CLASSES.values())}); reads' and writes' bytes returned",
            "load": "one bpftrace process: the raw system-call tracepoints (every call of "
            "every process passes them), counts printed at each interval's close",
        }
        if self.unavailable is not None:
            facts["unavailable"] = self.unavailable
        return facts

    def findings(
        self, means: Any, op_counts: Any, measured_s: float
    ) -> tuple[dict[str, Any], list[str]]:
        if self.unavailable is not None:
            return {"unavailable": self.unavailable}, [
                f"file system calls not counted: {self.unavailable}"
            ]
        return {}, []


def auto_fileops(target: Target, options: dict[str, Any]) -> list[Collector]:
    """The collector for the file systems of the target's paths, when enabled."""
    chosen = collector_options(FileOpsOptions, SOURCE, options)
    if not chosen.enabled:
        return []
    mounts: dict[int, str] = {}
    for path in target.storage_paths():
        here = Path(os.path.abspath(path))
        while not here.exists() and here != here.parent:
            here = here.parent  # a tree the run is yet to create: its parent's file system
        try:
            st = os.stat(here)
        except OSError:
            continue
        mounts.setdefault(
            kernel_dev(os.major(st.st_dev), os.minor(st.st_dev)), str(mount_point(here))
        )
    return [FileOpsCollector(mounts, chosen.attach_wait_s)] if mounts else []


_FIGURES = (
    Figure("ops_s", "calls/s", "1/s", 1),
    Figure("getattr_s", "GETATTR/s", "1/s", 1),
    Figure("read_s", "READ/s", "1/s", 1),
    Figure("write_s", "WRITE/s", "1/s", 1),
    Figure("create_s", "CREATE/s", "1/s", 1),
    Figure("remove_s", "REMOVE/s", "1/s", 1),
)

register_collector(
    CollectorEntry(
        source=SOURCE,
        auto=auto_fileops,
        summary="file system calls per class (GETATTR, READ, WRITE, CREATE, REMOVE …) per "
        "second on the target's file systems, from the system-call tracepoints with bpftrace "
        "(root, opt-in: collectors.fileops.enabled)",
        options_model=FileOpsOptions,
        display=Display(
            title="file system calls",
            entity_label="file system",
            console=_FIGURES,
            console_title="file system calls (eBPF, per second, measured window)",
            report=_FIGURES,
            report_caption="File system calls per class per second (eBPF system-call "
            "tracepoints; samples {samples})",
        ),
    )
)
