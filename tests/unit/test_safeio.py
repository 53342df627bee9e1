"""sim.safeio (issue #20): files read only when regular and bounded, YAML narrowed to the core
schema with duplicate keys, cycles, expansion and long numbers refused, JSON bounded, and
JSON written strictly. Every refusal is one ConfigError line naming the file (and line)."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest

from sim.errors import ConfigError
from sim.safeio import MAX_NUMBER_CHARS, InputLimitError, load_json, read_text_file, strict_json
from sim.safeyaml import load_yaml

READ_TIMEOUT_S = 10.0


def _read_bounded(path: Path, **kwargs: object) -> BaseException | str:
    """read_text_file in a thread, so a regression (a blocking open) fails instead of hanging."""
    found: list[BaseException | str] = []

    def read() -> None:
        try:
            found.append(read_text_file(path, what="scenario file", max_bytes=1024, **kwargs))  # type: ignore[arg-type]
        except BaseException as exc:  # handed to the test
            found.append(exc)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(READ_TIMEOUT_S)
    assert not thread.is_alive(), f"reading {path} blocked for {READ_TIMEOUT_S} s"
    return found[0]


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    exc = _read_bounded(fifo)
    assert isinstance(exc, InputLimitError)
    assert str(exc) == f"{fifo}: a FIFO, not a regular file; a scenario file must be one"


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("/", "a directory")]
)
def test_devices_and_directories_are_refused(path: str, kind: str) -> None:
    exc = _read_bounded(Path(path))
    assert isinstance(exc, ConfigError) and str(exc).startswith(f"{path}: {kind}, not a regular")


def test_size_limit_and_text(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a" * 1025)
    exc = _read_bounded(big)
    assert isinstance(
        exc, InputLimitError
    ) and "1025 bytes; a scenario file is at most 1 KiB" in str(exc)
    big.write_bytes(b"a" * 1024)
    assert _read_bounded(big) == "a" * 1024
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"ok: 1\nname: \xff\n")
    exc = _read_bounded(bad)
    assert str(exc) == f"{bad}: not UTF-8 text (byte 12, line 2)"
    exc = _read_bounded(tmp_path / "missing.yaml")
    assert str(exc) == f"{tmp_path / 'missing.yaml'}: no such scenario file"


def test_a_symbolic_link_is_followed_only_when_allowed(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("{}", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert _read_bounded(link) == "{}"
    exc = _read_bounded(link, follow_symlinks=False)
    assert isinstance(exc, ConfigError) and "is a symbolic link" in str(exc)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: !!int abc", "f.yaml:1:4: a: !!int 'abc' is not an integer"),
        ("a: !!float x", "f.yaml:1:4: a: !!float 'x' is not a number"),
        ("a: !!bool maybe", "f.yaml:1:4: a: !!bool 'maybe' is not true or false"),
        (
            "a: &a !!pairs [[x, *a]]",
            "f.yaml:1:20: a[0][1]: alias *a is inside its own anchor (a cycle)",
        ),
        (
            "a: &a !!omap [{x: *a}]",
            "f.yaml:1:19: a[0].x: alias *a is inside its own anchor (a cycle)",
        ),
        ("a: &a [*a]", "f.yaml:1:8: a[0]: alias *a is inside its own anchor (a cycle)"),
        ("a: !!binary aGk=", "f.yaml:1:4: a: tag !!binary is not accepted"),
        ("a: !!set {x}", "f.yaml:1:4: a: tag !!set is not accepted"),
        ("a: !!python/name:os.system x", "f.yaml:1:4: a: tag !!python/name:os.system is not"),
        (
            "a: " + "9" * 5000,
            f"f.yaml:1:4: a: a number of 5000 characters (at most {MAX_NUMBER_CHARS})",
        ),
        ("a: !!int " + "1" * 200, "f.yaml:1:4: a: a number of 200 characters"),
        ("x: 1\ny: 2\nx: 3", "f.yaml:3:1: x: duplicate key (first at line 1;"),
        (
            "x: " + "[" * 40 + "]" * 40,
            "f.yaml:1:36: x" + "[0]" * 32 + ": nested more than 32 levels",
        ),
        ("load: {duration_s: " + "1" * 400 + "}", "f.yaml:1:20: load.duration_s: a number of 400"),
    ],
)
def test_yaml_refusals_name_file_line_and_column(text: str, problem: str) -> None:
    with pytest.raises(InputLimitError) as info:
        load_yaml(text, what="f.yaml")
    assert str(info.value).startswith(problem), str(info.value)


def test_aliases_of_aliases_are_refused_while_composing() -> None:
    lines = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    with pytest.raises(
        InputLimitError, match=r"^f.yaml:5:5: a4: expands to more than 100000 values"
    ):
        load_yaml("\n".join(lines), what="f.yaml")
    # Ordinary aliases are fine, and shared once built.
    data = load_yaml("base: &b {x: 1}\none: *b\ntwo: {<<: *b, y: 2}\n", what="f.yaml")
    assert data == {"base": {"x": 1}, "one": {"x": 1}, "two": {"x": 1, "y": 2}}


def test_core_values_still_load_and_odd_scalars_are_text() -> None:
    data = load_yaml(
        "i: 0x1F\nf: !!float 1\nb: yes\nn: ~\nd: 2024-01-01\ne: =\ns: !!str 12\nl: [1.5, -2]\n",
        what="f.yaml",
    )
    assert data == {
        "i": 31,
        "f": 1.0,
        "b": True,
        "n": None,
        "d": "2024-01-01",  # no field takes a date: text, not a datetime
        "e": "=",  # PyYAML's safe loader raised for a lone "="
        "s": "12",
        "l": [1.5, -2],
    }


def test_a_syntax_error_is_a_config_error_not_a_limit() -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml("a: [", what="f.yaml")
    assert not isinstance(info.value, InputLimitError)
    assert str(info.value).startswith("f.yaml:1:5: ")
    with pytest.raises(ConfigError, match=r"^--set x: unacceptable character #xdcff"):
        load_yaml("/tmp/\udcff", what="--set x", marks=False)


def test_json_bounds() -> None:
    with pytest.raises(InputLimitError, match=r"^s\.json: nested more than 16 levels deep$"):
        load_json("[" * 100_000 + "]" * 100_000, what="s.json", max_depth=16)
    with pytest.raises(InputLimitError, match=r"^s\.json: nested more than 3 levels deep$"):
        load_json("[[[[1]]]]", what="s.json", max_depth=3)
    with pytest.raises(InputLimitError, match=r"^s\.json: a number of 5000 digits"):
        load_json('{"a": ' + "9" * 5000 + "}", what="s.json")
    with pytest.raises(ConfigError, match=r"^s\.json: not valid JSON: "):
        load_json("{nope", what="s.json")
    assert load_json('{"a": [1, 2.5, NaN, -Infinity]}', what="s.json") == {
        "a": [1, 2.5, None, None]
    }


def test_strict_json_writes_no_non_finite_number() -> None:
    value = {"p99": 1e308 * 10, "nan": math.nan, "ok": [1.5, (2, -math.inf)], "path": Path("/x")}
    text = strict_json(value)
    assert json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in {text}")) == {
        "p99": None,
        "nan": None,
        "ok": [1.5, [2, None]],
        "path": "/x",
    }
