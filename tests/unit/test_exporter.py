"""The Prometheus exporter (sim.exporter) on recorded figures: names, buckets, snapshots, auth."""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from sim.core.metrics import Interval, OpStats
from sim.exporter import MetricsServer, RunExporter, basic_auth_ok
from sim.exporter.metrics import bucket_counts
from sim.exporter.names import BOUNDS_S, BOUNDS_US, figure_name
from sim.protocols import Sample

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"


@pytest.mark.parametrize(
    ("source", "key", "name", "factor"),
    [
        ("block", "r_s", "dbsim_block_r_per_second", 1.0),
        ("block", "rkB_s", "dbsim_block_r_bytes_per_second", 1024.0),
        ("block", "r_await_ms", "dbsim_block_r_await_seconds", 1e-3),
        ("block", "util_pct", "dbsim_block_util_ratio", 0.01),
        ("block", "iops", "dbsim_block_iops", 1.0),
        ("block", "aqu_sz", "dbsim_block_aqu_sz", 1.0),
        ("block", "rareq_sz_kB", "dbsim_block_rareq_size_bytes", 1024.0),
        ("nfs", "kB_per_op", "dbsim_nfs_bytes_per_op", 1024.0),
        ("db", "blk_read_time_ms_s", "dbsim_db_blk_read_time_seconds_per_second", 1e-3),
        ("db", "wal_bytes_s", "dbsim_db_wal_bytes_per_second", 1.0),
        ("db", "interval_s", "dbsim_db_interval_seconds", 1.0),
        ("ontap", "read_latency_us", "dbsim_ontap_read_latency_seconds", 1e-6),
        ("ontap", "read_bps", "dbsim_ontap_read_bytes_per_second", 1.0),
        ("host", "cpus", "dbsim_host_cpus", 1.0),
    ],
)
def test_collector_keys_become_base_unit_names(
    source: str, key: str, name: str, factor: float
) -> None:
    assert figure_name(source, key) == (name, pytest.approx(factor))


def test_buckets_span_a_microsecond_to_100_seconds_ten_per_decade() -> None:
    assert BOUNDS_US[0] == 1 and BOUNDS_US[-1] == 100_000_000
    assert BOUNDS_S[0] == pytest.approx(1e-6) and BOUNDS_S[-1] == 100.0
    ratios = np.asarray(BOUNDS_US[1:]) / np.asarray(BOUNDS_US[:-1])
    assert ratios.max() <= 1.28 and ratios.min() >= 1.24


def _stats(values: list[int], errors: dict[str, int] | None = None) -> OpStats:
    stats = OpStats(errors=dict(errors or {}))
    for v in values:
        stats.histogram.record_value(v)
    return stats


def test_each_value_falls_in_the_first_bucket_at_or_above_it() -> None:
    # 1250 µs is a bound (inclusive); 1251 µs is above it; 3 s is far up.
    counts = bucket_counts(_stats([1250, 1251, 1251, 3_000_000]).histogram)
    assert counts.sum() == 4
    assert counts[BOUNDS_US.index(1250)] == 1
    assert counts[BOUNDS_US.index(1600)] == 2
    assert counts[BOUNDS_US.index(3_150_000)] == 1


def _interval(index: int, phase: str, ops: dict[str, OpStats]) -> Interval:
    return Interval(index, float(index), float(index + 1), phase, None, ops)


