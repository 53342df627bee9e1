"""Host CPU collector: mpstat's arithmetic on two /proc/stat readings, driven by a fake clock."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample
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


# ------------------------------------------------------------------ resets, on recorded text

DATA = Path(__file__).resolve().parents[1] / "data" / "procstat"


def drive(names: list[str], tmp_path: Path, texts: dict[str, str] | None = None) -> list[Sample]:
    """start() on the first reading, then one sample() per further reading, 1 s apart."""
    stat = tmp_path / "stat"
    collector = HostCpuCollector(stat)
    texts = texts or {}

    def reading(name: str) -> str:
        return texts[name] if name in texts else (DATA / name).read_text(encoding="ascii")

    async def go() -> list[Sample]:
        stat.write_text(reading(names[0]))
        await collector.start(0.0)
        out = []
        for i, name in enumerate(names[1:], start=1):
            stat.write_text(reading(name))
            [sample] = await collector.sample(float(i))
            out.append(sample)
        return out

    return asyncio.run(go())


def shares(sample: Sample) -> dict[str, float]:
    return {k: round(v, 9) for k, v in sample.values.items() if k.startswith("cpu_")}


STEADY = {  # steady.1 -> steady.2 over 200 ticks (tests/data/procstat/README.md)
    "cpu_user_pct": 60.0, "cpu_system_pct": 17.0, "cpu_iowait_pct": 3.0, "cpu_idle_pct": 20.0,
    "cpu_steal_pct": 0.0, "cpu_busy_pct": 77.0,
}  # fmt: skip


def test_a_reboot_is_a_reset_and_the_next_interval_is_exact(tmp_path: Path) -> None:
    steady, across, after = drive(["steady.1", "steady.2", "rebooted.2", "rebooted.3"], tmp_path)
    assert shares(steady) == STEADY
    assert (across.gap, dict(across.values)) == (GAP_RESET, {})
    assert across.detail == "btime: 1796159531 -> 1796160071"
    assert shares(after) == {
        "cpu_user_pct": 50.0, "cpu_system_pct": 27.0, "cpu_iowait_pct": 1.0,
        "cpu_idle_pct": 22.0, "cpu_steal_pct": 0.0, "cpu_busy_pct": 77.0,
    }  # fmt: skip
    for sample in (steady, after):  # nothing a CPU cannot do
        assert all(0.0 <= v <= 100.0 for v in shares(sample).values())


def test_counters_going_down_without_btime_are_a_reset(tmp_path: Path) -> None:
    no_btime = {
        name: "".join(
            line
            for line in (DATA / name).read_text().splitlines(keepends=True)
            if not line.startswith("btime")
        )
        for name in ("steady.2", "rebooted.2")
    }
    [across] = drive(["steady.2", "rebooted.2"], tmp_path, no_btime)
    assert across.gap == GAP_RESET and across.detail == "cpu user: 31530 -> 6000"
    # Differenced anyway, every delta clamps to 0 and the host reads 100 % busy out of nothing.
    assert cpu_percentages([31530, 76, 8428, 97892], [6000, 3, 1350, 4550])["cpu_busy_pct"] == 100


def test_a_migration_to_a_longer_running_host_is_a_reset(tmp_path: Path) -> None:
    [across] = drive(["steady.1", "migrated.2"], tmp_path)
    assert across.gap == GAP_RESET and across.detail == "btime: 1796159531 -> 1796000000"


def test_iowait_going_back_while_idle_grows_is_not_a_reset(tmp_path: Path) -> None:
    [sample] = drive(["steady.1", "iowait_back.2"], tmp_path)
    assert sample.gap == ""
    # As mpstat: iowait's delta counts as 0; 220 ticks, 66 of them idle.
    assert sample.values["cpu_iowait_pct"] == 0.0
    assert sample.values["cpu_idle_pct"] == pytest.approx(30.0)
    assert sample.values["cpu_busy_pct"] == pytest.approx(70.0)


@pytest.mark.parametrize(
    ("mangle", "seen"),
    [
        (lambda t: t.replace("cpu  31530 76", "cpu  31530 7x6"), "malformed cpu line: cpu  31530"),
        (lambda t: t.replace(" 654 289 0 0\n", "\n", 1), "malformed cpu line: cpu  31530"),
        (lambda t: t.split("\n")[0][:-4], "cpu line cut short (no end of line): cpu  31530"),
        (lambda t: t.replace("cpu ", "cpX ", 1), "no cpu line"),
    ],
    ids=["not-a-number", "6-fields", "cut-mid-field", "no-cpu-line"],
)
def test_a_malformed_cpu_line_is_unreadable_and_the_baseline_stays(
    tmp_path: Path, mangle: Callable[[str], str], seen: str
) -> None:
    bad = mangle((DATA / "steady.2").read_text())
    texts = {"bad": bad, "steady.1": (DATA / "steady.1").read_text()}
    during, after = drive(["steady.1", "bad", "steady.2"], tmp_path, texts)
    assert (during.gap, dict(during.values)) == (GAP_UNREADABLE, {})
    assert during.detail.startswith(seen)
    assert shares(after) == STEADY  # steady.1 -> steady.2, the baseline kept
