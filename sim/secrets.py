"""Secrets come from environment variables or files only, and never leave memory.

A connection setting holds a *reference* (``password_env: NAME`` or ``password_file: PATH``);
``resolve_secret`` reads it at connect time. A literal ``password`` in a scenario is refused
(settings forbid unknown keys; ``sim.scenario`` words the message for the keys listed here).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from sim.errors import ConfigError

LITERAL_SECRET_KEYS = ("password", "passwd", "secret", "token")


class SecretRef(BaseModel):
    """Where a password comes from: an environment variable or a file (first line)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    password_env: str | None = None
    password_file: Path | None = None


def resolve_secret(ref: SecretRef, what: str) -> str | None:
    """The secret's value, or None when no reference is set. Never logs the value."""
    if ref.password_env:
        value = os.environ.get(ref.password_env)
        if value is None:
            raise ConfigError(
                f"{what}.password_env: environment variable {ref.password_env} is not set"
            )
        return value
    if ref.password_file:
        try:
            return ref.password_file.read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, IndexError) as exc:
            raise ConfigError(
                f"{what}.password_file: cannot read {ref.password_file}: {exc}"
            ) from exc
    return None


def redact(text: str, secrets: list[str]) -> str:
    """Replace every known secret value in ``text`` (for messages from drivers)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
