"""Standard output whose reader went away (``dbsim run | head -2``, ``dbsim --help | head``).

A reader that stops reading is not dbsim's failure, and for a run it comes mid-way: the run's
summary table is printed at its end, after the bundle is whole. Python raises BrokenPipeError
on the write and Click turned that into exit 1, so ``dbsim run | head -2`` reported a completed
run as failed (seen: the bundle complete, exit 1). Here the first broken write points the
descriptor at /dev/null (the way Python's signal documentation recommends for SIGPIPE), the
rest of the output goes nowhere, and the command returns its own exit code: a completed run
0, an SLO missed 4, a help text 0.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class ReaderGoneStdout:
    """``sys.stdout`` that survives its reader's going: writes and flushes after a broken pipe
    go to /dev/null; every other attribute is the stream's own (``fileno``, ``isatty`` …)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()
            self._stream.flush()  # what the buffer held now goes to /dev/null

    def _to_devnull(self) -> None:
        self.reader_gone = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Replace ``sys.stdout`` by the guard once (a second call, in-process, keeps the first)."""
    if not isinstance(sys.stdout, ReaderGoneStdout) and sys.stdout is not None:
        sys.stdout = ReaderGoneStdout(sys.stdout)
