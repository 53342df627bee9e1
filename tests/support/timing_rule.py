"""The ``timing`` marker's rule: which tests measure time or rates, read from their source.

``make test`` runs the suite in two phases (tests/README.md): every test not marked ``timing``
in parallel workers, then the ``timing`` tests one at a time with nothing beside them. A test that asserts a rate, an IOPS figure, a latency bound or an
agreement whose tolerance depends on timing must not run beside seven others, so the marker is
enforced: a test is a *timing* test when it — its own body, the fixtures and helper functions
of its module it uses, transitively, and helpers it imports from other test modules — names
one of :data:`TIMING_NAMES` as a name, an attribute, a keyword argument or a word inside a
string (docstrings and comments do not count; :data:`OUTSIDE_UNIT_ONLY` names count outside
tests/unit only). tests/conftest.py fails such a test when it lacks the marker, and
tests/unit/test_timing_rule.py lists every offender of the suite at once.

A module whose tests only do arithmetic on figures they make themselves may be exempted in
:data:`EXEMPT`, with the reason; so may a single test that names a timing word in another
sense.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: A name whose use makes a test a timing test, and why.
TIMING_NAMES: dict[str, str] = {
    # Load asked in device IOPS, calibrated on a real device and judged by what it delivered.
    "rate_iops": "load asked in device IOPS (calibrated on a real device)",
    "delivered_iops": "the device IOPS a run delivered",
    # A device throttled to a ceiling, and the lab fixtures that measure against one.
    "set_ceiling": "a device throttled to an IOPS ceiling",
    "private_ground_lab": "the ground-truth lab (a device under a ceiling)",
    "iops_lab": "the ground-truth lab (a device under a ceiling)",
    "ground_lab": "the ground-truth lab (a device under a ceiling)",
    "array_lab": "the lab array (a QoS policy)",
    "two_volumes": "lab volumes under ceilings",
    "_read_iops": "device read IOPS sampled over seconds",
    "CEILING": "a device's IOPS ceiling, measured against",
    "CEILINGS": "devices' IOPS ceilings, measured against",
    "POLICY_IOPS": "an array policy's IOPS, measured against",
    # An open-loop rate against what was achieved.
    "achieved": "an achieved rate against the one asked",
    "achieved_ops_s": "an achieved rate against the one asked",
    # Latency or scheduling bounds measured on the clock.
    "max_gap_s": "the longest stall of an event loop",
    "perf_counter": "a duration measured on the clock",
    "perf_counter_ns": "a duration measured on the clock",
    # fio on a real device at a target rate.
    "target_iops": "fio held to a target IOPS",
}

#: Names that make a timing test only outside tests/unit: there, load asked in device IOPS
#: is refused or converted on paper, never run against a device.
OUTSIDE_UNIT_ONLY = frozenset({"rate_iops"})

#: Modules (``path``) or tests (``path::qualname``) exempt from the rule, and why: they
#: compute on figures they make themselves, or name a timing word in another sense.
EXEMPT: dict[str, str] = {
    "tests/e2e/test_cli_size.py::test_an_eda_bundle_is_sized_in_file_operations_never_block_iops": (
        "size's demand checked equal to the rate the bundle wrote; no rate is judged against one asked"
    ),
    "tests/e2e/test_baseline_steps.py::test_dry_run_shows_the_search_and_the_curve": (
        "fio's rate_iops option in a dry run's job files: nothing runs"
    ),
    "tests/integration/test_lab.py::test_up_again_reports_and_adjusts": (
        "ceilings set and read back; nothing is measured against them"
    ),
    "tests/unit/test_calibration.py::test_the_console_lines": "lines from figures it writes",
    "tests/unit/test_calibration.py::test_a_verdict_names_the_iops_asked": (
        "a verdict's words from figures it writes"
    ),
    "tests/unit/test_calibration.py::"
    "test_the_runs_drain_is_left_out_of_the_last_steps_delivered_iops": (
        "intervals and device rates it writes, no clock"
    ),
    "tests/unit/test_baseline_steps.py": "step plans and curves from figures the test writes",
    "tests/unit/test_eda_rules.py": "the EDA rate rules on numbers, no run",
    "tests/unit/test_score_words.py": "score sentences from points the test builds",
    "tests/unit/test_timing_rule.py": "the rule's own tests (synthetic sources)",
    "tests/e2e/test_iops_cli.py": "refusals of load.rate_iops (exit 2) and a run's bookkeeping",
    "tests/unit/test_replay_db.py": "replay causes and parameters from shapes the test builds",
    "tests/unit/test_replay_day.py": "the day shape judged on series and fio logs the test writes",
}

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IMPORTED_TEST_MODULE = re.compile(r"^tests(\.[A-Za-z0-9_]+)+$")


@dataclass
class ModuleIndex:
    """One test module's functions (module level and in classes) and what each names."""

    path: Path
    words: dict[str, set[str]] = field(default_factory=dict)  # function → words it names
    autouse: list[str] = field(default_factory=list)  # the module's autouse fixtures
    imported: dict[str, tuple[Path, str]] = field(default_factory=dict)  # local → (module, name)
    marked: dict[str, bool] = field(default_factory=dict)  # test qualname → carries timing


