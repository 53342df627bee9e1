"""The replay's fidelity rule for a rate whose count is small (sim.replay.fidelity): judged at
the larger of the documented ±5 % and the two counts' Poisson interval, or not judged, said
in the check and on the console, on numbers worked out by hand."""

from __future__ import annotations

import json
import math

import pytest

from sim.replay import console, fidelity
from sim.replay.shape import Shape, Window


def _shape(read: float, write: float, seconds: float) -> Shape:
    window = Window(0.0, seconds, seconds, int(seconds), "test")
    return Shape(window, read, write, 8.0, 8.0)


def _check(found: list[fidelity.Check], figure: str) -> fidelity.Check:
    (check,) = [c for c in found if c.figure == figure]
    return check


def test_the_poisson_half_width_of_two_counts() -> None:
    # 11 writes captured, 11 asked: 1.96 x sqrt(2/11) = 0.8358.
    assert fidelity.poisson_tolerance(11, 11) == pytest.approx(0.8358, abs=1e-4)
    # 5,000 and 10,000: 1.96 x sqrt(3e-4) = 0.0339, narrower than the ±5 % (which then holds).
    assert fidelity.poisson_tolerance(5000, 10000) == pytest.approx(0.03395, abs=1e-5)
    assert fidelity.poisson_tolerance(0, 10) is None


def test_a_large_count_keeps_the_documented_tolerance() -> None:
    capture = _shape(500.0, 250.0, 20.0)  # 10,000 reads, 5,000 writes
    replay = _shape(500.0 * 1.06, 250.0 * 0.96, 20.0)
    found = fidelity.checks(capture, replay, 1.0)
    reads, writes = _check(found, "read IOPS"), _check(found, "write IOPS")
    # Poisson's 1.96 x sqrt(1/10000 + 1/10000) = 2.8 % and 3.9 %: the ±5 % is the larger.
    assert (reads.tolerance, reads.ok, reads.note) == ("±5 %", False, "")
    assert (writes.tolerance, writes.ok, writes.off) == ("±5 %", True, "-4.0 %")


def test_a_small_write_count_is_judged_at_its_poisson_interval() -> None:
    """0.55 writes/s over 20 s (11 writes) replayed at 2x over 20 s: 22 asked."""
    capture = _shape(275.0, 0.55, 20.0)
    half = 1.96 * math.sqrt(1 / 11 + 1 / 22)  # 0.7227
    within = fidelity.checks(capture, _shape(550.0, 1.1 * 1.70, 20.0), 2.0)
    writes = _check(within, "write IOPS")
    assert writes.tolerance == "±72 % Poisson" and writes.ok and writes.off == "+70.0 %"
    # The band it was judged at, carried by the check (and replay.json's as a list).
    assert writes.band == pytest.approx((1.1 * (1 - half), 1.1 * (1 + half)))
    assert json.loads(json.dumps(writes.as_dict()))["band"] == list(writes.band or ())
    assert "judged at ±72 %, not ±5 %: 11 writes in the capture's 20 s window, 22 asked" in (
        writes.note
    )
    beyond = fidelity.checks(capture, _shape(550.0, 1.1 * (1 + half + 0.01), 20.0), 2.0)
    assert not _check(beyond, "write IOPS").ok
    none = fidelity.checks(capture, _shape(550.0, 0.0, 20.0), 2.0)
    assert not _check(none, "write IOPS").ok  # none delivered lies outside ±72 %


def test_a_count_too_small_to_judge_says_so_never_a_silent_pass() -> None:
    """0.55 writes/s over a 6 s window: 3.3 writes captured, 3.3 asked: 1.96 x sqrt(2/3.3) = ±153 %."""
    capture = _shape(275.0, 0.55, 6.0)
    found = fidelity.checks(capture, _shape(275.0, 0.0, 6.0), 1.0)
    writes = _check(found, "write IOPS")
    assert writes.tolerance == "not judged" and writes.ok and writes.off == "-100.0 %"
    assert writes.note.startswith("write IOPS not judged: 3 writes in the window")
    assert "Poisson's 95 % interval ±153 %): too few" in writes.note
    # The mean size of those few writes is not judged either (4 of 24 KiB against 6 of 6.7
    # in the lab: -72 %, the mean of a handful).
    few = fidelity.checks(
        capture, Shape(_shape(275.0, 0.55, 6.0).window, 275.0, 0.55, 8.0, 2.0), 1.0
    )
    size = _check(few, "write size")
    assert (size.tolerance, size.ok, size.off) == ("not judged", True, "-75.0 %")
    assert size.note == "write size not judged: the mean of too few writes (as the write IOPS)"
    assert _check(few, "read size").tolerance == "±10 %"
    judged = fidelity.judge(capture, _shape(275.0, 0.0, 6.0), 1.0, {}, {})
    entry = {"scale": 1.0, "fidelity": judged}
    text = "\n".join(console._fidelity(entry))
    assert "write IOPS not judged: 3 writes in the window" in text
    assert "FAITHFUL at 1x: every judged figure within its tolerance (not judged: write" in text
    assert all(len(line) <= console.WIDTH for line in text.splitlines())
