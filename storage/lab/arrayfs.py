"""The lab array: a FUSE file system serving one backing file (the LUN) through :mod:`qos`.

Run by the lab as its own process (``python -m storage.lab.arrayfs``), never imported by the
rest of dbsim except for :func:`read_counters`. The file system holds one file, ``lun``, whose
bytes are the backing image's; it is mounted with ``direct_io``, so the kernel's page cache
never answers for it: every block request the loop device above it makes reaches
:meth:`ArrayFs.read` / :meth:`ArrayFs.write`, waits its turn in the QoS queue, is served in the
base service time and is counted. The policy is re-read from ``policy.json`` in the array's
directory whenever that file changes (``dbsim lab set``); the cumulative counters are written
to ``counters.json`` there four times a second, and once more on exit. See docs/lab.md.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import stat
import threading
import time
from pathlib import Path
from typing import Any

from storage.lab import ontap_rest
from storage.lab.qos import COUNTERS_FILE, LUN, POLICY_FILE, QosQueue, read_policy, write_json
from storage.lab.system import ARRAY_NICE, run_session_ahead

COUNTER_PERIOD_S = 0.25
KINDS = ("read", "write")
#: Requests the array takes at once (FUSE threads, and the kernel's background limit).
IN_FLIGHT = 128


class Counters:
    """Cumulative ops, bytes, latency and QoS delay per read and write (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_kind = {
            k: {"ops": 0, "bytes": 0, "latency_us": 0, "qos_delay_us": 0} for k in KINDS
        }

    def add(self, kind: str, nbytes: int, latency_s: float, qos_delay_s: float) -> None:
        with self._lock:
            c = self._by_kind[kind]
            c["ops"] += 1
            c["bytes"] += nbytes
            c["latency_us"] += round(latency_s * 1e6)
            c["qos_delay_us"] += round(qos_delay_s * 1e6)

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {k: dict(v) for k, v in self._by_kind.items()}


class ArrayFs:
    """mfusepy operations: one regular file, ``/lun``, backed by ``backing``."""

    use_ns = True

    def __init__(self, backing: Path, directory: Path) -> None:
        self.directory = directory
        self.fd = os.open(backing, os.O_RDWR)
        self.size = os.fstat(self.fd).st_size
        self.queue = QosQueue(read_policy(directory))
        self.counters = Counters()
        self.started = time.time()

    # ------------------------------------------------------------------ service
    def _serve(self, kind: str, nbytes: int, work: Any) -> Any:
        arrived = time.monotonic()
        admission = self.queue.admit(nbytes, arrived)
        result = work()
        wait = admission.done_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self.counters.add(kind, nbytes, time.monotonic() - arrived, admission.qos_delay_s)
        return result

    def read(self, path: str, size: int, offset: int, fh: Any) -> bytes:
        size = max(0, min(size, self.size - offset))
        return bytes(self._serve("read", size, lambda: os.pread(self.fd, size, offset)))

    def write(self, path: str, data: bytes, offset: int, fh: Any) -> int:
        if offset + len(data) > self.size:
            raise _fuse_error(errno.ENOSPC)
        return int(self._serve("write", len(data), lambda: os.pwrite(self.fd, data, offset)))

    def init_with_config(self, conn: Any, config: Any) -> None:
        """Let the kernel send up to :data:`IN_FLIGHT` requests at once (its default, 12,
        would keep the rest of the queue in the kernel, where the array cannot count it)."""
        if conn is not None:
            conn.max_background = IN_FLIGHT
            conn.congestion_threshold = IN_FLIGHT * 3 // 4

    # ------------------------------------------------------------------ the namespace
    def getattr(self, path: str, fh: Any = None) -> dict[str, Any]:
        now = int(self.started * 1e9)
        times = {"st_atime": now, "st_mtime": now, "st_ctime": now}
        if path == "/":
            return {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2, **times}
        if path == "/" + LUN:
            return {"st_mode": stat.S_IFREG | 0o600, "st_nlink": 1, "st_size": self.size, **times}
        raise _fuse_error(errno.ENOENT)

    def readdir(self, path: str, fh: Any) -> list[str]:
        return [".", "..", LUN]

    def open(self, path: str, fi: Any) -> int:
        if path != "/" + LUN:
            raise _fuse_error(errno.ENOENT)
        fi.direct_io = 1  # no page cache on this file: every request reaches the array
        return 0

    def truncate(self, path: str, length: int, fh: Any = None) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: Any) -> int:
        os.fdatasync(self.fd)
        return 0

    def flush(self, path: str, fh: Any) -> int:
        return 0

    def release(self, path: str, fh: Any) -> int:
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": self.size // 4096, "f_namemax": 255}

    # ------------------------------------------------------------------ policy and counters
    def publish(self) -> None:
        """Write the counters (with the policy in force and the time they were read)."""
        write_json(
            self.directory / COUNTERS_FILE,
            {
                "time": time.time(),
                "started": self.started,
                "pid": os.getpid(),
                "policy": self.queue.policy.as_dict(),
                **self.counters.snapshot(),
            },
        )

    def keeper(self, stop: threading.Event) -> None:
        """Re-read the policy when its file changes; publish the counters."""
        seen: float | None = None
        while not stop.wait(COUNTER_PERIOD_S):
            try:
                mtime = (self.directory / POLICY_FILE).stat().st_mtime_ns
            except OSError:
                mtime = None
            if mtime != seen:
                seen = mtime
                self.queue.set_policy(read_policy(self.directory))
            self.publish()


def _fuse_error(code: int) -> OSError:
    import mfusepy

    return mfusepy.FuseOSError(code)


def _detach(pidfile: Path) -> None:
    """Fork; the parent exits at once, the child leads a new session and writes its pid."""
    if os.fork() > 0:
        os._exit(0)
    os.setsid()
    pidfile.write_text(f"{os.getpid()}\n")


def _run_ahead() -> None:
    """Raise the array's CPU priority (root only; an unprivileged lab keeps its own): its
    own, and its session group's where it leads a session (detached)."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, ARRAY_NICE)
    run_session_ahead(os.getpid(), ARRAY_NICE)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backing", type=Path, required=True)
    parser.add_argument("--dir", type=Path, required=True, help="policy and counters")
    parser.add_argument("--mount", type=Path, required=True)
    parser.add_argument("--fsname", default="dbsim-array")
    parser.add_argument("--volume", default="lun", help="the volume's name, for the REST answers")
    parser.add_argument("--pidfile", type=Path, help="detach, and write the pid here")
    args = parser.parse_args(argv)
    if args.pidfile is not None:
        _detach(args.pidfile)
    _run_ahead()
    import mfusepy  # here: importing it loads libfuse, which only the array's process needs

    fs = ArrayFs(args.backing, args.dir)
    fs.publish()
    if (args.dir / ontap_rest.CERT_FILE).exists():  # the lab made credentials: serve REST
        endpoint = ontap_rest.OntapEndpoint(args.volume, fs.counters.snapshot, args.dir)
        write_json(args.dir / ontap_rest.ENDPOINT_FILE, {"port": endpoint.port})
    stop = threading.Event()
    threading.Thread(target=fs.keeper, args=(stop,), daemon=True).start()
    try:
        mfusepy.FUSE(
            fs,
            str(args.mount),
            foreground=True,
            raw_fi=True,
            direct_io=True,
            fsname=args.fsname,
            max_threads=IN_FLIGHT,
        )
    finally:
        stop.set()
        fs.publish()


if __name__ == "__main__":
    main()
