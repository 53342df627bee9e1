"""The import graph of sim/, workloads/ and storage/, built from the source with ``ast``.

Four rules (docs/architecture.md, "Dependency rules"):

1. No cycle. Every import counts, at module level or inside a function (a function-level
   import hides a cycle from the import system, not from the reader), except imports under
   ``if TYPE_CHECKING:``: they never run, so they cannot make an import-time cycle, and an
   annotation naming a type of a higher layer is allowed.
2. A plugin (any module under storage/ or workloads/) imports from sim/ only the published
   interfaces in :data:`PUBLISHED`. Here type-only imports count too: a plugin that names an
   internal type in a signature is coupled to it just the same.
3. ``sim.core`` imports nothing above it: from sim/ only its own modules, the published
   interfaces and the scenario leaf, and no plugin module (type-only imports count too). The
   run's assembly, which wires the core to the bundle, the judges and the report, is
   ``sim.run``.
4. No consumer names a collector: a module of sim/ that reads collectors' figures finds the
   source by the role it declares (``sim.registry.collector_with_role``), never by comparing a
   sample's source with a name, looking a name up in the summary's storage section or opening
   ``<name>.csv``, nor falling back on a name (checked on the syntax tree, so docstrings and
   comments may name them).

An edge goes to the module named (``from a.b import c`` is an edge to ``a.b.c`` when that is a
module, else to ``a.b``); the parent packages Python initialises on the way are not edges, so a
package's ``__init__`` may gather its submodules without counting as a cycle with them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from sim import registry

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


@cache  # one parse of the ~360 modules for the module's six rules (1.5 CPU-s each); read-only
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


#: What sim.core may import besides its own modules (rule 3).
CORE_MAY_IMPORT = PUBLISHED
#: The plugin modules the core reads: whether the optional native loops were built (files;
#: PostgreSQL over libpq, with its sessions' programs), facts of this installation that decide
#: how sessions run (sim.core.session_choice, sim.core.session_threads).
CORE_READS_PLUGIN = frozenset({"storage.targets.fileloop", "storage.targets.pgloop_session"})


def test_core_imports_nothing_above_it() -> None:
    upward = sorted(
        f"{name} imports {target}"
        for name, module in import_graph().items()
        if name == "sim.core" or name.startswith("sim.core.")
        for target in module.runtime | module.type_only
        if not (target == "sim.core" or target.startswith("sim.core."))
        and target not in CORE_MAY_IMPORT
        and target not in CORE_READS_PLUGIN
    )
    assert not upward, "sim.core importing above it (move the code up, see sim.run):\n" + (
        "\n".join(upward)
    )


def _is_source(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "source") or (
        isinstance(node, ast.Name) and node.id == "source"
    )


def _named(node: ast.expr, names: set[str]) -> str | None:
    """The collector ``node`` spells as a string constant (or one of a tuple of them)."""
    if isinstance(node, ast.Constant) and node.value in names:
        return str(node.value)
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return next((n for e in node.elts if (n := _named(e, names))), None)
    return None


def collector_names_used(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Where the code of one module consumes a collector by name: a sample's source compared
    with a name, a name looked up (``x["block"]``, ``x.get("block")``), a name as the fallback
    of a role (``… or "block"``) or ``"<name>.csv"``.
    "host" is the machine's name in the summary too: it counts only compared with a source."""
    found = []
    for node in ast.walk(tree):
        what = _consumed_by_name(node, names)
        if what:
            found.append((getattr(node, "lineno", 0), what))
    return sorted(found)


def _consumed_by_name(node: ast.AST, names: set[str]) -> str | None:
    plain = names - {"host"}
    if isinstance(node, ast.Compare):
        operands = [node.left, *node.comparators]
        hit = next((n for o in operands if (n := _named(o, names))), None)
        return f"source compared with {hit!r}" if hit and any(map(_is_source, operands)) else None
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        hit = _named(node.slice, plain)
        return f"[{hit!r}]" if hit else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
        hit = _named(node.args[0], plain) if node.func.attr == "get" else None
        return f".get({hit!r})" if hit else None
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        hit = next((n for v in node.values if (n := _named(v, plain))), None)
        return f"or {hit!r}" if hit else None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        stem, csv = node.value.removesuffix(".csv"), node.value.endswith(".csv")
        return repr(node.value) if csv and stem in names else None
    return None


def test_the_collector_name_finder_finds_what_a_consumer_would_write() -> None:
    code = """
if sample.source == "block": pass
if source in ("nfs", "psi"): pass
means = storage.get("block") or storage["ontap"]
rows = read(series / "host.csv")
device = registry.collector_with_role(ROLE_DEVICE) or "block"
host = summary["host"]  # the machine, not the collector
options["block"] = {"devices": ["vdb"]}  # configuring a collector names it
"""
    assert collector_names_used(ast.parse(code), {"block", "nfs", "psi", "ontap", "host"}) == [
        (2, "source compared with 'block'"),
        (3, "source compared with 'nfs'"),
        (4, ".get('block')"),
        (4, "['ontap']"),
        (5, "'host.csv'"),
        (6, "or 'block'"),
    ]


def test_no_consumer_names_a_collector() -> None:
    names = set(registry.collectors())
    named = sorted(
        f"{module.path.relative_to(REPO)}:{line}: {what}"
        for module in import_graph().values()
        if module.name.split(".")[0] == "sim"
        for line, what in collector_names_used(
            ast.parse(module.path.read_text(encoding="utf-8")), names
        )
    )
    assert not named, "ask sim.registry.collector_with_role(ROLE_…) instead:\n" + "\n".join(named)
