"""Reading input that may be hostile: files, YAML and JSON, each bounded before it is used.

Everything dbsim reads from a user or from a bundle (scenario files, ``--set`` values,
``DBSIM_*`` variables, password files, thresholds, bundle files, the EDA tree's marker) comes
through here, so one set of rules holds everywhere (docs/safety.md, "Input"):

* a file is read only when it is a regular file below a size limit: opened with
  ``O_NONBLOCK`` (a FIFO without a writer would block ``open()`` forever, and SIGTERM with it)
  and checked with ``fstat`` on the open descriptor (no race with a rename), read at most
  ``max_bytes + 1`` bytes (``/dev/zero`` and ``/proc`` files report a size they do not keep);
* text is UTF-8, and a bad byte is reported with its offset;
* YAML (:mod:`sim.safeyaml`): PyYAML's safe loader narrowed to the core schema, duplicate
  keys, cycles and expansion refused, numbers bounded to :data:`MAX_NUMBER_CHARS`;
* JSON: nesting and numbers bounded the same way; ``NaN``/``Infinity`` (not JSON) read as null.

Every refusal is a :class:`~sim.errors.ConfigError` whose one line names the file (or the
option) and, where there is one, the line and column.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sim.errors import ConfigError

#: Longest number text converted (digits, sign, exponent): ``int()`` refuses more than 4,300
#: digits (Python's guard) and nothing dbsim takes needs more than 20.
MAX_NUMBER_CHARS = 100
#: Deepest nesting read (a scenario's own sections go ~6 deep; bundle files ~5).
DEFAULT_MAX_DEPTH = 32
#: Most values (scalars, lists, mappings) one YAML document may expand to, aliases included.
DEFAULT_MAX_VALUES = 100_000
#: Size limits per kind of file (bytes). A scenario is a few KiB; summary.json of a long
#: distributed run with many devices is a few MiB.
MAX_SCENARIO_BYTES = 1 << 20
MAX_SECRET_BYTES = 64 << 10
MAX_BUNDLE_FILE_BYTES = 64 << 20

_KIND = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFSOCK: "a socket",
}


class InputLimitError(ConfigError):
    """Input refused by a bound (size, depth, expansion, number length, tag, duplicate key,
    recursion) rather than by its syntax; ``--set``/``DBSIM_*`` values that are not YAML are
    taken as text, but these are refused."""


def _kind(mode: int) -> str:
    return _KIND.get(stat.S_IFMT(mode), "not a regular file")


def _size(count: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift and count % (1 << shift) == 0:
            return f"{count >> shift} {unit}"
    return f"{count} bytes"


def read_bytes(
    path: Path, *, what: str, max_bytes: int, follow_symlinks: bool = True, label: str = ""
) -> bytes:
    """The bytes of ``path`` when it is a regular file of at most ``max_bytes``.

    ``what`` names the kind of file in messages ("scenario file"); ``label`` is put before the
    path (a field: ``target.password_file: ``). ``follow_symlinks=False`` refuses a symbolic
    link as the last component (``O_NOFOLLOW``)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    where = f"{label}{path}"
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such {what}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise ConfigError(f"{where}: is a symbolic link; a {what} must not be one") from None
        raise ConfigError(f"{where}: cannot read: {exc.strerror}") from None
    except ValueError:  # an embedded NUL in the path
        raise ConfigError(f"{label}{path!r}: not a file name (contains NUL)") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputLimitError(
                f"{where}: {_kind(info.st_mode)}, not a regular file; a {what} must be one"
            )
        if info.st_size > max_bytes:
            raise InputLimitError(
                f"{where}: {info.st_size} bytes; a {what} is at most {_size(max_bytes)}"
            )
        chunks: list[bytes] = []
        left = max_bytes + 1  # one byte more tells a file that grew past the limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InputLimitError(f"{where}: larger than {_size(max_bytes)}, the most a {what} may be")
    return data


