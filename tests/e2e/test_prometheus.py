"""Debian's real Prometheus server scrapes ``dbsim run --metrics-port`` and agrees with the bundle.

The test starts ``/usr/bin/prometheus`` on a free loopback port with a generated scrape config
(every second) pointing at a short SQLite run's ``--metrics-port``, then asks Prometheus' HTTP
API, at the timestamp of its last successful scrape:

* ``histogram_quantile(0.99, sum by (le) (dbsim_op_latency_seconds_bucket{op="read",
  phase="measure"}))`` — the p99 of the measured window up to that scrape — against the p99
  of the bundle's own HDR histograms (``histograms/intervals.hlog``) of the same intervals
  (``dbsim_intervals_total`` at that scrape says how many had closed); and the same over a
  window between two scrapes (the difference of the cumulative buckets ``@`` each).

  The bound: Prometheus finds the bucket in which the rank 0.99 × count falls and
  interpolates linearly inside it, so its estimate lies in ``[lower, upper]`` of that bucket.
  The exported buckets are filled from the very HDR histograms the bundle's p99 is read from,
  each HDR slot by the value HDR reports for it, so the bundle's p99 is in that same bucket
  (and the counts agree exactly). Hence both lie in one bucket and differ by at most its
  width (R10 buckets: 25-28 % of the lower bound, sim.exporter.names).
* every scraped ``dbsim_block_iops`` against ``timeseries/block.csv``'s ``iops`` of the
  interval that scrape saw (block.csv rounds to 4 decimals).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hdrh.histogram import HdrHistogram

from sim.core.metrics import new_histogram
from tests.e2e.conftest import Dbsim, read_csv, single_bundle

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

PROMETHEUS = "prometheus"
DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"
READY_TIMEOUT_S = 30.0
RUN_S = 8
# Paced (open loop, issue #25): the exposition is compared with the bundle, not the machine's
# utmost (closed loop, the two sessions took ~1.4 CPUs for the 9 s); 400 ops/s still fills
# every measured interval's read histogram.
PACED = ("--set", "load.mode=open", "--set", "load.rate_ops_s=400")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class Prometheus:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        body = _get(f"{self.base}/api/v1/query?{urllib.parse.urlencode(params)}")
        assert body["status"] == "success", body
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def samples(self, selector: str) -> list[tuple[float, float]]:
        """The raw scraped samples of one series over the last ten minutes."""
        result = self.query(f"{selector}[10m]")
        assert len(result) == 1, (selector, result)
        return [(float(t), float(v)) for t, v in result[0]["values"]]

    def scalar(self, expr: str, at: float) -> float:
        result = self.query(expr, at)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[Prometheus, int]]:
    binary = shutil.which(PROMETHEUS)
    if binary is None:
        pytest.skip("!!! prometheus is not installed (apt-get install prometheus): NOT tested !!!")
    port, target = _free_port(), _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: dbsim\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
    )
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = Prometheus(port)
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{server.base}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "prometheus did not become ready"
            time.sleep(0.2)
        yield server, target
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _bundle_histogram(bundle: Path, op: str, intervals: range) -> HdrHistogram:
    """The bundle's HDR histogram of ``op`` over the measured intervals in ``intervals``."""
    _, rows = read_csv(bundle / "timeseries" / "ops.csv")
    index_of = {round(float(r["t"]), 3): int(r["interval"]) for r in rows if r["op"] == op}
    merged = new_histogram()
    for line in (bundle / "histograms" / "intervals.hlog").read_text().splitlines():
        _, t_end, phase, name, encoded = line.split(",", 4)
        if name == op and phase == "measure" and index_of[round(float(t_end), 3)] in intervals:
            merged.add(HdrHistogram.decode(encoded))
    return merged


def _bucket_around(server: Prometheus, expr: str, at: float, value: float) -> tuple[float, float]:
    """The ``(lower, upper]`` bounds of the bucket of ``expr`` (by ``le``) holding ``value``."""
    bounds = sorted(float(r["metric"]["le"]) for r in server.query(expr, at))
    upper = next(b for b in bounds if b >= value)
    lower = max([b for b in bounds if b < upper], default=0.0)
    return lower, upper


def _assert_same_bucket(
    server: Prometheus, buckets: str, at: float, histogram: HdrHistogram
) -> tuple[float, float]:
    """Prometheus' p99 of ``buckets`` (per ``le``) and the bundle's of ``histogram``, each
    asserted to lie in the one bucket that holds the bundle's p99; both in seconds."""
    prom = server.scalar(f"histogram_quantile(0.99, {buckets})", at)
    # The same rank on both sides: histogram_quantile takes the first bucket whose count
    # reaches 0.99 x N, HDR's get_value_at_percentile rounds 0.99 x N to the nearest count.
    # With a bucket's count between the two (CI: 0.0316 in the bucket above the bundle's
    # 0.03142, whose edge is 0.0315) they named neighbouring buckets.
    total = histogram.get_total_count()
    rank = math.ceil(0.99 * total)
    bundle = histogram.get_value_at_percentile(100.0 * rank / total) / 1e6
    lower, upper = _bucket_around(server, buckets, at, bundle)
    assert lower < bundle <= upper
    assert lower <= prom <= upper, (prom, bundle, lower, upper)
    return prom, bundle


