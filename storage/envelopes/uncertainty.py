"""How far an interpolated ceiling can be from the truth: the leave-one-out error of each
interpolation rule on an envelope's *own* published tables.

Two rules interpolate (see :mod:`storage.envelopes.model`):

* ``mix``: harmonic in service time between published read mixes. Tested by dropping each
  published point that has neighbours on both sides, interpolating it from them, and comparing
  with the published figure (a table of five mixes gives three cases).
* ``size``: service time linear in request size between published sizes (the random and
  sequential tables in size order; between 8 and 64 KiB this is the random-to-sequential
  bridge). Tested by dropping each table that has tables on both sides and reading it from
  them at every read mix the three share.

The error of one case is ``estimate / published - 1``: positive when the rule *overshoots*
(promises more than was measured). The band is the lowest and highest error over the cases.
An answer read through both rules compounds the two bands. An envelope whose tables leave no
case (two mixes only, two sizes only) has an *untested* band: nothing on its page can say how
good the rule is there, and the answer says so. Nothing here is typed in: every band is
computed from the data file each time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from storage.envelopes.model import Envelope
    from storage.envelopes.schema import Table

RULES = {
    "mix": "harmonic in service time between the published read mixes (1/IOPS linear in the "
    "read share)",
    "size": "service time linear in request size between the published sizes (1/IOPS linear "
    "in KiB; 8→64 KiB bridges the random table to the sequential one)",
    "capacity": "linear in capacity between the published volume sizes",
}


@dataclass(frozen=True)
class Band:
    """The leave-one-out error of ``rules`` on one envelope's tables, in percent."""

    rules: tuple[str, ...]
    low_pct: float
    high_pct: float
    cases: int
    overshoots: int

    @property
    def tested(self) -> bool:
        """Whether the envelope's own tables gave any case to test the rule on."""
        return self.cases > 0

    @property
    def conservative(self) -> bool:
        """True only when no case overshot the published figure."""
        return self.tested and self.high_pct <= 0

    def lowest_ceiling(self, value: float) -> float:
        """The ceiling if the rule overshoots here as much as its worst case."""
        return value / (1 + max(self.high_pct, 0.0) / 100)

    def highest_ceiling(self, value: float) -> float:
        """The ceiling if the rule undershoots here as much as its worst case."""
        return value / (1 + min(self.low_pct, 0.0) / 100)

    def describe(self) -> str:
        """``rule …; leave-one-out on this envelope's tables: -3.1 % to +20.6 % (12 cases, 5
        overshoot)`` or why it is untested."""
        rule = "; then ".join(RULES[r] for r in self.rules)
        if not self.tested:
            return (
                f"{rule}; untested: this envelope's tables leave no published point between "
                f"two others to check the rule against"
            )
        verdict = "never overshot" if self.conservative else f"{self.overshoots} overshoot"
        return (
            f"{rule}; leave-one-out on this envelope's own tables: {self.low_pct:+.1f} % to "
            f"{self.high_pct:+.1f} % ({self.cases} cases, {verdict})"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "rules": list(self.rules),
            "low_pct": round(self.low_pct, 3),
            "high_pct": round(self.high_pct, 3),
            "cases": self.cases,
            "overshoots": self.overshoots,
            "tested": self.tested,
            "conservative": self.conservative,
            "text": self.describe(),
        }


def mix_errors(env: Envelope) -> list[float]:
    """Leave-one-out errors of the mix rule on every table of ``env`` (fractions)."""
    errors = []
    for table in env.spec.tables:
        points = table.sorted_points()
        for index in range(1, len(points) - 1):
            reduced = table.model_copy(update={"points": points[:index] + points[index + 1 :]})
            fraction = points[index].fraction
            errors.append(env.rate(reduced, fraction).total / env.rate(table, fraction).total - 1)
    return errors


def size_errors(env: Envelope) -> list[float]:
    """Leave-one-out errors of the size rule: each table between two others, at every mix
    the three publish (fractions)."""
    tables = sorted(
        (t for t in env.spec.tables if t.block_size_kib is not None),
        key=lambda t: t.block_size_kib or 0.0,
    )
    errors = []
    for low, middle, high in zip(tables, tables[1:], tables[2:], strict=False):
        assert middle.block_size_kib is not None
        for pct in sorted(_pcts(low) & _pcts(middle) & _pcts(high)):
            fraction = pct / 100
            estimate = env.blend(low, high, fraction, middle.block_size_kib).total
            errors.append(estimate / env.rate(middle, fraction).total - 1)
    return errors


def _pcts(table: Table) -> set[float]:
    return {p.read_pct for p in table.points}


def band(env: Envelope, rules: tuple[str, ...]) -> Band:
    """The band of ``rules`` on ``env``: each rule's leave-one-out extremes, compounded when
    an answer goes through more than one; untested when any rule has no case."""
    low, high, cases, overshoots = 1.0, 1.0, 0, 0
    for rule in rules:
        errors = {"mix": mix_errors, "size": size_errors}.get(rule, lambda _env: [])(env)
        if not errors:
            return Band(rules, 0.0, 0.0, 0, 0)
        low *= 1 + min(errors)
        high *= 1 + max(errors)
        cases += len(errors)
        overshoots += sum(1 for e in errors if e > 1e-12)
    return Band(rules, (low - 1) * 100, (high - 1) * 100, cases, overshoots)
