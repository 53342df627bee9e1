"""Secret masking (issue #8): every form a driver's text can carry a password in, and the
process-wide second line — values ``resolve_secret`` returned are masked in ``--debug``
tracebacks (whose chained driver exception no target redacts), in error lines for exceptions
no target translated, and in log records."""

from __future__ import annotations

import io
import json
import logging
import secrets
import urllib.parse
from pathlib import Path

import pytest

import sim.config.resolve
import sim.secrets
from sim.cli import main
from sim.errors import TargetError
from sim.secrets import (
    MASK,
    RedactingFilter,
    SecretRef,
    redact,
    redact_known,
    resolve_secret,
)

ENV = "DBSIM_UNIT_SECRET"


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    """A password with the characters that change its form in a connection string, a URL
    and JSON; resolved from the environment into a fresh registry."""
    value = f'S3cr3t-unit-{secrets.token_hex(6)}}}+/@"\\'
    monkeypatch.setattr(sim.secrets, "_RESOLVED", set())
    monkeypatch.setenv(ENV, value)
    assert resolve_secret(SecretRef(password_env=ENV), "target") == value
    return value


def test_redact_masks_every_form_a_driver_message_can_carry(secret: str) -> None:
    odbc = f"DRIVER={{X}};UID=u;PWD={{{secret.replace('}', '}}')}}};"  # brace-quoted, } doubled
    url = f"postgresql://u:{urllib.parse.quote(secret, safe='')}@h/db"
    form = f"password={urllib.parse.quote_plus(secret)}"
    escaped = '{"password": ' + json.dumps(secret) + "}"
    for text in (f"plain {secret} text", odbc, url, form, escaped, repr(secret)):
        masked = redact(text, [secret])
        assert secret not in masked and "unit-" not in masked, (text, masked)
        assert MASK in masked
    assert redact("nothing secret here", [secret, ""]) == "nothing secret here"


def test_resolved_values_are_masked_process_wide(secret: str, tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text("from-a-file-Pw0\nsecond line ignored\n", encoding="utf-8")
    assert resolve_secret(SecretRef(password_file=path), "target") == "from-a-file-Pw0"
    text = f"driver said: password={secret} and then from-a-file-Pw0"
    assert redact_known(text) == f"driver said: password={MASK} and then {MASK}"
    assert resolve_secret(SecretRef(), "target") is None  # no reference: nothing remembered


def test_log_records_are_masked_in_message_exception_and_stack(secret: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("tests.unit.secret_redaction")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise RuntimeError(f"connect failed: DSN=x;PWD={secret}")
        except RuntimeError:
            logger.exception("driver error %s", f"password={secret}", stack_info=True)
        logger.warning("plain %s", "nothing to hide")
        logger.warning("malformed %d", "call")  # reported by the handler, never raised here
    finally:
        logger.removeHandler(handler)
    out = stream.getvalue()
    assert "RuntimeError: connect failed: DSN=x;PWD=***" in out, out
    assert "driver error password=***" in out and "plain nothing to hide" in out
    assert secret not in out and "unit-" not in out


def test_debug_traceback_masks_the_chained_driver_exception(
    secret: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The target redacts its own message, but ``raise TargetError(...) from exc`` keeps the
    driver's exception as the cause, and ``--debug`` printed that traceback as it was."""

    def connect(*_: object, **__: object) -> None:
        try:
            raise RuntimeError(f"[driver] cannot connect with DRIVER={{x}};PWD={{{secret}}};")
        except RuntimeError as exc:
            raise TargetError(redact(f"cannot connect: {exc}", [secret])) from exc

    monkeypatch.setattr(sim.config.resolve, "resolve", connect)  # validate imports it per call
    assert main(["--debug", "validate"]) == TargetError.exit_code
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: [driver] cannot connect" in err, err
    assert "error: cannot connect:" in err
    assert secret not in err and "unit-" not in err


def test_an_untranslated_driver_exception_is_masked_in_the_error_line(
    secret: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def connect(*_: object, **__: object) -> None:
        raise RuntimeError(f"login failed for connection string PWD={secret};")

    monkeypatch.setattr(sim.config.resolve, "resolve", connect)  # validate imports it per call
    assert main(["validate"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: unexpected RuntimeError: login failed"), err
    assert secret not in err and "unit-" not in err


def test_a_password_pasted_as_password_env_is_refused_without_repeating_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pasted = "S3cr3t-pasted+/@-0"
    assert (
        main(
            ["validate", "--set", "target.kind=postgres", "--set", f"target.password_env={pasted}"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: target.password_env: must be the NAME of an environment"), err
    assert "pasted" not in err
    with pytest.raises(ValueError, match="NAME of an environment variable"):
        SecretRef(password_env="1PASSWORD")
    assert SecretRef(password_env="DBSIM_PG_PASSWORD").password_env == "DBSIM_PG_PASSWORD"
