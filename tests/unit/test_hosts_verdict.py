"""The verdict of a run on several hosts names the host or layer that limits (issue #32):
sim.analysis.hosts on per-host samples as the merged bundle holds them (host CPU one entity
per host, block devices ``<host>/<device>``, the array's volumes once for the run), and the
cgroup CPU quota the host collector reads (storage.collectors.cpu_quota).

Figures are made up so that each call can be checked by hand; a real run on three netns hosts
with one worker held to a CPU quota is tests/integration/test_netns_verdict.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim import registry
from sim.analysis import analyze_series
from sim.analysis.series import OP_FIGURES, BundleSeries
from storage.collectors.cpu_quota import (
    QuotaReading,
    group_dirs,
    parse_limit,
    parse_stat,
    throttled_pct,
)

N = 20
RNG = np.random.default_rng(32)
BLOCK = registry.collector_with_role(registry.ROLE_DEVICE) or ""
HOST = registry.collector_with_role(registry.ROLE_HOST_CPU) or ""
ARRAY = registry.collector_with_role(registry.ROLE_ARRAY) or ""


def const(value: float) -> np.ndarray:
    return np.full(N, float(value))


def cpu(process: float, busy: float = 40.0, **extra: float) -> dict[str, np.ndarray]:
    cols = {"process_cpu_pct": const(process), "cpu_busy_pct": const(busy), "cpus": const(2)}
    cols.update({k: const(v) for k, v in extra.items()})
    return cols


def disk(iops: np.ndarray, await_ms: np.ndarray, util: float) -> dict[str, np.ndarray]:
    return {
        "r_s": iops * 0.9,
        "w_s": iops * 0.1,
        "r_await_ms": await_ms,
        "w_await_ms": await_ms,
        "aqu_sz": iops * await_ms / 1000,
        "util_pct": const(util),
    }


def run(
    hosts: dict[str, dict[str, np.ndarray]],
    devices: dict[str, dict[str, np.ndarray]],
    p99_us: np.ndarray,
    *,
    ops_s: float = 1000.0,
    array: dict[str, dict[str, np.ndarray]] | None = None,
) -> BundleSeries:
    workers = [{"index": i, "host": h, "sessions": 4} for i, h in enumerate(sorted(hosts))]
    sources = {HOST: hosts, BLOCK: devices}
    if array:
        sources[ARRAY] = array
    return BundleSeries(
        path=Path("unused"),
        summary={"distributed": {"workers": workers}, "sessions": 4 * len(workers)},
        scenario={"load": {"sessions": 4 * len(workers), "mode": "closed"}},
        interval_s=1.0,
        t=np.arange(1.0, N + 1),
        duration_s=np.ones(N),
        step=[None] * N,
        ops={"read": op_figures(ops_s, p99_us)},
        sources=sources,
    )


def op_figures(ops_s: float, p99_us: np.ndarray) -> dict[str, np.ndarray]:
    """Every ops.csv figure of one operation (latencies scaled from its p99)."""
    figures = {name: p99_us / 3 for name in OP_FIGURES}
    figures.update(ops_s=const(ops_s), count=const(ops_s), errors=const(0), p99_us=p99_us)
    return figures


def quiet_disks() -> dict[str, dict[str, np.ndarray]]:
    return {
        "a/loop1": disk(const(300), const(0.2), 12.0),
        "b/loop2": disk(const(300), const(0.2), 12.0),
    }


def test_a_worker_host_held_to_a_cpu_quota_is_named_client_bound() -> None:
    # b's dbsim uses all of its 0.2-core quota (19.6 % of one core): far below the one-core
    # mark, but out of CPU; a's has room. Storage idles along.
    series = run(
        {"a": cpu(12.0), "b": cpu(19.6, cpu_limit_cores=0.2, cpu_throttled_pct=96.0)},
        quiet_disks(),
        const(4000) + RNG.normal(0, 50, N),
    )
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] == "client-bound", verdict
    assert verdict["summary"].startswith(
        "Client-bound on host b (CPU 98 % of its 0.20-core quota, throttled in 96 % of its periods)"
    ), verdict["summary"]
    check = next(c for c in verdict["evidence"] if c["check"] == "dbsim process CPU % of one core")
    assert check["passed"] and check["threshold"] == pytest.approx(16.0)
    assert check["meaning"].startswith("host b, the closest to its CPU ceiling")


def test_a_throttled_host_short_of_its_quota_is_still_out_of_cpu() -> None:
    # On a host short of CPU, b's group reaches only 60 % of its 0.1-core quota, yet the quota
    # stopped it in 95 % of its periods; a is busier in CPU terms but unthrottled.
    series = run(
        {"a": cpu(50.0), "b": cpu(6.0, cpu_limit_cores=0.1, cpu_throttled_pct=95.0)},
        quiet_disks(),
        const(4000),
    )
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] == "client-bound", verdict
    assert verdict["summary"].startswith("Client-bound on host b (CPU 60 % of its 0.10-core")
    check = next(c for c in verdict["evidence"] if c["check"] == "CPU quota throttled % of periods")
    assert check["passed"] and check["value"] == pytest.approx(95.0)


def test_a_worker_host_out_of_its_one_core_is_named() -> None:
    series = run({"a": cpu(30.0), "b": cpu(95.0, busy=70.0)}, quiet_disks(), const(4000))
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] == "client-bound", verdict
    assert verdict["summary"].startswith(
        "Client-bound on host b (CPU 95 % of one core, host 70 % busy)"
    ), verdict["summary"]


def test_no_host_short_of_cpu_is_not_client_bound() -> None:
    series = run({"a": cpu(30.0), "b": cpu(35.0)}, quiet_disks(), const(4000))
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] != "client-bound", verdict
    assert "on host" not in verdict["summary"]


def _rising() -> tuple[np.ndarray, np.ndarray]:
    await_ms = 1.0 + RNG.uniform(0, 4, N)
    return await_ms, 2000 + 800 * await_ms + RNG.normal(0, 100, N)


def test_every_hosts_await_rising_together_behind_the_array_volume() -> None:
    # An array volume at a 2,000 IOPS policy shared by both hosts: each host's device busy,
    # its await rising with the application's p99, the array's volume at 2,000 IOPS.
    await_ms, p99 = _rising()
    devices = {
        "a/sdb": disk(const(1000) + RNG.normal(0, 10, N), await_ms + RNG.normal(0, 0.05, N), 92),
        "b/sdc": disk(const(1000) + RNG.normal(0, 10, N), await_ms + RNG.normal(0, 0.05, N), 90),
    }
    array = {"svm1/vol_eda": {"total_iops": const(2000)}, "svm1/vol_logs": {"total_iops": const(5)}}
    series = run({"a": cpu(20.0), "b": cpu(20.0)}, devices, p99, ops_s=1000, array=array)
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] == "storage-bound", verdict
    summary = verdict["summary"]
    assert "the array's svm1/vol_eda at 2,000 IOPS" in summary, summary
    assert "every host's device await rising together with the latency" in summary, summary
    assert "a/sdb await" in summary and "b/sdc await" in summary


def test_one_hosts_await_alone_rising_names_that_host() -> None:
    await_ms, p99 = _rising()
    devices = {
        "a/sdb": disk(const(1000) + RNG.normal(0, 10, N), await_ms, 95),
        "b/sdc": disk(const(1000) + RNG.normal(0, 10, N), 0.3 + RNG.uniform(0, 0.1, N), 20),
    }
    series = run({"a": cpu(20.0), "b": cpu(20.0)}, devices, p99)
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] == "storage-bound", verdict
    assert "only host a's device await rising with the latency" in verdict["summary"], verdict


def test_one_host_under_a_quota_is_judged_against_it(tmp_path: Path) -> None:
    # No distributed section: the host's own figures, its quota the ceiling (40 of 50 %).
    series = run(
        {"a": cpu(45.0, cpu_limit_cores=0.5)},
        {"a/sdb": disk(const(300), const(0.2), 10)},
        const(4000),
    )
    series.summary = {"sessions": 4}
    verdict = analyze_series(series)["verdict"]
    assert verdict["call"] == "client-bound", verdict
    assert verdict["summary"].startswith("Client-bound: dbsim's process ran out of CPU")


# --------------------------------------------------------------------------- cgroup quota

MOUNTS_V1 = "cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"
CGROUP_V1 = "4:memory:/x\n1:cpu:/dbsim/w2\n0::/\n"
MOUNTS_V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n"


def test_the_group_is_found_in_either_hierarchy() -> None:
    assert group_dirs(CGROUP_V1, MOUNTS_V1) == [
        Path("/sys/fs/cgroup/cpu/dbsim/w2"),
        Path("/sys/fs/cgroup/unified"),
    ]
    assert group_dirs("0::/kubepods/pod1/c1\n", MOUNTS_V2) == [
        Path("/sys/fs/cgroup/kubepods/pod1/c1")
    ]


@pytest.mark.parametrize(
    ("files", "cores"),
    [
        ({"cpu.max": "20000 100000\n"}, 0.2),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.cfs_quota_us": "150000\n", "cpu.cfs_period_us": "100000\n"}, 1.5),
        ({"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu.cfs_quota_us": None, "cpu.cfs_period_us": None}, None),
        ({"cpu.max": "garbage"}, None),
    ],
)
def test_the_quota_in_cores(files: dict[str, str | None], cores: float | None) -> None:
    assert parse_limit(files) == (None if cores is None else pytest.approx(cores))


def test_throttled_share_of_the_periods() -> None:
    v1 = "nr_periods 120\nnr_throttled 30\nthrottled_time 999\n"
    v2 = "usage_usec 5\nnr_periods 120\nnr_throttled 30\nthrottled_usec 9\n"
    assert parse_stat(v1) == parse_stat(v2) == (120, 30)
    assert parse_stat("usage_usec 5\n") is None
    before, after = QuotaReading(0.2, 100, 10), QuotaReading(0.2, 110, 19)
    assert throttled_pct(before, after) == pytest.approx(90.0)
    assert throttled_pct(after, after) is None  # no period elapsed
