"""The docs test's summary: how many blocks of the guide ran, how many were skipped, and why.

Printed at the end of every session that ran tests/docs (CI's log shows it without ``-rs``).
"""

from __future__ import annotations

from collections import Counter

import pytest

_PREFIX = "tests/docs/test_docs.py::"


def _reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts: Counter[str] = Counter()
    skipped: list[str] = []
    for outcome in ("passed", "failed", "skipped", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            nodeid = getattr(report, "nodeid", "")
            if not nodeid.startswith(_PREFIX) or "_block[" not in nodeid:
                continue
            if outcome == "skipped" or report.when == "call":
                counts[outcome] += 1
            if outcome == "skipped":
                skipped.append(_reason(report))
    if not counts:
        return
    terminalreporter.section("docs test")
    terminalreporter.write_line(
        f"docs blocks: {counts['passed']} ran and passed, {counts['failed']} failed, "
        f"{counts['skipped']} skipped (each by a docs-test marker next to the block)"
    )
    for reason in sorted(skipped):
        terminalreporter.write_line(f"  skipped {reason}")
