"""The import graph of sim/, workloads/ and storage/, built from the source with ``ast``.

Two rules (docs/architecture.md, "Dependency rules"):

1. No cycle. Every import counts, at module level or inside a function (a function-level
   import hides a cycle from the import system, not from the reader), except imports under
   ``if TYPE_CHECKING:``: they never run, so they cannot make an import-time cycle, and an
   annotation naming a type of a higher layer is allowed.
2. A plugin (any module under storage/ or workloads/) imports from sim/ only the published
   interfaces in :data:`PUBLISHED`. Here type-only imports count too: a plugin that names an
   internal type in a signature is coupled to it just the same.

An edge goes to the module named (``from a.b import c`` is an edge to ``a.b.c`` when that is a
module, else to ``a.b``); the parent packages Python initialises on the way are not edges, so a
package's ``__init__`` may gather its submodules without counting as a cycle with them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("sim", "workloads", "storage")
PLUGIN_PACKAGES = ("workloads", "storage")

#: What a plugin may import from sim/: the interfaces it is written against and the leaf helpers
#: they use. Everything else in sim/ is internal to the service.
PUBLISHED = frozenset(
    {
        "sim",  # __version__
        "sim.errors",  # the error tree and exit codes
        "sim.protocols",  # Target, Workload, Collector, Sample, EngineContext …
        "sim.registry",  # register_* and the entries
        "sim.sql",  # dialect statement catalogues and quoting
        "sim.dialects",  # the SQL dialect records a target registers
        "sim.secrets",  # SecretRef, resolving and redacting secrets
        "sim.field_errors",  # a pydantic error as one `path: what is wrong` line per field
        "sim.safeio",  # bounded, regular-file-only reading and atomic writing
        "sim.nofollow",  # symlink-proof, dirfd-relative file operations
        "sim.config.scenario",  # the scenario models leaf: limits such as MAX_SESSIONS
    }
)


@dataclass
class Module:
    name: str
    path: Path
    runtime: set[str] = field(default_factory=set)
    type_only: set[str] = field(default_factory=set)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    def __init__(self, module: Module, known: set[str]) -> None:
        self.module = module
        self.known = known
        self.type_only_depth = 0

    def _package(self) -> list[str]:
        parts = self.module.name.split(".")
        return parts if self.module.path.name == "__init__.py" else parts[:-1]

    def _add(self, target: str) -> None:
        if target.split(".")[0] not in PACKAGES:
            return
        (self.module.type_only if self.type_only_depth else self.module.runtime).add(target)

    def visit_If(self, node: ast.If) -> None:
        if is_type_checking(node.test):
            self.type_only_depth += 1
            for child in node.body:
                self.visit(child)
            self.type_only_depth -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self._package()[: len(self._package()) - (node.level - 1)]
            source = ".".join([*base, node.module] if node.module else base)
        else:
            source = node.module or ""
        for alias in node.names:
            candidate = f"{source}.{alias.name}"
            self._add(candidate if candidate in self.known else source)


def import_graph() -> dict[str, Module]:
    paths = [p for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]
    modules = {module_name(p): Module(module_name(p), p) for p in paths}
    for module in modules.values():
        tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
        _Imports(module, set(modules)).visit(tree)
        module.runtime.discard(module.name)
    return modules


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_built_from_every_module_and_sees_function_level_imports() -> None:
    graph = import_graph()
    assert {"sim.core.engine", "sim.cli.entry", "storage.targets.postgres"} <= set(graph)
    # sim.cli.run imports the runner inside its command (to keep `dbsim --help` fast).
    assert "sim.run.runner" in graph["sim.cli.run"].runtime
    # A TYPE_CHECKING import is recorded apart.
    assert "sim.core.engine" in graph["sim.judge.sweep"].type_only
    assert "sim.core.engine" not in graph["sim.judge.sweep"].runtime


def test_the_cycle_finder_finds_a_cycle_and_only_cycles() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle() -> None:
    graph = import_graph()
    found = cycles({name: module.runtime for name, module in graph.items()})
    assert not found, "import cycles (break each; see docs/architecture.md):\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def test_plugins_import_only_the_published_interfaces_of_sim() -> None:
    upward = sorted(
        f"{name} imports {target}"
        for name, module in import_graph().items()
        if name.split(".")[0] in PLUGIN_PACKAGES
        for target in module.runtime | module.type_only
        if target.split(".")[0] == "sim" and target not in PUBLISHED
    )
    assert not upward, "plugins importing sim internals:\n" + "\n".join(upward)


def test_every_published_interface_exists() -> None:
    assert set(import_graph()) >= PUBLISHED, PUBLISHED - set(import_graph())
