"""The ONTAP collector across counter resets and malformed records, on the replayed REST
answers (tests/support/ontap_replay.py): a node takeover restarts the counters of the objects
it moves, a record loses or mangles a figure. The interval across is a gap (no figures, the
counter and its two readings, or the field, said); no rate anywhere exceeds 10 × the larger
reading per second; the next interval is exact again; the other objects keep their figures."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sim.protocols import GAP_RESET, GAP_UNREADABLE, Sample
from storage.collectors.ontap import OntapCollector, Reading, rates, reading
from tests.integration.test_ontap_collector import (
    ALL,
    EXPECTED,
    LUN_DB,
    PASSWORD,
    USER,
    VOL_DATA,
    VOL_LOG,
    run,
    settings,
)
from tests.support.counters import by_entity, impossible_rates
from tests.support.ontap_replay import Entity, OntapReplay

pytestmark = pytest.mark.integration

NODE1 = {"volume:svm1/vol_data": VOL_DATA, "lun:/vol/vol_data/lun_db": LUN_DB}  # taken over
STEP_S = 5.0


@pytest.fixture
def replay(monkeypatch: pytest.MonkeyPatch) -> Iterator[OntapReplay]:
    monkeypatch.setenv("ONTAP_TEST_USER", USER)
    monkeypatch.setenv("ONTAP_TEST_PASSWORD", PASSWORD)
    with OntapReplay(ALL, username=USER, password=PASSWORD) as server:
        yield server


def possible(samples: list[Sample], entities: dict[str, Entity], steps: tuple[int, int],
             resets: dict[str, int]) -> None:  # fmt: skip
    """No operation or byte rate above 10 × the larger of the two readings per second."""
    for sample in samples:
        if sample.gap or sample.entity not in entities:
            continue
        entity = entities[sample.entity]
        old, new = (entity.counters(step, resets.get(entity.name)) for step in steps)
        totals = {
            f"{io}_{suffix}": (float(old[group][io]), float(new[group][io]))
            for group, suffix in (("iops_raw", "iops"), ("throughput_raw", "bps"))
            for io in ("read", "write", "other", "total")
        }
        assert impossible_rates(sample.values, totals, STEP_S) == {}, sample.entity


def test_a_node_takeover_resets_its_objects_only(replay: OntapReplay) -> None:
    replay.resets = {"vol_data": 2, "/vol/vol_data/lun_db": 2}  # node 1's objects move at step 2
    collector = OntapCollector(settings(replay.url))
    first, across, after = run(collector, [0.0, 1.0, 2.0, 3.0])
    got = by_entity(across)
    for entity in NODE1:
        assert (got[entity].gap, dict(got[entity].values)) == (GAP_RESET, {}), entity
    assert got["volume:svm1/vol_data"].detail == ("statistics.iops_raw.read: 1000000000500 -> 500")
    assert dict(got["volume:svm1/vol_log"].values) == EXPECTED["volume:svm1/vol_log"]
    # Re-baselined at the takeover reading: the next interval is exact for every object.
    for entity, values in EXPECTED.items():
        assert dict(by_entity(after)[entity].values) == values, entity
    assert collector.skipped == {"counter_reset": 2}
    entities = NODE1 | {"volume:svm1/vol_log": VOL_LOG}
    for samples, steps in ((first, (0, 1)), (across, (1, 2)), (after, (2, 3))):
        possible(samples, entities, steps, replay.resets)
    # Differenced anyway, the takeover reads as about -2e11 reads per second.
    before, now = (
        Reading(_figures(VOL_DATA.counters(step, replay.resets["vol_data"])), None, None, "ok")
        for step in (1, 2)
    )
    assert rates(before, now, STEP_S)["read_iops"] < -1e11


def _figures(counters: dict[str, dict[str, int]]) -> dict[str, int | float]:
    record = {"statistics": counters | {"status": "ok"}}
    parsed = reading(record, "statistics")
    assert parsed is not None
    return dict(parsed.figures)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(record: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = record
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value

    return edit


DELETE = object()
MALFORMED = {
    "string": ("statistics.iops_raw.read", "12x", 'statistics.iops_raw.read is "12x"'),
    "negative": ("statistics.iops_raw.write", -5, "statistics.iops_raw.write is -5"),
    "fraction": ("statistics.latency_raw.read", 12.5, "statistics.latency_raw.read is 12.5"),
    "bool": ("statistics.throughput_raw.other", True, "statistics.throughput_raw.other is true"),
    "no-total": ("statistics.iops_raw.total", DELETE, "statistics.iops_raw.total is null"),
    "no-group": ("statistics.latency_raw", DELETE, "statistics.latency_raw is missing"),
}


@pytest.mark.parametrize("how", sorted(MALFORMED))
def test_a_malformed_record_costs_only_its_object(replay: OntapReplay, how: str) -> None:
    path, value, said = MALFORMED[how]
    replay.mangle[("vol_data", 2)] = _set(path, value)
    collector = OntapCollector(settings(replay.url))
    _, during, after = run(collector, [0.0, 1.0, 2.0, 3.0])
    bad = by_entity(during)["volume:svm1/vol_data"]
    assert (bad.gap, dict(bad.values)) == (GAP_UNREADABLE, {})
    assert bad.detail.startswith(said + ": {") and len(bad.detail) < 300
    for entity in ("volume:svm1/vol_log", "lun:/vol/vol_data/lun_db"):
        assert dict(by_entity(during)[entity].values) == EXPECTED[entity]  # as on clean answers
    # The last good reading stayed the baseline: the next covers both steps, exactly.
    spanned = by_entity(after)["volume:svm1/vol_data"]
    assert dict(spanned.values) == EXPECTED["volume:svm1/vol_data"]
    assert spanned.meta["interval_s"] == "10"
    assert collector.skipped == {"malformed": 1}


def test_an_incomplete_status_is_unreadable(replay: OntapReplay) -> None:
    replay.mangle[("/vol/vol_data/lun_db", 1)] = _set("statistics.status", "partial_no_data")
    [samples, _] = run(OntapCollector(settings(replay.url)), [0.0, 1.0, 2.0])
    lun = by_entity(samples)["lun:/vol/vol_data/lun_db"]
    assert (lun.gap, lun.detail) == (GAP_UNREADABLE, "statistics.status is partial_no_data")


def test_a_malformed_metric_record_is_unreadable(replay: OntapReplay) -> None:
    replay.mangle[("vol_log", 1)] = _set("metric.latency.write", "fast")
    [samples] = run(OntapCollector(settings(replay.url, mode="metric")), [0.0, 1.0])
    got = by_entity(samples)
    assert got["volume:svm1/vol_log"].gap == GAP_UNREADABLE
    assert got["volume:svm1/vol_log"].detail.startswith('metric.latency.write is "fast"')
    assert got["lun:/vol/vol_data/lun_db"].values["total_iops"] == 76.0