def _docstrings(node: ast.AST) -> set[int]:
    """The ids of the docstring constants under ``node`` (prose, not code)."""
    found: set[int] = set()
    for child in ast.walk(node):
        body = getattr(child, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            found.add(id(first.value))
    return found


def _words(node: ast.AST) -> set[str]:
    """Names, attributes, keyword arguments, parameters and string words, minus docstrings."""
    prose = _docstrings(node)
    found: set[str] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name):
            found.add(child.id)
        elif isinstance(child, ast.Attribute):
            found.add(child.attr)
        elif isinstance(child, ast.keyword | ast.arg) and child.arg:
            found.add(child.arg)
        elif (
            isinstance(child, ast.Constant)
            and isinstance(child.value, str)
            and id(child) not in prose
        ):
            found.update(_WORD.findall(child.value))
    return found


def _is_timing_mark(node: ast.AST) -> bool:
    """``pytest.mark.timing`` (called or not) anywhere in ``node``."""
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == "timing"
        and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
        for n in ast.walk(node)
    )


def _is_fixture(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[bool, bool]:
    """(is a fixture, is autouse)."""
    for deco in fn.decorator_list:
        text = ast.unparse(deco)
        if "fixture" in text:
            return True, "autouse=True" in text
    return False, False


def _index_imports(index: ModuleIndex, tree: ast.Module) -> None:
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            if not _IMPORTED_TEST_MODULE.match(node.module):
                continue
            source = REPO.joinpath(*node.module.split(".")).with_suffix(".py")
            for alias in node.names:
                index.imported[alias.asname or alias.name] = (source, alias.name)


@functools.cache
def module_index(path: Path) -> ModuleIndex:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    index = ModuleIndex(path)
    _index_imports(index, tree)
    module_marked = any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)
        and _is_timing_mark(node.value)
        for node in tree.body
    )
    functions = ast.FunctionDef | ast.AsyncFunctionDef
    for node in tree.body:
        if isinstance(node, functions):
            index.words[node.name] = _words(node)
            fixture, autouse = _is_fixture(node)
            if autouse:
                index.autouse.append(node.name)
            if node.name.startswith("test") and not fixture:
                index.marked[node.name] = module_marked or _marked(node)
        elif isinstance(node, ast.ClassDef):
            class_marked = module_marked or any(_is_timing_mark(d) for d in node.decorator_list)
            for member in node.body:
                if isinstance(member, functions):
                    qualname = f"{node.name}.{member.name}"
                    index.words[qualname] = _words(member)
                    if member.name.startswith("test"):
                        index.marked[qualname] = class_marked or _marked(member)
    return index


def _marked(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(_is_timing_mark(d) for d in fn.decorator_list)


def _closure(index: ModuleIndex, qualname: str) -> set[str]:
    """Every word the test names, through its module's fixtures and helpers and the helpers
    it imports from other test modules."""
    seen: set[tuple[Path, str]] = set()
    words: set[str] = set()
    todo = [(index, qualname), *((index, name) for name in index.autouse)]
    while todo:
        where, name = todo.pop()
        if (where.path, name) in seen or name not in where.words:
            continue
        seen.add((where.path, name))
        named = where.words[name]
        words |= named
        for word in named:
            if word in where.words:
                todo.append((where, word))
            elif word in where.imported:
                source, original = where.imported[word]
                if source.is_file():
                    todo.append((module_index(source), original))
    return words


def timing_reasons(path: Path, qualname: str) -> list[str]:
    """Why the test ``qualname`` (``test_x`` or ``Class.test_x``) of ``path`` is a timing
    test: ``name: reason`` for each timing name it uses; empty when it is not one."""
    path = path.resolve()
    relative = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    if relative in EXEMPT or f"{relative}::{qualname}" in EXEMPT:
        return []
    words = _closure(module_index(path), qualname) & TIMING_NAMES.keys()
    if relative.startswith("tests/unit/"):
        words -= OUTSIDE_UNIT_ONLY
    return [f"{name}: {TIMING_NAMES[name]}" for name in sorted(words)]


def unmarked_timing_tests(paths: Iterable[Path]) -> dict[str, list[str]]:
    """``path::qualname`` → reasons, for every timing test without the marker."""
    offenders: dict[str, list[str]] = {}
    for path in paths:
        index = module_index(path.resolve())
        for qualname, marked in index.marked.items():
            if not marked and (reasons := timing_reasons(path, qualname)):
                offenders[f"{path.relative_to(REPO)}::{qualname}"] = reasons
    return offenders
