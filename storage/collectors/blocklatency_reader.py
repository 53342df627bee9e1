"""The ``blocklatency`` collector's bpftrace process, the thread reading what it prints, and
the thread reading the kernel's count of requests in flight.

**Prints on request.** The program prints and clears its counts when the collector asks, not
on a timer: :meth:`BpftraceReader.request_print` sends :data:`PRINT_SIGNAL` (SIGWINCH, which
bpftrace ignores) to the bpftrace process, and the program's probe on the kernel's
``signal:signal_generate`` tracepoint, filtered to that signal sent by the collector's own
process, prints. So bpftrace and the reading thread wake once per interval (the capture's or
the run's, whatever it is, coarsened included) instead of ten times a second, and an
interval's counts end at its close, not up to a timer's period before it. The tracepoint fires
for an ignored signal too (the kernel traces the signal as generated, then ignored) and only
when a signal is sent, so it costs nothing between requests.

**Requests in flight.** ``inflight_max`` is the kernel's own count
(``/sys/class/block/<dev>/inflight``: reads plus writes issued to the driver and not
completed), read every :data:`INFLIGHT_MS` by a thread of its own (one ``pread`` per device
on a file kept open) and once more at each print; a print carries the highest reading since
the previous one. A burst shorter than :data:`INFLIGHT_MS` can fall between two readings.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from storage.collectors.blocklatency_script import PRINT_SIGNAL, READY, TICK, Tick, parse_tick

#: The sampler allows ``stop`` 2 s.
STOP_WAIT_S = 1.5
#: How often the kernel's in-flight counts are read.
INFLIGHT_MS = 100


def dying_with_parent(argv: list[str]) -> list[str]:
    """``argv`` run so that the kernel kills it with SIGKILL when its parent goes
    (PR_SET_PDEATHSIG), set by util-linux's ``setpriv`` before it execs ``argv``.

    Why: the child must not outlive dbsim killed without a chance to stop it (SIGKILL, OOM).
    Not SIGTERM, which bpftrace catches: beside three other suites one was still in epoll_wait
    60 s after its parent's SIGKILL (nothing asks an orphan to print, so nothing woke it). Its
    output has no reader then anyway, and the kernel detaches its probes however it exits.
    Why setpriv and not a ``preexec_fn`` calling prctl: a preexec_fn runs Python in the child
    between fork and exec, which in a process with threads can deadlock on a lock another
    thread held at the fork — a Locust worker (gevent's thread pool, the run's collector
    threads) hung so in ``subprocess``'s wait for the exec, and its run never reported an
    interval. Without setpriv (not util-linux) bpftrace runs without the signal: a dbsim killed
    outright leaves it running until it is killed itself."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else list(argv)


def inflight_count(text: bytes) -> int:
    """The requests in flight in an ``inflight`` file's text (two counts: reads, writes);
    ValueError when it does not hold two counts."""
    reads, writes = text.split()
    return int(reads) + int(writes)


class InflightPeaks:
    """Per device (kernel dev_t -> its ``inflight`` file) the highest of the kernel's
    in-flight counts read every :data:`INFLIGHT_MS` since the last :meth:`take`; a file that
    cannot be opened or read is left out."""

    def __init__(self, files: Mapping[int, Path]) -> None:
        self._fds: dict[int, int] = {}
        for dev, path in files.items():
            with contextlib.suppress(OSError):
                self._fds[dev] = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        self._lock = threading.Lock()
        self._peaks: dict[int, int] = {}
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="blocklatency-inflight", daemon=True)
        if self._fds:
            self._thread.start()

    def read(self) -> None:
        """Read every device's count once, keeping the highest."""
        with self._lock:
            for dev, fd in self._fds.items():
                try:
                    count = inflight_count(os.pread(fd, 64, 0))
                except (OSError, ValueError):
                    continue
                if count > self._peaks.get(dev, -1):
                    self._peaks[dev] = count

    def _run(self) -> None:
        # time.sleep, not Event.wait: the cheaper wake-up (0.06 % against 0.08 % of a core
        # here for ten a second); close() waits one period at most.
        while not self._stopping.is_set():
            time.sleep(INFLIGHT_MS / 1000)
            self.read()

    def take(self) -> dict[int, int]:
        """The highest counts since the last call, a reading taken now included."""
        self.read()
        with self._lock:
            peaks, self._peaks = self._peaks, {}
        return peaks

    def close(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_S)
        with self._lock:
            fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


class BpftraceReader:
    """One bpftrace process and the thread reading its output: each print's lines kept apart
    with the kernel's highest in-flight counts since the previous print (``inflight_files``:
    kernel dev_t -> its ``/sys/class/block/<name>/inflight``), handed over by :meth:`take`.
    ``failure`` says why it ended early, if it did."""

    def __init__(
        self, script: str, inflight_files: Mapping[int, Path], command: str = "bpftrace"
    ) -> None:
        # Its own session: the terminal's Ctrl-C reaches dbsim, whose stop() ends it in order.
        self.process = subprocess.Popen(
            dying_with_parent([command, "-e", script]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # setsid() in C: no Python between fork and exec
        )
        self.ready = threading.Event()
        self.failure: str | None = None
        self.inflight = InflightPeaks(inflight_files)
        self._lock = threading.Lock()
        self._ticks: list[tuple[list[str], dict[int, int]]] = []
        self._on_print: Callable[[], None] | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._read, name="blocklatency", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        building: list[str] = []
        for line in self.process.stdout:
            line = line.rstrip("\n")
            if line == READY:
                self.ready.set()
            elif line == TICK:
                inflight = self.inflight.take()
                with self._lock:
                    self._ticks.append((building, inflight))
                    printed, self._on_print = self._on_print, None
                building = []
                if printed is not None:
                    printed()
            elif line:
                building.append(line)
        code = self.process.wait()
        if not self._stopping:
            assert self.process.stderr is not None
            errors = [ln.strip() for ln in self.process.stderr if "ERROR" in ln]
            # bpftrace warns about RLIMIT_MEMLOCK on kernels that no longer use it: not why.
            errors = [e for e in errors if "RLIMIT_MEMLOCK" not in e] or errors
            self.failure = f"bpftrace exited ({code}): {errors[-1] if errors else 'no message'}"
        self.ready.set()

    def request_print(self, printed: Callable[[], None]) -> None:
        """Ask bpftrace to print its counts now; ``printed`` is called (from the reading
        thread) once the next print has been read, this one or one asked for earlier that
        came late."""
        with self._lock:
            self._on_print = printed
        with contextlib.suppress(OSError):  # gone: the reading thread says why
            self.process.send_signal(PRINT_SIGNAL)

    def take(self) -> list[Tick]:
        """The prints read since the last call, each parsed apart with the kernel's highest
        in-flight counts since the print before it."""
        with self._lock:
            ticks, self._ticks = self._ticks, []
        parsed = []
        for lines, inflight in ticks:
            tick = parse_tick(lines)
            tick.kernel_inflight = inflight
            parsed.append(tick)
        return parsed

    def stop(self) -> None:
        """End the process (SIGTERM, then SIGKILL) and reap it, the reading thread and the
        in-flight reader."""
        self._stopping = True
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._thread.join(STOP_WAIT_S)
        self.inflight.close()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
