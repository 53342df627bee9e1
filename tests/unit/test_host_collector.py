"""Host CPU collector: mpstat's arithmetic on two /proc/stat readings, driven by a fake clock."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storage.collectors.host import HostCpuCollector, cpu_percentages


def test_cpu_shares_follow_mpstat() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    prev = [100, 0, 50, 800, 50, 0, 0, 0, 10, 0]
    curr = [160, 10, 70, 900, 60, 5, 5, 0, 40, 0]  # +70 user, +30 sys, +100 idle, +10 iowait
    shares = cpu_percentages(prev, curr)
    assert shares["cpu_user_pct"] == pytest.approx(100 * 70 / 210)
    assert shares["cpu_system_pct"] == pytest.approx(100 * 30 / 210)
    assert shares["cpu_idle_pct"] == pytest.approx(100 * 100 / 210)
    assert shares["cpu_busy_pct"] == pytest.approx(100 * 100 / 210)


def test_collector_reports_interval_rates(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3\n")
    collector = HostCpuCollector(stat)

    async def go() -> list[float]:
        await collector.start(10.0)
        stat.write_text("cpu  150 0 150 900 0 0 0 0 0 0\n")
        samples = await collector.sample(12.0)
        return [samples[0].values["cpu_busy_pct"], samples[0].values["process_cpu_pct"]]

    busy, process = asyncio.run(go())
    assert busy == pytest.approx(50.0)
    assert 0 <= process < 200
