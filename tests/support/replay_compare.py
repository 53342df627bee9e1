"""``dbsim compare CAPTURE REPLAY`` checked on a replay a test has just made (the replay tests'
flows: the capture and the replay exist already, so the suite gains a few seconds, not a run):
the recomputed figures agree with replay.json's, the exit code is the replay's fidelity's, the
console fits 80 columns, ``--json`` parses, ``--html`` and ``--csv`` are written, and another
bundle given as the capture is refused (exit 2, one line)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Dbsim

EXIT_UNFAITHFUL = 5


def check_compare(
    dbsim: Dbsim, capture: Path, replay: Path, other: Path, out: Path
) -> dict[str, Any]:
    """The comparison of the replay ``replay.json`` (as the test found it) with ``capture``;
    ``other``: a bundle that is not the capture; the page and the CSV are written in ``out``.
    Returns the ``--json`` model."""
    doc = json.loads(replay.read_text())
    home = replay.parent
    faithful = all(s["fidelity"]["faithful"] for s in doc["scales"])
    rc = 0 if faithful else EXIT_UNFAITHFUL
    page, table = out / "compare.html", out / "compare.csv"
    done = dbsim("compare", capture, home, "--json", "--html", page, "--csv", table)
    assert done.rc == rc, done.describe()
    result = json.loads(done.stdout)
    assert result["exit_code"] == rc
    assert "<svg" in page.read_text() and "FAITHFUL" in page.read_text()
    with table.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and {r["scale"] for r in rows} == {str(float(s["scale"])) for s in doc["scales"]}
    _agrees(result, doc)
    text = dbsim("compare", capture, home)
    assert text.rc == rc, text.describe()
    # 80 columns; a longer line only where a path is not broken
    assert all(
        len(line) <= 80 or "/" in max(line.split(), key=len) for line in text.stdout.splitlines()
    )
    for entry in doc["scales"]:
        word = "FAITHFUL" if entry["fidelity"]["faithful"] else "UNFAITHFUL"
        assert f"{word} at {entry['scale']:g}x (replay.json's judgement)" in text.stdout
    refused = dbsim("compare", other, home)
    assert refused.rc == 2 and refused.stdout == "", refused.describe()
    assert len(refused.stderr_lines) == 1 and "is not the capture" in refused.stderr
    return result


def _agrees(result: dict[str, Any], doc: dict[str, Any]) -> None:
    """Recomputed from the bundles, the figures and checks are replay.json's to rounding, and
    the judgement is its own."""
    assert result["capture"]["mismatches"] == []
    for entry, got in zip(doc["scales"], result["scales"], strict=True):
        assert got["judgement"]["faithful"] == entry["fidelity"]["faithful"]
        assert got["judgement"]["cause"] == entry["fidelity"]["cause"]
        assert got["mismatches"] == [], got["mismatches"]
        if "day" in entry:  # shown as replay.json holds it
            assert got["steps"] == entry["fidelity"]["steps"]
            continue
        stored = {c["figure"]: c for c in entry["fidelity"]["checks"]}
        rows = [*got["file_figures"], *got["figures"]]
        judged = [r for r in rows if r["check"]]
        assert {r["check"] for r in judged} <= set(stored), (judged, stored)
        for row in judged:
            check = stored[row["check"]]
            assert _same(row["replay"], check["delivered"]), (row, check)
            assert _same(row["asked"], check["expected"]), (row, check)
            assert row["tolerance"] == check["tolerance"] and row["off"] == check["off"], row
            # The band drawn is the one the replay judged at (this dbsim writes it).
            assert "band" in check, check
            assert _same_band(row["band"], check["band"]), (row, check)
        for row in got["figures"]:
            if row["replay"] is None:
                continue
            # Each side's intervals hold its window's figure between the lowest and highest.
            spread = row["replay_intervals"]
            assert spread["low"] - 1e-9 <= row["replay"] <= spread["high"] + 1e-9, row


def _same(ours: float | None, stored: float | None) -> bool:
    """Equal to rounding, or both absent (a direction without requests has no mean size)."""
    if ours is None or stored is None:
        return ours is None and stored is None
    return bool(ours == pytest.approx(stored, rel=1e-6))


def _same_band(ours: list[float] | None, stored: list[float] | None) -> bool:
    if ours is None or stored is None:
        return ours is None and stored is None
    return len(ours) == len(stored) == 2 and all(map(_same, ours, stored))