def decode_utf8(data: bytes, *, where: str) -> str:
    """``data`` as UTF-8 text; a bad byte is reported with its offset and line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{where}: not UTF-8 text (byte {exc.start}, line {line})") from None


def read_text_file(
    path: Path, *, what: str, max_bytes: int, follow_symlinks: bool = True, label: str = ""
) -> str:
    """:func:`read_bytes` decoded as UTF-8 (see there for the rules and the arguments)."""
    data = read_bytes(
        path, what=what, max_bytes=max_bytes, follow_symlinks=follow_symlinks, label=label
    )
    return decode_utf8(data, where=f"{label}{path}")


# --------------------------------------------------------------------------- JSON


def _bounded_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise InputLimitError(f"a number of {len(text)} digits (at most {MAX_NUMBER_CHARS})")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise InputLimitError(f"a number of {len(text)} characters (at most {MAX_NUMBER_CHARS})")
    return float(text)


def depth(data: Any) -> int:
    """How deep ``data`` nests (a scalar is 0, ``[]`` is 1); iterative, for any input."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, dict):
            stack.extend((v, level + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, level + 1) for v in node)
        else:
            deepest = max(deepest, level)
            continue
        deepest = max(deepest, level + 1)
    return deepest


def load_json(text: str, *, what: str, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """JSON text as data: nesting at most ``max_depth``, numbers bounded, ``NaN`` and
    ``Infinity`` (which Python writes but JSON does not have) read as null."""
    try:
        data = json.loads(
            text,
            parse_int=_bounded_int,
            parse_float=_bounded_float,
            parse_constant=lambda _name: None,
        )
    except InputLimitError as exc:
        raise InputLimitError(f"{what}: {exc}") from None
    except RecursionError:
        raise InputLimitError(f"{what}: nested more than {max_depth} levels deep") from None
    except ValueError as exc:  # json.JSONDecodeError and int()'s own guard
        raise ConfigError(f"{what}: not valid JSON: {str(exc).splitlines()[0][:120]}") from None
    if depth(data) > max_depth:
        raise InputLimitError(f"{what}: nested more than {max_depth} levels deep")
    return data


def read_json_file(
    path: Path,
    *,
    what: str,
    max_bytes: int = MAX_BUNDLE_FILE_BYTES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    follow_symlinks: bool = True,
) -> Any:
    """A JSON file by :func:`read_text_file` and :func:`load_json`."""
    text = read_text_file(path, what=what, max_bytes=max_bytes, follow_symlinks=follow_symlinks)
    return load_json(text, what=str(path), max_depth=max_depth)


def open_text_stream(path: Path, *, what: str) -> io.TextIOWrapper:
    """``path`` opened for reading as UTF-8 text when it is a regular file (a CSV time series
    is read as a stream: it may be larger than anything held in memory at once). Raises
    FileNotFoundError for a missing file, :class:`ConfigError` for anything that is not a
    regular file, so a FIFO cannot block the reader."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputLimitError(
                f"{path}: {_kind(info.st_mode)}, not a regular file; a {what} must be one"
            )
        return open(fd, encoding="utf-8", newline="", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN and ±infinity (in any nested dict, list or tuple) as None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: finite_or_null(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_or_null(item) for item in value]
    return value


def strict_json(value: Any, *, indent: int = 2) -> str:
    """``value`` as strict JSON text: non-finite numbers become null (``allow_nan=False``
    then guarantees none is left), other objects their ``str()`` (paths, times)."""
    try:
        return json.dumps(value, indent=indent, default=str, allow_nan=False)
    except ValueError:  # rare: walk and copy only then (it doubled the cost of every write)
        return json.dumps(finite_or_null(value), indent=indent, default=str, allow_nan=False)


def create_text(path: Path, text: str, option: str) -> None:
    """``text`` in a file dbsim creates at ``path``, named by ``option`` (``--html``,
    ``--output``...): never over a file, never through a link (``O_EXCL|O_NOFOLLOW``,
    :func:`sim.nofollow.write_new`); a name that is taken, a link or a path that cannot be
    written is bad input, said in one line."""
    from sim.nofollow import write_new

    try:
        write_new(str(path), text.encode("utf-8"))
    except FileExistsError:
        raise ConfigError(
            f"{option} {path}: exists (or is a link); dbsim writes only a new file"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{option} {path}: is a symbolic link; not followed") from None
        raise ConfigError(f"{option} {path}: cannot write: {exc.strerror or exc}") from None