MEASURED = 'dbsim_op_latency_seconds_bucket{op="read",phase="measure"}'
MEASURED_ALL = 'dbsim_op_latency_seconds_bucket{op="read",phase="measure",le="+Inf"}'


def test_prometheus_scrapes_a_run_and_agrees_with_the_bundle(
    dbsim: Dbsim, out_dir: Path, prometheus: tuple[Prometheus, int]
) -> None:
    server, port = prometheus
    args = ["run", "--duration", str(RUN_S), "--warmup", "1", *PACED, "--metrics-port", str(port)]
    run = dbsim.finish(dbsim.start(*args, "-o", out_dir), timeout=120)
    assert run.rc == 0, run.describe()
    bundle = single_bundle(out_dir)
    scrapes = server.samples("dbsim_intervals_total")
    in_measure = [(t, n) for t, n in scrapes if server.query(MEASURED_ALL, t)]
    assert len(in_measure) >= 4, scrapes
    (t_a, n_a), (t_b, n_b) = in_measure[1], in_measure[-1]

    # The measured window up to the last scrape: the counts agree exactly, the p99 in-bucket.
    histogram = _bundle_histogram(bundle, "read", range(int(n_b)))
    assert server.scalar(f"sum({MEASURED_ALL})", t_b) == histogram.get_total_count()
    prom, ours = _assert_same_bucket(server, f"sum by (le) ({MEASURED})", t_b, histogram)
    print(
        f"read p99 over intervals 0-{int(n_b) - 1}: Prometheus {prom * 1e3:.3f} ms, "
        f"bundle {ours * 1e3:.3f} ms"
    )

    # A window between two scrapes: the difference of the cumulative buckets at each.
    window = f"sum by (le) ({MEASURED} @ {t_b:.3f} - {MEASURED} @ {t_a:.3f})"
    histogram = _bundle_histogram(bundle, "read", range(int(n_a), int(n_b)))
    assert histogram.get_total_count() > 0
    prom, ours = _assert_same_bucket(server, window, t_b, histogram)
    print(
        f"read p99 over intervals {int(n_a)}-{int(n_b) - 1}: Prometheus {prom * 1e3:.3f} ms, "
        f"bundle {ours * 1e3:.3f} ms"
    )

    # Block device IOPS: each scrape shows the interval it followed, as block.csv has it.
    _, rows = read_csv(bundle / "timeseries" / "block.csv")
    csv_iops = {(int(r["interval"]), r["entity"]): float(r["iops"]) for r in rows}
    intervals_at = dict(scrapes)
    compared = 0
    for series in server.query("dbsim_block_iops[10m]"):
        device = series["metric"]["device"]
        assert series["metric"]["collector"] == "block"
        for t, value in series["values"]:
            key = (int(intervals_at[float(t)]) - 1, device)
            if key in csv_iops:
                assert float(value) == pytest.approx(csv_iops[key], abs=1e-4), (key, t)
                compared += 1
    assert compared >= 4, (compared, csv_iops)

    # The Grafana dashboard in docs/ names only metrics this Prometheus now holds.
    names = set(_get(f"{server.base}/api/v1/label/__name__/values")["data"])
    dashboard = json.loads(DASHBOARD.read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"\bdbsim_[a-z0-9_]+", target["expr"])
    }
    assert used and used <= names, used - names


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--metrics-port", "0", "--metrics-host", "0.0.0.0"], {}, "needs --metrics-login"),
        (["--metrics-port", "0", "--metrics-login", "NO_SUCH_VAR"], {}, "is not set"),
        (["--metrics-host", "0.0.0.0"], {}, "give --metrics-port too"),
        (["--metrics-port", "70000"], {}, "is not a TCP port"),
        (["--metrics-port", "0", "--workers", "2"], {}, "not with --workers"),
    ],
)
def test_metrics_listener_refusals(
    dbsim: Dbsim, out_dir: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    result = dbsim("run", "--duration", "1", *args, "-o", out_dir, env=env)
    assert result.rc == 2, result.describe()
    assert result.stderr_lines and all(line.startswith("error: ") for line in result.stderr_lines)
    assert message in result.stderr, result.describe()
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_a_taken_metrics_port_is_refused_before_any_bundle(dbsim: Dbsim, out_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = dbsim("run", "--duration", "1", "--metrics-port", str(port), "-o", out_dir)
    assert result.rc == 2, result.describe()
    assert result.stderr_lines == [
        f"error: --metrics-port: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert not out_dir.exists() or not any(out_dir.iterdir())
