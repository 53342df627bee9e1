"""The native file loop (``storage/targets/native/fileloop.c``), when it was built.

The extension is optional (``setup.py`` builds it with ``optional=True``): a machine without a
compiler still installs dbsim, and file sessions then run on Python threads. Everything that
needs to know asks :func:`unavailable` and says why in the run's summary.
"""

from __future__ import annotations

import errno
import os
from typing import Any

try:
    from storage.targets import _fileloop  # type: ignore[attr-defined]
except ImportError as exc:  # not built here: the Python session threads carry the load
    _fileloop = None
    _WHY_NOT = f"native loop unavailable: extension not built ({exc})"
else:
    _WHY_NOT = ""

#: Operation names by code (the C loop's order).
OPS: tuple[str, ...] = tuple(_fileloop.OPS) if _fileloop is not None else ()
CODES: dict[str, int] = {name: code for code, name in enumerate(OPS)}
REFUSED_LINKS = -1
REFUSED_INODE = -2
REFUSED_KIND = -3
NOTHING_TO_REMOVE = -4
UNSUPPORTED_OP = -5
#: A recorded inode no file has: a guarded session writes no file its guard does not list.
UNRECORDED_INODE = 2**64 - 1


def unavailable() -> str:
    """Why the native loop cannot run here ('' when it can)."""
    return _WHY_NOT


def new_loop(**settings: Any) -> Any:
    """One session's native loop (see fileloop.c ``Loop_init`` for the settings)."""
    if _fileloop is None:
        raise RuntimeError(_WHY_NOT)
    return _fileloop.Loop(**settings)


def errno_class(code: int) -> str:
    """The class an errno is counted under, as the Python path names it (ENOSPC …)."""
    return errno.errorcode.get(code, "OSError")


def errno_message(what: str, path: str, code: int) -> str:
    """``filetree: <what> <path>: ENOSPC (No space left on device)``, as the Python path."""
    return f"filetree: {what} {path}: {errno_class(code)} ({os.strerror(code)})"


__all__ = [
    "CODES",
    "NOTHING_TO_REMOVE",
    "OPS",
    "REFUSED_INODE",
    "REFUSED_KIND",
    "REFUSED_LINKS",
    "UNRECORDED_INODE",
    "UNSUPPORTED_OP",
    "errno_class",
    "errno_message",
    "new_loop",
    "unavailable",
]