def _scrape(exporter: RunExporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(exporter.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_intervals_accumulate_per_op_and_phase_and_storage_is_the_latest() -> None:
    exporter = RunExporter()
    exporter.on_state(state="warmup")
    exporter.on_interval(_interval(0, "warmup", {"read": _stats([100, 200])}), [])
    exporter.on_state(state="measure")
    disk = Sample("block", "vda", {"r_s": 40.0, "r_await_ms": 2.5, "util_pct": 50.0})
    exporter.on_interval(_interval(1, "measure", {"read": _stats([300], {"timeout": 2})}), [disk])
    exporter.on_interval(_interval(2, "measure", {"read": _stats([4_900, 7_000])}), [])
    got = _scrape(exporter)
    measure = (("op", "read"), ("phase", "measure"))
    assert got[("dbsim_ops_total", measure)] == 3
    assert got[("dbsim_ops_total", (("op", "read"), ("phase", "warmup")))] == 2
    assert got[("dbsim_op_errors_by_class_total", (("class", "timeout"), *measure))] == 2
    assert got[("dbsim_op_errors_total", measure)] == 2
    assert got[("dbsim_op_errors_total", (("op", "read"), ("phase", "warmup")))] == 0
    assert got[("dbsim_op_latency_seconds_count", measure)] == 3
    assert got[("dbsim_op_latency_seconds_sum", measure)] == pytest.approx(
        0.0122, rel=1e-3
    )  # HDR means
    le_5ms = ("dbsim_op_latency_seconds_bucket", (("le", "0.005"), *measure))
    assert got[le_5ms] == 2  # 300 µs and 4.9 ms
    assert got[("dbsim_intervals_total", ())] == 3
    assert got[("dbsim_run_state", (("state", "measure"),))] == 1
    assert got[("dbsim_run_elapsed_seconds", ())] == 3.0
    # The last interval had no block sample: no block figure is shown as if current.
    assert not any(name.startswith("dbsim_block") for name, _ in got)


def test_storage_figures_carry_collector_and_entity_labels_in_base_units() -> None:
    exporter = RunExporter()
    disk = Sample("block", "vda", {"r_s": 40.0, "r_await_ms": 2.5, "util_pct": 50.0})
    gap = Sample("block", "vdb", {}, gap="reset")
    exporter.on_interval(_interval(0, "measure", {}), [disk, gap])
    got = _scrape(exporter)
    labels = (("collector", "block"), ("device", "vda"))
    assert got[("dbsim_block_r_per_second", labels)] == 40.0
    assert got[("dbsim_block_r_await_seconds", labels)] == pytest.approx(0.0025)
    assert got[("dbsim_block_util_ratio", labels)] == 0.5
    assert not any(dict(lab).get("device") == "vdb" for _, lab in got)
    exporter.on_state(state="finished")
    assert not any(name.startswith("dbsim_block") for name, _ in _scrape(exporter))


def test_a_new_run_starts_from_zero() -> None:
    class Engine:
        max_sessions = 4

        def __init__(self) -> None:
            from sim.core.events import EngineEvents

            self.events = EngineEvents()

    exporter = RunExporter()
    exporter.on_interval(_interval(0, "measure", {"read": _stats([10])}), [])
    engine = Engine()
    exporter.attach(engine, {"run": "r2", "scenario": "s", "workload": "slob", "target": "sqlite"})
    got = _scrape(exporter)
    assert ("dbsim_ops_total", (("op", "read"), ("phase", "measure"))) not in got
    assert got[("dbsim_sessions", ())] == 4
    engine.events.progress.fire(what="load t", done=5, total=10)
    engine.events.collector_error.fire(source="block", message="timeout")
    got = _scrape(exporter)
    assert got[("dbsim_progress_done", (("what", "load t"),))] == 5
    assert got[("dbsim_collector_errors_total", (("collector", "block"),))] == 1
    info = (("run", "r2"), ("scenario", "s"), ("target", "sqlite"), ("workload", "slob"))
    assert got[("dbsim_run_info", info)] == 1


def _basic(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


def test_basic_auth_accepts_only_the_login() -> None:
    login = ("alice", "s3cret:with colon")
    assert basic_auth_ok(_basic("alice:s3cret:with colon"), login)
    assert not basic_auth_ok(_basic("alice:wrong"), login)
    assert not basic_auth_ok(_basic("bob:s3cret:with colon"), login)
    assert not basic_auth_ok("Bearer xyz", login)
    assert not basic_auth_ok("Basic !!!not-base64", login)
    assert not basic_auth_ok(None, login)


def test_the_server_serves_metrics_behind_its_login() -> None:
    exporter = RunExporter()
    server = MetricsServer(exporter.registry, "127.0.0.1", 0, ("alice", "pw"))
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.url, timeout=5)
        assert refused.value.code == 401
        refused.value.close()
        request = urllib.request.Request(server.url, headers={"Authorization": _basic("alice:pw")})
        with urllib.request.urlopen(request, timeout=5) as answer:
            body = answer.read().decode()
        assert 'dbsim_run_state{state="idle"} 1.0' in body
    finally:
        server.close()


def test_grafana_dashboard_parses_and_uses_only_dbsim_metric_names() -> None:
    """The names it uses exist: tests/e2e/test_prometheus.py checks them against a real
    Prometheus' list after a run; here, that they parse as the exporter's families."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 8
    names = {n for e in exprs for n in re.findall(r"\bdbsim_[a-z0-9_]+", e)}
    assert "dbsim_op_latency_seconds_bucket" in names and "dbsim_block_iops" in names
