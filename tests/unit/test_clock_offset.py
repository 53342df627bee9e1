"""sim.live.clock: the NTP arithmetic of a worker's clock offset, its bound and its flags.

The four timestamps are built from a known offset and known one-way delays, so each figure
is checked against the value it must have (RFC 5905, section 8). A real shifted clock is
tested in tests/integration/test_netns_hosts.py (libfaketime).
"""

from __future__ import annotations

import pytest

from sim.live.clock import (
    MAX_OFFSET_S,
    MAX_UNCERTAINTY_FRACTION,
    ClockEstimate,
    Probe,
    messages,
    probe_from_reply,
    reply,
)


def exchange(t1: float, offset: float, out: float, back: float, busy: float = 0.0) -> Probe:
    """A probe sent at ``t1`` (master clock) to a worker ``offset`` ahead, ``out`` s on the
    way there, ``busy`` s in the worker, ``back`` s on the way back."""
    t2 = t1 + out + offset
    t3 = t2 + busy
    t4 = t1 + out + busy + back
    return Probe(t1, t2, t3, t4)


def test_symmetric_delays_give_the_offset_exactly() -> None:
    probe = exchange(1000.0, offset=3.0, out=0.002, back=0.002, busy=0.001)
    assert probe.offset == pytest.approx(3.0, abs=1e-9)
    assert probe.delay == pytest.approx(0.004, abs=1e-9)  # the worker's own time excluded


@pytest.mark.parametrize(("out", "back"), [(0.010, 0.0), (0.0, 0.010), (0.007, 0.003)])
def test_any_split_of_the_delay_stays_within_half_the_round_trip(out: float, back: float) -> None:
    probe = exchange(50.0, offset=-2.5, out=out, back=back)
    assert abs(probe.offset - -2.5) <= probe.delay / 2 + 1e-9
    assert probe.offset == pytest.approx(-2.5 + (out - back) / 2, abs=1e-9)


def test_the_minimum_delay_probe_decides() -> None:
    estimate = ClockEstimate()
    estimate.add(exchange(0.0, offset=1.0, out=0.050, back=0.001))  # queued one way: 24.5 ms off
    estimate.add(exchange(2.0, offset=1.0, out=0.001, back=0.001))
    estimate.add(exchange(4.0, offset=1.0, out=0.001, back=0.030))
    assert estimate.offset == pytest.approx(1.0, abs=1e-9)
    assert estimate.uncertainty == pytest.approx(0.001, abs=1e-9)
    assert estimate.to_master(101.0) == pytest.approx(100.0)


def test_a_clock_stepped_mid_probe_is_not_a_sample() -> None:
    estimate = ClockEstimate()
    estimate.add(Probe(10.0, 20.0, 20.0, 9.0))  # answer arrives before the probe left
    assert estimate.probes == [] and estimate.uncertainty is None and estimate.offset == 0.0
    section = estimate.section(1.0)
    assert section["measured"] is False and section["aligned"] is False
    assert messages(0, section) == [
        "worker 0: clock offset not measured (no probe answered: the worker's wall-clock "
        "figures are its own)"
    ]


def test_an_uncertainty_over_the_fraction_of_the_interval_is_not_aligned() -> None:
    interval = 1.0
    over = 2 * MAX_UNCERTAINTY_FRACTION * interval * 1.02  # round trip: uncertainty 2 % over
    estimate = ClockEstimate()
    estimate.add(exchange(0.0, offset=0.2, out=over / 2, back=over / 2))
    section = estimate.section(interval)
    assert section["aligned"] is False and section["flag"] is None
    assert section["uncertainty_bound_s"] == pytest.approx(MAX_UNCERTAINTY_FRACTION * interval)
    (note,) = messages(3, section)
    assert note.startswith("worker 3: clock offset +0.200 s known only to +/-0.102 s")
    within = ClockEstimate()
    within.add(exchange(0.0, offset=0.2, out=0.09, back=0.09))
    assert within.section(interval)["aligned"] is True and messages(3, within.section(1.0)) == []


def test_an_offset_beyond_the_bound_is_flagged_and_still_corrected() -> None:
    estimate = ClockEstimate()
    estimate.add(exchange(0.0, offset=MAX_OFFSET_S + 20, out=0.001, back=0.001))
    section = estimate.section(1.0)
    assert section["aligned"] is True and section["flag"]
    assert section["offset_s"] == pytest.approx(MAX_OFFSET_S + 20)
    (note,) = messages(1, section)
    assert "beyond 10 s; corrected in this bundle" in note
    assert estimate.to_master(1000.0) == pytest.approx(1000.0 - MAX_OFFSET_S - 20)


def test_the_wire_round_trip() -> None:
    answer = reply({"run": "r1", "n": 4, "t1": 10.0}, received=13.001, now=13.002)
    assert answer == {"run": "r1", "n": 4, "t1": 10.0, "t2": 13.001, "t3": 13.002}
    probe = probe_from_reply(answer, 10.003)  # 1 ms each way, 1 ms in the worker
    assert probe is not None and probe.offset == pytest.approx(3.0, abs=1e-9)
    assert probe_from_reply({"t1": "x"}, 1.0) is None
    assert probe_from_reply({"t1": 1.0, "t2": None, "t3": 2.0}, 3.0) is None
