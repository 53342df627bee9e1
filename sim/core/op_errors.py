"""An operation's error as the run counts it (a class) and shows it (one masked line), shared
by coroutine sessions and session threads."""

from __future__ import annotations

import errno

from sim.errors import SimError
from sim.secrets import redact_known


def error_class(exc: BaseException) -> str:
    """The class errors are counted under: the driver's where one was wrapped, and for an
    operating-system error its errno name (ENOSPC tells more than OSError)."""
    cause = exc.__cause__ if isinstance(exc, SimError) and exc.__cause__ is not None else exc
    errno_code = getattr(cause, "errno", None)
    if isinstance(cause, OSError) and isinstance(errno_code, int) and errno_code in errno.errorcode:
        return errno.errorcode[errno_code]
    return type(cause).__name__


def error_message(exc: BaseException) -> str:
    """An operation's error as one line, masked of secrets (an untranslated driver error may
    echo its connection string): the example the run's error line and report show."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact_known(text)
