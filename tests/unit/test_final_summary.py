"""A finished run's summary.json is written once, with its SLO verdicts and sweep in it, judged
on the summary as written: a real sweep on a temporary SQLite database, run in process, every
write of summary.json seen as it happens."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sim.analysis import analyze_bundle
from sim.bundle.writer import BundleWriter
from sim.config.resolve import resolve
from sim.run.finish import finish_summary
from sim.run.runner import prepare_run


def test_the_final_summary_is_written_once_with_its_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = resolve(
        None,
        [
            ("output.directory", str(tmp_path)),
            ("load.warmup_s", 0.5),
            ("load.sweep", {"vary": "sessions", "start": 1, "max": 2, "step": 1}),
            ("load.sweep.step_duration_s", 2.0),
            ("load.sweep.stop_on_breach", False),
            ("slos", [{"op": "read", "p99_us_max": 10_000_000}]),
        ],
    )
    run = prepare_run(scenario)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(run.engine.run())
    finally:
        loop.close()
    written: list[dict[str, Any]] = []
    original = BundleWriter._write_summary_file

    def seen(writer: BundleWriter, summary: Mapping[str, Any]) -> None:
        original(writer, summary)
        written.append(json.loads((writer.path / "summary.json").read_text()))

    monkeypatch.setattr(BundleWriter, "_write_summary_file", seen)
    returned = finish_summary(run)

    (final,) = written
    assert final["status"] == returned["status"] == "completed"
    assert final["slos"]["met"] is True and len(final["sweep"]["points"]) == 2
    assert list(final) == list(returned)
    on_disk = json.loads((run.bundle.path / "summary.json").read_text())
    assert on_disk == final
    # The knee was judged on the summary before it was written: the written bundle agrees.
    knee = analyze_bundle(run.bundle.path)["curve"].get("knee")
    assert final["sweep"]["knee"] == (
        {**knee, "x_is": final["sweep"]["knee"]["x_is"]} if knee else None
    )
