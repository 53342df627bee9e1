"""Reading input that may be hostile: files, YAML and JSON, each bounded before it is used.

Everything dbsim reads from a user or from a bundle (scenario files, ``--set`` values,
``DBSIM_*`` variables, password files, thresholds, bundle files, the EDA tree's marker) comes
through here, so one set of rules holds everywhere (docs/safety.md, "Input"):

* a file is read only when it is a regular file below a size limit: opened with
  ``O_NONBLOCK`` (a FIFO without a writer would block ``open()`` forever, and SIGTERM with it)
  and checked with ``fstat`` on the open descriptor (no race with a rename), read at most
  ``max_bytes + 1`` bytes (``/dev/zero`` and ``/proc`` files report a size they do not keep);
* text is UTF-8, and a bad byte is reported with its offset;
* YAML: PyYAML's safe loader narrowed to the core schema (null, bool, int, float, str, seq,
  map; no ``!!pairs``/``!!omap``/``!!set``/``!!binary``/``!!timestamp``), duplicate keys
  refused with both lines, an alias inside its own anchor refused, nesting bounded, the
  expanded size bounded while composing (aliases of aliases: "billion laughs"), and numbers
  bounded to :data:`MAX_NUMBER_CHARS` characters before ``int()`` sees them;
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
from typing import Any, ClassVar

import yaml
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from sim.errors import ConfigError

#: Longest number text converted (digits, sign, exponent): ``int()`` of 5,000 digits raised
#: ValueError (Python's 4,300-digit guard) and nothing dbsim takes needs more than 20.
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

_CORE = "tag:yaml.org,2002:"
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


class _Refused(MarkedYAMLError):
    """A bound refused the document (not its syntax): reported as an InputLimitError."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(None, None, problem, mark)


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


# --------------------------------------------------------------------------- YAML


def _resolver_pattern(tag: str) -> Any:
    for entries in yaml.SafeLoader.yaml_implicit_resolvers.values():
        for found, regexp in entries:
            if found == tag:
                return regexp
    raise LookupError(tag)  # pragma: no cover - PyYAML always has int and float


