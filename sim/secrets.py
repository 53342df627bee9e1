"""Secrets come from environment variables or files only, and never leave memory.

A connection setting holds a *reference* (``password_env: NAME`` or ``password_file: PATH``);
``resolve_secret`` reads it at connect time. A literal ``password`` in a scenario is refused
(settings forbid unknown keys; ``sim.config.scenario`` words the message for the keys listed here).

Targets mask their own password in the messages they raise (:func:`redact`). As a second line,
every value ``resolve_secret`` returns is remembered for the life of the process and masked in
whatever text leaves it by another way (:func:`redact_known`): ``--debug`` tracebacks, whose
chained driver exception was never redacted, error lines for exceptions no target translated,
and log records (:class:`RedactingFilter` on the CLI's and Locust's handlers, so the web UI's
Logs tab too).
"""

from __future__ import annotations

import json
import logging
import os
import re
import urllib.parse
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from sim.errors import ConfigError
from sim.safeio import MAX_SECRET_BYTES, read_text_file

LITERAL_SECRET_KEYS = ("password", "passwd", "secret", "token")
# \Z, not $: "$" also matches before a final newline, so "X\n" passed as a name.
ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


class SecretRef(BaseModel):
    """Where a password comes from: an environment variable or a file (first line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    password_env: str | None = None
    password_file: Path | None = None

    @field_validator("password_env")
    @classmethod
    def _a_name(cls, value: str | None) -> str | None:
        # A value that cannot be a variable's name is most likely the password itself, pasted
        # in the wrong place: refuse it without repeating it (a "Value error" line shows no
        # input), before validate prints it or a bundle's scenario.yaml records it.
        if value is not None and not ENV_NAME.match(value):
            raise ValueError(
                "must be the NAME of an environment variable (letters, digits and _, not "
                "starting with a digit); the value is not shown, in case it is the password"
            )
        return value


MASK = "***"
#: Every secret value this process has read (see the module docstring).
_RESOLVED: set[str] = set()


def resolve_secret(ref: SecretRef, what: str) -> str | None:
    """The secret's value, or None when no reference is set. Never logs the value; remembers
    it, so :func:`redact_known` masks it wherever it might surface later."""
    if ref.password_env:
        value = os.environ.get(ref.password_env)
        if value is None:
            raise ConfigError(
                f"{what}.password_env: environment variable {ref.password_env} is not set"
            )
        return _remember(value)
    if ref.password_file:
        # Through sim.safeio, so a FIFO cannot block here, /dev/zero cannot fill memory and a
        # bad byte is one error line. Its messages name the path, never the content.
        text = read_text_file(
            ref.password_file,
            what="password file",
            max_bytes=MAX_SECRET_BYTES,
            label=f"{what}.password_file: ",
        )
        lines = text.splitlines()
        if not lines:
            raise ConfigError(
                f"{what}.password_file: {ref.password_file}: empty (the password is its first line)"
            )
        return _remember(lines[0].strip())
    return None


def remember(value: str) -> str:
    """Treat ``value`` as a secret this process holds: masked by :func:`redact_known` from now
    on (for secrets read elsewhere, e.g. the master's shared secret)."""
    return _remember(value)


def _remember(value: str) -> str:
    if value:
        _RESOLVED.add(value)
    return value


def secret_forms(secret: str) -> list[str]:
    """The ways text can carry ``secret``, longest first: as is, brace-quoted as in an ODBC
    connection string (``}`` doubled: a driver echoing its connection string shows that form,
    not the password), URL-encoded (a DSN URL), and escaped as in JSON or a Python repr."""
    forms = {
        secret,
        secret.replace("}", "}}"),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        json.dumps(secret)[1:-1],
        repr(secret)[1:-1],
    }
    return sorted((form for form in forms if form), key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """Replace every form of every secret value in ``text`` (for messages from drivers)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            for form in secret_forms(secret):
                text = text.replace(form, MASK)
    return text


def redact_known(text: str) -> str:
    """``text`` with every secret this process has resolved masked."""
    return redact(text, list(_RESOLVED)) if _RESOLVED else text


class RedactingFilter(logging.Filter):
    """A handler filter masking the secrets this process resolved in a record's message,
    exception and stack text (on the handler, it sees records from every logger)."""

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        if not _RESOLVED:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: let the handler report it (its handleError)
            return True
        masked = redact_known(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            # The handler's formatter uses exc_text when set: format it here, masked.
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_known(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_known(record.stack_info)
        return True


def install_log_redaction() -> None:
    """Put a :class:`RedactingFilter` on every handler of every logger configured now (the
    root's and, under Locust, its console and web-UI log handlers); once per handler."""
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.root.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    for logger in loggers:
        for handler in logger.handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
