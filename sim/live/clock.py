"""Each worker's clock offset from the master's, measured on the control channel as NTP does.

The master sends a worker ``dbsim_clock`` with its wall clock at sending, ``t1``; the worker
answers at once with ``dbsim_clock_reply`` carrying ``t1``, its own wall clock when the probe
arrived, ``t2``, and when it answers, ``t3``; the master reads its clock when the answer
arrives, ``t4`` (RFC 5905, section 8):

* offset of the worker's clock from the master's: ``((t2 - t1) + (t3 - t4)) / 2``
* round-trip delay: ``(t4 - t1) - (t3 - t2)``

Whatever the split of the delay between the two directions, the true offset lies within
``delay / 2`` of the estimate: that half delay is the *uncertainty*. Of all the probes of a
run the one with the smallest delay gives the estimate (NTP's clock filter keeps the
minimum-delay sample for the same reason: queueing only ever adds delay).

The master probes every worker of a run when it starts it and every ``PROBE_EVERY_S`` while
it runs; the offsets go into the bundle (``distributed.workers[].clock``) and each worker's
wall-clock figures (its intervals' start, its sessions' start) are corrected by its offset,
so its samples line up with the others'.

Two limits, both documented in docs/distributed.md:

* an uncertainty above ``MAX_UNCERTAINTY_FRACTION`` of the collector interval: the worker's
  samples cannot be placed on the run's clock to better than that, and the bundle says so
  (``aligned: false`` and a message);
* an offset beyond ``MAX_OFFSET_S``: measured and corrected, but flagged (``flag`` and a
  message): such a host's time synchronisation is broken, and its own logs will not line up
  with the bundle either.

Outside :mod:`sim.locust` (whose import patches sockets with gevent): the arithmetic is
tested in the test process, and the master and workers import it from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MSG_CLOCK = "dbsim_clock"
MSG_CLOCK_REPLY = "dbsim_clock_reply"
#: Probes sent to each worker when a run starts (a few, so one queued behind a report does
#: not decide), then one every PROBE_EVERY_S while it runs.
FIRST_PROBES = 5
FIRST_PROBE_GAP_S = 0.05
PROBE_EVERY_S = 2.0
#: The uncertainty allowed, as a fraction of the collector interval (10 %: an interval's
#: samples may then be misplaced by at most a tenth of it).
MAX_UNCERTAINTY_FRACTION = 0.10
#: Beyond this offset a worker's clock is flagged (corrected all the same).
MAX_OFFSET_S = 10.0
#: Probes kept per worker in the bundle (the best first).
PROBES_RECORDED = 5


@dataclass(frozen=True)
class Probe:
    """One exchange: the four timestamps (master t1, t4; worker t2, t3), in seconds."""

    t1: float
    t2: float
    t3: float
    t4: float

    @property
    def offset(self) -> float:
        """The worker's clock minus the master's."""
        return ((self.t2 - self.t1) + (self.t3 - self.t4)) / 2.0

    @property
    def delay(self) -> float:
        return (self.t4 - self.t1) - (self.t3 - self.t2)


@dataclass
class ClockEstimate:
    """The probes of one worker and what they say of its clock."""

    probes: list[Probe] = field(default_factory=list)

    def add(self, probe: Probe) -> None:
        if probe.delay >= 0:  # a negative delay: a clock stepped mid-probe; not a sample
            self.probes.append(probe)

    @property
    def best(self) -> Probe | None:
        return min(self.probes, key=lambda p: p.delay, default=None)

    @property
    def offset(self) -> float:
        best = self.best
        return best.offset if best is not None else 0.0

    @property
    def uncertainty(self) -> float | None:
        best = self.best
        return best.delay / 2.0 if best is not None else None

    def to_master(self, wall: float) -> float:
        """A wall-clock time of the worker's, on the master's clock."""
        return wall - self.offset

    def section(self, interval_s: float) -> dict[str, Any]:
        """``distributed.workers[].clock`` of the bundle."""
        uncertainty = self.uncertainty
        bound = MAX_UNCERTAINTY_FRACTION * interval_s
        if uncertainty is None:
            return {
                "measured": False,
                "aligned": False,
                "note": "no probe answered: the worker's wall-clock figures are its own",
            }
        ranked = sorted(self.probes, key=lambda p: p.delay)[:PROBES_RECORDED]
        flag = None
        if abs(self.offset) > MAX_OFFSET_S:
            flag = f"offset beyond {MAX_OFFSET_S:g} s: the host's time sync is broken"
        return {
            "measured": True,
            "method": "NTP-style request/response on the control channel, minimum delay",
            "offset_s": round(self.offset, 6),
            "uncertainty_s": round(uncertainty, 6),
            "uncertainty_bound_s": round(bound, 6),
            "aligned": uncertainty <= bound,
            "flag": flag,
            "probes": len(self.probes),
            "best": [
                {"t1": p.t1, "t2": p.t2, "t3": p.t3, "t4": p.t4, "delay_s": round(p.delay, 6)}
                for p in ranked
            ],
        }


def messages(index: int, section: dict[str, Any]) -> list[str]:
    """The bundle messages a worker's clock section calls for (none when it is fine)."""
    out = []
    if not section.get("measured"):
        out.append(f"worker {index}: clock offset not measured ({section.get('note')})")
        return out
    if not section["aligned"]:
        out.append(
            f"worker {index}: clock offset {section['offset_s']:+.3f} s known only to "
            f"+/-{section['uncertainty_s']:.3f} s, more than {MAX_UNCERTAINTY_FRACTION:.0%} "
            "of the interval: its samples are not aligned with the others' (measured)"
        )
    if section.get("flag"):
        out.append(
            f"worker {index}: clock offset {section['offset_s']:+.3f} s "
            f"(+/-{section['uncertainty_s']:.3f} s, measured) is beyond {MAX_OFFSET_S:g} s; "
            "corrected in this bundle, but fix the host's time synchronisation"
        )
    return out


def reply(data: dict[str, Any], received: float, now: float) -> dict[str, Any]:
    """The worker's answer to a probe: ``t2`` when it arrived, ``t3`` when answered."""
    return {
        "run": data.get("run"),
        "n": data.get("n"),
        "t1": data.get("t1"),
        "t2": received,
        "t3": now,
    }


def probe_from_reply(data: dict[str, Any], t4: float) -> Probe | None:
    """The probe a reply completes (None: not a reply of the right shape)."""
    try:
        return Probe(float(data["t1"]), float(data["t2"]), float(data["t3"]), t4)
    except (KeyError, TypeError, ValueError):
        return None
