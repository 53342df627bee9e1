"""sim.analysis.series.hosts_sum: a run on several hosts is correlated on the sum of each
host's busiest device; a run on one host is left as it was.

The figures are made up so that each sum can be checked by hand; a real three-host run is
tests/integration/test_netns_hosts.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.analysis.series import HOSTS_SUM, BundleSeries, device_figures, primary_device


def series(hosts: list[str], sources: dict[str, dict[str, np.ndarray]]) -> BundleSeries:
    summary = {"distributed": {"workers": [{"host": h} for h in hosts]}} if hosts else {}
    return BundleSeries(
        path=Path("unused"),
        summary=summary,
        scenario={},
        interval_s=1.0,
        t=np.array([1.0, 2.0, 3.0]),
        sources={"block": sources},
    )


def cols(r_s: list[float], w_s: list[float], r_await: list[float]) -> dict[str, np.ndarray]:
    return {
        "r_s": np.array(r_s),
        "w_s": np.array(w_s),
        "r_await_ms": np.array(r_await),
        "w_await_ms": np.zeros(3),
    }


def test_each_hosts_busiest_device_is_summed_once() -> None:
    run = series(
        ["a", "b"],
        {
            "a/sda": cols([100, 200, 300], [10, 10, 10], [1.0, 1.0, 1.0]),
            "a/sda1": cols([90, 190, 290], [10, 10, 10], [1.0, 1.0, 1.0]),  # its partition
            "b/sdb": cols([50, 50, np.nan], [0, 0, 0], [3.0, 3.0, 3.0]),
        },
    )
    devices = device_figures(run)
    total = devices[HOSTS_SUM]
    # a/sda (not also its partition) + b/sdb; b's missing interval adds nothing
    assert total["r_s"] == pytest.approx([150, 250, 300])
    assert total["iops"] == pytest.approx([160, 260, 310])
    # IOPS-weighted read await: (100 x 1 + 50 x 3) / 150 in the first interval
    assert total["r_await_ms"][0] == pytest.approx(250 / 150)
    assert primary_device(devices) == HOSTS_SUM


@pytest.mark.parametrize("hosts", [[], ["a"], ["a", "a"]])
def test_one_host_has_no_sum(hosts: list[str]) -> None:
    run = series(hosts, {"a/sda": cols([1, 2, 3], [0, 0, 0], [1, 1, 1])})
    assert HOSTS_SUM not in device_figures(run)
