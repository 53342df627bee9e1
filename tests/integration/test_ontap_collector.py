"""The ONTAP collector against a local replay of ONTAP's documented REST answers
(tests/support/ontap_replay.py): exact rates from raw counters, metric and auto modes, paging,
errors, TLS, timeouts (alone and inside a running engine), counter resets, secrets."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sim.config.scenario import Load
from sim.core.engine import Engine
from sim.core.result import OUTCOME_COMPLETED
from sim.errors import CollectorError, ConfigError, ScenarioError
from sim.protocols import GAP_RESET, Sample
from sim.registry import collectors
from storage.collectors.ontap import OntapCollector, OntapSettings, auto
from tests.support.fakes import PingParameters, PingWorkload, TimedTarget
from tests.support.ontap_replay import Entity, OntapReplay, TlsFiles, make_tls_files

pytestmark = pytest.mark.integration

USER, PASSWORD = "monitor", "Repl4y-s3cret!"
# Per 5-second step: ops (read, write, other), microseconds per op, bytes per op.
VOL_DATA = Entity(
    "volume", "svm1", "vol_data", "a1", (500, 250, 50), (200, 400, 100), (8192, 16384, 0)
)
VOL_LOG = Entity("volume", "svm1", "vol_log", "a2", (0, 1000, 10), (0, 150, 150), (0, 4096, 0))
VOL_TMP = Entity("volume", "svm1", "vol_tmp", "a3", (5, 5, 0), (100, 100, 0), (4096, 4096, 0))
VOL_OTHER = Entity("volume", "svm2", "vol_data", "b1", (1, 1, 1), (1, 1, 1), (1, 1, 1))
LUN_DB = Entity(
    "lun", "svm1", "/vol/vol_data/lun_db", "c1", (250, 125, 5), (300, 600, 400), (4096, 8192, 512)
)
ALL = [VOL_DATA, VOL_LOG, VOL_TMP, VOL_OTHER, LUN_DB]

# Hand-computed from the steps above over 5 s (latency: microseconds over operations).
EXPECTED = {
    "volume:svm1/vol_data": {
        "read_iops": 100.0, "write_iops": 50.0, "other_iops": 10.0, "total_iops": 160.0,
        "read_latency_us": 200.0, "write_latency_us": 400.0, "other_latency_us": 100.0,
        "total_latency_us": 256.25,  # (500*200 + 250*400 + 50*100) / 800
        "read_bps": 819200.0, "write_bps": 819200.0, "other_bps": 0.0, "total_bps": 1638400.0,
    },
    "volume:svm1/vol_log": {
        "read_iops": 0.0, "write_iops": 200.0, "other_iops": 2.0, "total_iops": 202.0,
        "read_latency_us": 0.0, "write_latency_us": 150.0, "other_latency_us": 150.0,
        "total_latency_us": 150.0,
        "read_bps": 0.0, "write_bps": 819200.0, "other_bps": 0.0, "total_bps": 819200.0,
    },
    "lun:/vol/vol_data/lun_db": {
        "read_iops": 50.0, "write_iops": 25.0, "other_iops": 1.0, "total_iops": 76.0,
        "read_latency_us": 300.0, "write_latency_us": 600.0, "other_latency_us": 400.0,
        "total_latency_us": 400.0,  # (250*300 + 125*600 + 5*400) / 380
        "read_bps": 204800.0, "write_bps": 204800.0, "other_bps": 512.0, "total_bps": 410112.0,
    },
}  # fmt: skip


@pytest.fixture
def creds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTAP_TEST_USER", USER)
    monkeypatch.setenv("ONTAP_TEST_PASSWORD", PASSWORD)


@pytest.fixture
def replay(creds: None) -> Iterator[OntapReplay]:
    with OntapReplay(ALL, username=USER, password=PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def settings(url: str, **overrides: Any) -> OntapSettings:
    base: dict[str, Any] = {
        "cluster": url,
        "username_env": "ONTAP_TEST_USER",
        "password_env": "ONTAP_TEST_PASSWORD",
        "volumes": ["vol_data", "vol_log"],
        "svm": "svm1",
        "luns": ["/vol/vol_data/lun_db"],
    }
    return OntapSettings(**base | overrides)


def run(collector: OntapCollector, nows: list[float]) -> list[list[Sample]]:
    """start(nows[0]), then sample(t) for the rest; always stop()."""

    async def main() -> list[list[Sample]]:
        await collector.start(nows[0])
        try:
            return [await collector.sample(now) for now in nows[1:]]
        finally:
            await collector.stop()

    return asyncio.run(main())


def by_entity(samples: list[Sample]) -> dict[str, Sample]:
    return {s.entity: s for s in samples}


def test_rates_from_raw_counters_equal_the_hand_computed_values(replay: OntapReplay) -> None:
    rounds = run(OntapCollector(settings(replay.url)), [0.0, 1.0, 2.0])
    for samples in rounds:
        got = by_entity(samples)
        assert set(got) == set(EXPECTED)  # svm2's vol_data and vol_tmp are filtered out
        for entity, values in EXPECTED.items():
            assert dict(got[entity].values) == values, entity
            assert got[entity].meta["mode"] == "statistics"
            assert got[entity].meta["interval_s"] == "5"  # the counters' clock, not the engine's
    # Both collections are asked for at once, so the order of the two GETs is not fixed.
    [query] = [q for path, q in replay.requests[:2] if path == "/api/storage/volumes"]
    assert query == {
        "fields": "name,svm.name,statistics",
        "name": "vol_data|vol_log",
        "svm.name": "svm1",
    }
    assert len(replay.requests) == 6  # one GET per collection per reading


def test_without_counter_timestamps_the_engine_clock_is_the_interval(replay: OntapReplay) -> None:
    replay.timestamps = False
    [samples] = run(OntapCollector(settings(replay.url)), [10.0, 15.0])
    assert (
        dict(by_entity(samples)["volume:svm1/vol_data"].values) == EXPECTED["volume:svm1/vol_data"]
    )


def test_metric_mode_reports_ontaps_averages(replay: OntapReplay) -> None:
    [samples] = run(OntapCollector(settings(replay.url, mode="metric")), [0.0, 1.0])
    lun = by_entity(samples)["lun:/vol/vol_data/lun_db"]
    assert lun.meta["mode"] == "metric" and lun.meta["duration"] == "PT15S"
    assert lun.values["read_iops"] == 50.0 and lun.values["total_iops"] == 76.0
    assert lun.values["write_latency_us"] == 600.0 and lun.values["total_latency_us"] == 400.0
    assert lun.values["total_bps"] == 410112.0
    vol = by_entity(samples)["volume:svm1/vol_data"]
    assert vol.values["total_latency_us"] == 256.0  # ONTAP's metric figures are integers
    assert all(query["fields"] == "name,svm.name,metric" for _, query in replay.requests)


def test_auto_mode_falls_back_to_metric_where_raw_counters_are_absent(creds: None) -> None:
    lun_without_raw = Entity(
        "lun", "svm1", "/vol/vol_data/lun_db", "c1", LUN_DB.ops, LUN_DB.latency_us,
        LUN_DB.bytes_per_op, raw=False,
    )  # fmt: skip
    with OntapReplay([VOL_DATA, VOL_LOG, lun_without_raw]) as server:
        collector = OntapCollector(settings(server.url))
        [samples] = run(collector, [0.0, 1.0])
        fields = [(path, query["fields"]) for path, query in server.requests]
    got = by_entity(samples)
    assert got["volume:svm1/vol_data"].meta["mode"] == "statistics"
    assert got["lun:/vol/vol_data/lun_db"].meta["mode"] == "metric"
    assert got["lun:/vol/vol_data/lun_db"].values["total_iops"] == 76.0
    assert collector.describe()["modes"] == {"volume": "statistics", "lun": "metric"}
    assert ("/api/storage/luns", "name,svm.name,metric") in fields


def test_statistics_mode_refuses_objects_without_raw_counters(creds: None) -> None:
    no_raw = Entity("volume", "svm1", "vol_data", "a1", (1, 1, 1), (1, 1, 1), (1, 1, 1), raw=False)
    with OntapReplay([no_raw]) as server:
        collector = OntapCollector(
            settings(server.url, mode="statistics", volumes=["vol_data"], luns=[])
        )
        with pytest.raises(CollectorError, match=r"no statistics\.\*_raw counters; try mode: auto"):
            run(collector, [0.0])


def test_pagination_is_followed_across_pages(replay: OntapReplay) -> None:
    replay.page_size = 2
    collector = OntapCollector(settings(replay.url, volumes=[], luns=[]))  # every svm1 volume
    [samples] = run(collector, [0.0, 1.0])
    assert set(by_entity(samples)) == {
        "volume:svm1/vol_data",
        "volume:svm1/vol_log",
        "volume:svm1/vol_tmp",
    }
    assert by_entity(samples)["volume:svm1/vol_tmp"].values["read_iops"] == 1.0
    follow_ups = [q for _, q in replay.requests if "start.uuid" in q]
    assert [q["start.uuid"] for q in follow_ups] == ["a3", "a3"]  # start and sample


def test_a_missing_volume_is_named_at_start(replay: OntapReplay) -> None:
    with pytest.raises(CollectorError, match="volume not found: vol_gone"):
        run(OntapCollector(settings(replay.url, volumes=["vol_data", "vol_gone"])), [0.0])


def test_401_is_one_line_without_the_password(
    replay: OntapReplay, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "Wr0ng-pa55word!"
    monkeypatch.setenv("ONTAP_TEST_PASSWORD", wrong)
    collector = OntapCollector(settings(replay.url))
    with pytest.raises(CollectorError) as caught:
        run(collector, [0.0])
    message = str(caught.value)
    assert "HTTP 401" in message and "$ONTAP_TEST_USER" in message
    assert "User is not authorized" in message  # ONTAP's error.message is passed on
    assert "\n" not in message and wrong not in message and PASSWORD not in message
    assert wrong not in json.dumps(collector.describe())


def test_other_http_errors_carry_ontaps_message(replay: OntapReplay) -> None:
    replay.fail_with = (403, "not authorized for that command", "6")
    with pytest.raises(CollectorError, match=r"HTTP 403.*not authorized for that command"):
        run(OntapCollector(settings(replay.url)), [0.0])


def test_tls_verification_rejects_an_unknown_ca(creds: None, tls: TlsFiles) -> None:
    with OntapReplay(ALL, tls=tls) as server, pytest.raises(CollectorError) as caught:
        run(OntapCollector(settings(server.url)), [0.0])
    message = str(caught.value)
    assert "TLS certificate verification failed" in message
    assert "ca_file" in message and "verify_tls: false" in message


def test_ca_file_pointing_at_the_test_ca_works(creds: None, tls: TlsFiles) -> None:
    with OntapReplay(ALL, tls=tls) as server:
        [samples] = run(OntapCollector(settings(server.url, ca_file=tls.ca_cert)), [0.0, 1.0])
    assert by_entity(samples)["volume:svm1/vol_log"].values["write_iops"] == 200.0


def test_ca_file_made_by_openssl_works(creds: None, tmp_path: Path) -> None:
    files = make_tls_files(tmp_path, use_openssl=True)
    with OntapReplay(ALL, tls=files) as server:
        [samples] = run(OntapCollector(settings(server.url, ca_file=files.ca_cert)), [0.0, 1.0])
    assert len(samples) == 3


def test_verify_tls_false_works_and_warns_once(
    creds: None, tls: TlsFiles, caplog: pytest.LogCaptureFixture
) -> None:
    with OntapReplay(ALL, tls=tls) as server:
        for _ in range(2):
            [samples] = run(OntapCollector(settings(server.url, verify_tls=False)), [0.0, 1.0])
            assert len(samples) == 3
    ours = [r for r in caplog.records if r.name == "storage.collectors.ontap"]
    assert [r.levelno for r in ours] == [logging.WARNING]
    assert "verify_tls false, server not authenticated" in ours[0].getMessage()


@pytest.mark.timing
def test_a_hanging_cluster_times_out_within_timeout_s(replay: OntapReplay) -> None:
    replay.hang_after = 2  # start() is answered, then nothing
    collector = OntapCollector(settings(replay.url, timeout_s=0.3))

    async def main() -> float:
        await collector.start(0.0)
        began = time.perf_counter()
        try:
            with pytest.raises(CollectorError, match=r"answer within 0\.3 s"):
                await collector.sample(1.0)
            return time.perf_counter() - began
        finally:
            await collector.stop()

    assert asyncio.run(main()) < 0.3 + 0.7  # the margin is for a loaded test machine


@pytest.mark.timing
@pytest.mark.parametrize(
    ("ontap_timeout_s", "engine_timeout_s"),
    [(0.2, 0.5), (1.0, 0.2)],
    ids=["collector-gives-up-first", "engine-gives-up-first"],
)
def test_a_hanging_cluster_does_not_stop_an_engine_run(
    replay: OntapReplay, ontap_timeout_s: float, engine_timeout_s: float
) -> None:
    replay.hang_after = 2  # start() is answered, every sample hangs
    target = TimedTarget()
    engine = Engine(
        PingWorkload(PingParameters(sessions=2), target),
        target,
        Load(duration_s=1.2),
        collectors=[OntapCollector(settings(replay.url, timeout_s=ontap_timeout_s))],
        interval_s=0.3,
        collector_timeout_s=engine_timeout_s,
    )
    began = time.perf_counter()
    result = asyncio.run(engine.run())
    assert result.outcome == OUTCOME_COMPLETED
    assert result.collector_errors["ontap"] > 0
    assert engine.recorder.totals["ping"].count > 0
    assert time.perf_counter() - began < 5


def test_a_counter_reset_skips_that_interval_only(replay: OntapReplay) -> None:
    replay.resets["vol_data"] = 2  # the second sample sees the counters restart from zero
    collector = OntapCollector(settings(replay.url, luns=[]))
    first, second, third = run(collector, [0.0, 1.0, 2.0, 3.0])
    assert "volume:svm1/vol_data" in by_entity(first)
    assert [s.entity for s in second if not s.gap] == ["volume:svm1/vol_log"]
    assert by_entity(second)["volume:svm1/vol_data"].gap == GAP_RESET
    assert dict(by_entity(third)["volume:svm1/vol_data"].values) == EXPECTED["volume:svm1/vol_data"]
    assert collector.skipped == {"counter_reset": 1}


def test_a_stale_timestamp_skips_and_the_next_reading_spans_both(replay: OntapReplay) -> None:
    replay.stale_requests = {3}  # the second sample repeats the first one's step
    collector = OntapCollector(settings(replay.url, luns=[]))
    first, second, third = run(collector, [0.0, 1.0, 2.0, 3.0])
    assert len(first) == 2 and second == []
    assert dict(by_entity(third)["volume:svm1/vol_data"].values) == EXPECTED["volume:svm1/vol_data"]
    assert collector.skipped == {"stale_timestamp": 2}


def test_secrets_never_reach_describe_or_messages(replay: OntapReplay, tmp_path: Path) -> None:
    secret_file = tmp_path / "ontap-password"
    secret_file.write_text(PASSWORD + "\n")
    collector = OntapCollector(
        settings(replay.url, password_env=None, password_file=secret_file, volumes=["nope"])
    )
    with pytest.raises(CollectorError) as caught:
        run(collector, [0.0])
    described = json.dumps(collector.describe())
    assert PASSWORD not in described and PASSWORD not in str(caught.value)
    assert str(secret_file) in described  # the reference, which is not a secret


def test_unset_user_variable_is_named(replay: OntapReplay, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ONTAP_TEST_USER")
    with pytest.raises(ConfigError, match="username_env: ONTAP_TEST_USER is not set"):
        run(OntapCollector(settings(replay.url)), [0.0])


def test_auto_needs_ontap_settings_and_validates_them() -> None:
    assert auto(TimedTarget(), {}) == []
    assert collectors()["ontap"].auto is auto
    options = {"cluster": "filer.example", "username_env": "U", "password_env": "P"}
    [collector] = auto(TimedTarget(), {"ontap": options | {"svm": "svm1"}})
    assert isinstance(collector, OntapCollector)
    assert collector.describe()["cluster"] == "https://filer.example:443"
    with pytest.raises(ScenarioError) as caught:
        auto(TimedTarget(), {"ontap": options | {"svm": "svm1", "password": "x"}})
    assert caught.value.problems == [
        "collectors.ontap.password: a literal password is not accepted; name an environment "
        "variable with password_env or a file with password_file"
    ]
    with pytest.raises(ScenarioError, match=r"^collectors\.ontap: name volumes, luns or an svm"):
        auto(TimedTarget(), {"ontap": options})


@pytest.mark.parametrize(
    ("cluster", "problem"),
    [
        ("http://filer.example", "use https"),
        ("https://filer.example/api", "give a host name"),
        ("http://127.evil.example", "use https"),
    ],
)
def test_cluster_must_be_https_except_on_loopback(cluster: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        OntapSettings(cluster=cluster, username_env="U", password_env="P", svm="s")
    url = OntapSettings(
        cluster="http://127.0.0.1:8080", username_env="U", password_env="P", svm="s"
    )
    assert OntapCollector(url).base_url == "http://127.0.0.1:8080"
