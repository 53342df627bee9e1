"""A server restart is one outage window, however late each session could notice it."""

from __future__ import annotations

from sim.run.finish import SAME_OUTAGE_GAP_S, outage_windows


def _outage(session: int, lost: float, restored: float) -> dict[str, float]:
    return {"session": session, "lost_t": lost, "restored_t": restored, "attempts": 1}


def test_sessions_that_find_the_loss_after_the_others_are_back_are_the_same_outage() -> None:
    # The stressed timing phase's run before a group checked its members together: two native
    # sessions of one thread lost at 5.046 s, the other two found their connections broken
    # only when the thread came to them. A session in think time or between an open loop's
    # operations still finds its loss only at its next operation, as late.
    got = outage_windows(
        [
            _outage(0, 5.046, 12.18),
            _outage(1, 5.046, 12.197),
            _outage(2, 12.198, 12.21),
            _outage(3, 12.198, 12.224),
        ]
    )
    assert got["reconnects"] == 4
    (window,) = got["windows"]
    assert window == {
        "lost_t": 5.046,
        "last_lost_t": 12.198,
        "restored_t": 12.224,
        "sessions": 4,
        "duration_s": 7.178,
    }


def test_two_restarts_further_apart_are_two_windows() -> None:
    later = 12.197 + SAME_OUTAGE_GAP_S + 0.5
    got = outage_windows([_outage(0, 5.046, 12.197), _outage(1, later, later + 3)])
    assert [w["sessions"] for w in got["windows"]] == [1, 1]
    assert got["windows"][1]["lost_t"] == later