_INT_TEXT = _resolver_pattern(_CORE + "int")
_FLOAT_TEXT = _resolver_pattern(_CORE + "float")
#: Implicit tags kept: timestamps become text (no field takes a date), and "=", "!", "&", "*"
#: resolved to tags PyYAML's safe loader cannot build (an unexpected ConstructorError).
_IMPLICIT_KEPT = {_CORE + t for t in ("bool", "int", "float", "null", "merge")}


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader narrowed as the module docstring says; one instance per document.

    Limits are class attributes so :func:`load_yaml` can set them per call on a subclass."""

    max_depth = DEFAULT_MAX_DEPTH
    max_values = DEFAULT_MAX_VALUES

    yaml_implicit_resolvers: ClassVar[dict[Any, Any]] = {  # type: ignore[misc]
        first: [(tag, rx) for tag, rx in entries if tag in _IMPLICIT_KEPT]
        for first, entries in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    yaml_constructors: ClassVar[dict[Any, Any]] = {}

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._open_anchors: set[str] = set()
        self._weights: dict[int, int] = {}
        self._paths: dict[int, str] = {}  # node id -> its dotted path, for messages
        self._where = [""]  # the path of the node being composed, innermost last

    def compose_node(self, parent: Any, index: Any) -> Any:
        # PyYAML passes a mapping value's key node as ``index``, a list item's position.
        here = self._where[-1]
        if isinstance(index, ScalarNode):
            here = f"{here}.{index.value}" if here else str(index.value)
        elif isinstance(index, int):
            here = f"{here}[{index}]"
        field = f"{here}: " if here else ""
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and event.anchor in self._open_anchors:
            raise _Refused(
                f"{field}alias *{event.anchor} is inside its own anchor (a cycle)",
                event.start_mark,
            )
        if self._depth > self.max_depth:
            raise _Refused(
                f"{field}nested more than {self.max_depth} levels deep", event.start_mark
            )
        anchor = None if isinstance(event, yaml.AliasEvent) else event.anchor
        if anchor is not None:
            self._open_anchors.add(anchor)
        self._depth += 1
        self._where.append(here)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._where.pop()
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.discard(anchor)
        if node is not None:
            self._paths.setdefault(id(node), here)  # an aliased node keeps its first place
            self._weigh(node, event.start_mark, field)
        return node

    def _weigh(self, node: Node, mark: Any, field: str) -> None:
        # The expanded size of every node, computed once (an alias reuses its anchor's), so a
        # document of a few hundred bytes cannot expand to billions of values.
        if id(node) in self._weights:
            return
        weight = 1
        if isinstance(node, SequenceNode):
            weight += sum(self._weights.get(id(child), 1) for child in node.value)
        elif isinstance(node, MappingNode):
            weight += sum(
                self._weights.get(id(k), 1) + self._weights.get(id(v), 1) for k, v in node.value
            )
        if weight > self.max_values:
            raise _Refused(
                f"{field}expands to more than {self.max_values} values (aliases of aliases?)",
                mark,
            )
        self._weights[id(node)] = weight

    def _field(self, node: Node) -> str:
        """The dotted path of ``node`` in the document ("" for the top), for messages."""
        path = self._paths.get(id(node), "")
        return f"{path}: " if path else ""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, yaml.Mark] = {}
            where = self._paths.get(id(node), "")
            for key_node, _ in node.value:
                if key_node.tag == _CORE + "merge" or not isinstance(key_node, ScalarNode):
                    continue
                key = self.construct_object(key_node)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:  # not hashable: the base class reports it
                    continue
                if first is not key_node.start_mark:
                    raise _Refused(
                        f"{where + '.' if where else ''}{key}: duplicate key (first at line "
                        f"{first.line + 1}; "
                        "the last would silently win)",
                        key_node.start_mark,
                    )
        return super().construct_mapping(node, deep=deep)

    def _number_text(self, node: ScalarNode) -> str:
        text = str(self.construct_scalar(node))
        if len(text) > MAX_NUMBER_CHARS:
            raise _Refused(
                f"{self._field(node)}a number of {len(text)} characters "
                f"(at most {MAX_NUMBER_CHARS})",
                node.start_mark,
            )
        return text

    def _int(self, node: ScalarNode) -> int:
        text = self._number_text(node)
        if not _INT_TEXT.match(text):
            raise _Refused(
                f"{self._field(node)}!!int {text[:40]!r} is not an integer", node.start_mark
            )
        return int(super().construct_yaml_int(node))

    def _float(self, node: ScalarNode) -> float:
        text = self._number_text(node)
        if not (_FLOAT_TEXT.match(text) or _INT_TEXT.match(text)):
            raise _Refused(
                f"{self._field(node)}!!float {text[:40]!r} is not a number", node.start_mark
            )
        return float(super().construct_yaml_float(node))

    def _bool(self, node: ScalarNode) -> bool:
        text = str(self.construct_scalar(node))
        if text.lower() not in self.bool_values:
            raise _Refused(
                f"{self._field(node)}!!bool {text[:40]!r} is not true or false", node.start_mark
            )
        return bool(self.bool_values[text.lower()])

    # The core tags PyYAML builds itself, registered under names of this class (mypy).
    def _null(self, node: Node) -> None:
        return self.construct_yaml_null(node)  # type: ignore[arg-type]

    def _str(self, node: Node) -> str:
        return self.construct_yaml_str(node)

    def _seq(self, node: Node) -> Any:
        return self.construct_yaml_seq(node)

    def _map(self, node: Node) -> Any:
        return self.construct_yaml_map(node)

    def _refuse_tag(self, node: Node) -> Any:
        tag = node.tag.replace(_CORE, "!!")
        raise _Refused(
            f"{self._field(node)}tag {tag[:60]} is not accepted (only plain values, lists and "
            "mappings)",
            node.start_mark,
        )


StrictLoader.add_constructor(_CORE + "null", StrictLoader._null)
StrictLoader.add_constructor(_CORE + "bool", StrictLoader._bool)
StrictLoader.add_constructor(_CORE + "int", StrictLoader._int)
StrictLoader.add_constructor(_CORE + "float", StrictLoader._float)
StrictLoader.add_constructor(_CORE + "str", StrictLoader._str)
StrictLoader.add_constructor(_CORE + "seq", StrictLoader._seq)
StrictLoader.add_constructor(_CORE + "map", StrictLoader._map)
StrictLoader.add_constructor(None, StrictLoader._refuse_tag)


def load_yaml(
    text: str,
    *,
    what: str,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_values: int = DEFAULT_MAX_VALUES,
    marks: bool = True,
) -> Any:
    """One YAML document as plain data, by :class:`StrictLoader`.

    ``what`` names the source in the error line (a path, ``--set load.sessions``); a syntax
    error is a :class:`ConfigError` ``what:line:column: problem``, a refused bound the same
    line as an :class:`InputLimitError`; ``marks=False`` leaves out line and column (a
    one-line value)."""
    loader_class = type(
        "BoundedLoader", (StrictLoader,), {"max_depth": max_depth, "max_values": max_values}
    )
    loader = None
    try:
        # The reader checks the characters when it is made: a surrogate (a non-UTF-8 byte of
        # a command-line argument) raised ReaderError there, outside any handler.
        loader = loader_class(text)
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{what}:{mark.line + 1}:{mark.column + 1}" if mark and marks else what
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0] or "not valid YAML"
        error = InputLimitError if isinstance(exc, _Refused) else ConfigError
        raise error(f"{where}: {problem}") from None
    except RecursionError:  # cannot happen with the depth bound; kept as a last guard
        raise InputLimitError(f"{what}: nested more than {max_depth} levels deep") from None
    finally:
        if loader is not None:
            loader.dispose()


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


def read_yaml_file(path: Path, *, what: str, max_bytes: int = MAX_SCENARIO_BYTES) -> Any:
    """A YAML file by :func:`read_text_file` and :func:`load_yaml`."""
    text = read_text_file(path, what=what, max_bytes=max_bytes)
    return load_yaml(text, what=str(path))


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
