"""YAML that may be hostile, as plain data: PyYAML's safe loader narrowed (issue #20).

:class:`StrictLoader` takes the core schema only (null, bool, int, float, str, seq, map: no
``!!pairs``/``!!omap``/``!!set``/``!!binary``/``!!timestamp`` nor application tags), refuses a
duplicate key with both lines, an alias inside its own anchor (a cycle), nesting past
``max_depth``, a document expanding past ``max_values`` (aliases of aliases: "billion laughs",
bounded while composing, so the cost stays linear) and numbers longer than
:data:`~sim.safeio.MAX_NUMBER_CHARS` before ``int()`` sees them. Every refusal names the
source, the line and column, and the dotted path of the field.
"""

from __future__ import annotations

from typing import Any, ClassVar

import yaml
from yaml.error import MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from sim.errors import ConfigError
from sim.safeio import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_VALUES,
    MAX_NUMBER_CHARS,
    InputLimitError,
)

_CORE = "tag:yaml.org,2002:"


class _Refused(MarkedYAMLError):
    """A bound refused the document (not its syntax): reported as an InputLimitError."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(None, None, problem, mark)


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
        # a command-line argument) raises ReaderError there, so it is made inside the handler.
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
