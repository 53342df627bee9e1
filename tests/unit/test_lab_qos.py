"""The lab array's service model (:mod:`storage.lab.qos`) on given times, and its ``--volume``
keys: a FIFO queue in front of a QoS ceiling, then the base service time."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.errors import ConfigError
from storage.lab import parse_volume
from storage.lab.array import policy_changes, set_policy
from storage.lab.qos import Policy, QosQueue, read_policy


def test_below_the_ceiling_a_request_takes_the_base_service_time() -> None:
    queue = QosQueue(Policy(max_iops=500, service_us=500))
    for i in range(10):  # one every 4 ms: half the ceiling
        got = queue.admit(4096, i * 0.004)
        assert got.qos_delay_s == 0.0
        assert got.done_s - i * 0.004 == pytest.approx(0.0005)


def test_past_the_ceiling_the_fifo_queue_grows_and_requests_leave_at_the_ceiling() -> None:
    queue = QosQueue(Policy(max_iops=500, service_us=500))
    burst = [queue.admit(4096, 1.0) for _ in range(16)]  # 16 arrive at once
    starts = [a.start_s for a in burst]
    assert starts == pytest.approx([1.0 + i / 500 for i in range(16)])  # 2 ms apart, in order
    assert burst[-1].qos_delay_s == pytest.approx(15 / 500)
    # Little's law: 16 in flight at 500/s wait 32 ms on average once the queue is steady.
    steady = QosQueue(Policy(max_iops=500, service_us=0))
    done = [steady.admit(4096, 0.0).done_s for _ in range(16)]
    for _ in range(2000):  # each completion sends the next request (a closed loop of 16)
        now = min(done)
        done.remove(now)
        done.append(steady.admit(4096, now).done_s)
    assert (max(done) - min(done)) == pytest.approx(15 / 500, rel=0.01)


def test_bandwidth_ceiling_spaces_large_requests_by_their_size() -> None:
    queue = QosQueue(Policy(max_iops=10_000, max_bps=1 << 20, service_us=0))
    first, second = queue.admit(128 << 10, 0.0), queue.admit(128 << 10, 0.0)
    assert second.start_s - first.start_s == pytest.approx(0.125)  # 128 KiB at 1 MiB/s


def test_no_policy_means_no_queue_and_a_new_policy_applies_to_new_arrivals() -> None:
    queue = QosQueue(Policy(service_us=200))
    assert all(queue.admit(4096, 0.0).qos_delay_s == 0 for _ in range(100))
    queue.set_policy(Policy(max_iops=100, service_us=200))
    assert [queue.admit(4096, 5.0).start_s for _ in range(3)] == pytest.approx([5.0, 5.01, 5.02])


def test_policy_file_round_trip_and_changes(tmp_path: Path) -> None:
    record = {"dir": str(tmp_path), "policy": Policy(max_iops=500).as_dict()}
    assert read_policy(tmp_path) == Policy()  # no file yet: the default policy
    assert set_policy(record, {"max_iops": 0, "max_bps": 40 << 20})["max_iops"] is None
    assert read_policy(tmp_path) == Policy(max_iops=None, max_bps=40 << 20, service_us=500)
    assert policy_changes({"qos_iops": 2000, "service_us": 300}) == {
        "max_iops": 2000,
        "service_us": 300,
    }


def test_volume_keys_of_an_array_volume() -> None:
    spec = parse_volume("lun:qos-iops=500,qos-bps=40M,service-us=300,size=1G")
    assert spec.array == {"max_iops": 500, "max_bps": 40 << 20, "service_us": 300}
    assert spec.size_bytes == 1 << 30 and dict(spec.ceilings) == {}
    assert parse_volume("lun:array=1").array == {}
    assert parse_volume("old:read-iops=500").array is None
    with pytest.raises(ConfigError, match="array=1"):
        parse_volume("lun:array=maybe")
    with pytest.raises(ConfigError, match="qos-iops"):
        parse_volume("lun:qos-iosp=5")  # the error lists the keys known
    with pytest.raises(ConfigError, match="whole number"):
        parse_volume("lun:qos-iops=fast")
